package drill

import (
	"context"
	"fmt"

	"github.com/sturdyproxy/sturdy/internal/testing/fake"
)

// Incident 000: a WAF in front of the backends blocks one scanner. Every
// scanner request fails on every backend; nginx's passive checks
// (max_fails, proxy_next_upstream http_502) charged that to the backends,
// marked all of them down, and innocent users got "no live upstreams"
// 502s. sturdy must see that the failures follow the client.

// scannerFactor is how much faster than an innocent client the scanner
// sends.
const scannerFactor = 5

func wafSturdy(v vars) string {
	return `
admin: { listen: "off" }
listeners: [ { name: web, listen: "` + v.Listen + `" } ]
routes:
  # Defaults everywhere: the health model must cope without tuning.
  - { name: site, default: true, pool: web }
pools:
  - name: web
    hosts: ` + yamlHosts(v.Pools["main"]) + `
`
}

// wafNginx is the incident's portal config: passive checks with nginx's
// defaults written out, and 5xx answers passed to the next upstream (and
// counted as failures).
func wafNginx(v vars) string {
	return `
upstream WEB {
` + nginxServers(v.Pools["main"], "max_fails=1 fail_timeout=10s") + `}
server {
    listen ` + v.Listen + ` default_server;
    server_name portal.drill.test;
    location / {
        proxy_pass http://WEB;
        proxy_set_header Host $host;
        proxy_set_header X-Real-IP $remote_addr;
        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        proxy_connect_timeout 5s;
        proxy_read_timeout 30s;
        proxy_next_upstream error timeout http_500 http_502 http_503 http_504;
    }
}
`
}

func wafScanner(reset bool) func(context.Context, *env) (*Result, error) {
	return func(ctx context.Context, e *env) (*Result, error) {
		st := &stage{
			hosts:  map[string]int{"main": 2},
			routes: []routeNeed{{role: "site", pool: "main", host: "portal.drill.test", path: "/"}},
			sturdy: wafSturdy,
			nginx:  wafNginx,
		}
		if skip, err := e.prepare(st); err != nil || skip != "" {
			return notApplicable(skip), err
		}
		mode, how := fake.WAF502, "answered 502 to"
		if reset {
			mode, how = fake.WAFReset, "reset the connections of"
		}
		scanner := e.badClient()
		var wafs []*fake.WAF
		st.pools = map[string][]string{}
		for i := range e.hosts("main") {
			b, err := fake.NewBackend(fmt.Sprintf("b%d", i+1), e.net.host(octetMain, i))
			if err != nil {
				return nil, err
			}
			e.onCleanup(b.Close)
			w, err := fake.NewWAF(e.net.host(octetMiddle, i), b.Addr, scanner, mode)
			if err != nil {
				return nil, err
			}
			e.onCleanup(w.Close)
			wafs = append(wafs, w)
			st.pools["main"] = append(st.pools["main"], w.Addr)
		}
		px, err := e.start(ctx, st)
		if err != nil {
			return nil, err
		}
		ep, _ := px.endpoint("site")
		innocents := e.innocents(5)
		px.arm()
		run := runLoad(ctx, e.o.Duration,
			stream{group: "innocent", clients: innocents, rate: e.o.Rate, offsets: e.offsets(len(innocents)), timeout: clientTimeout,
				next: func(c, i int) request { return request{ep: ep, target: ep.path(fmt.Sprintf("page/%d?user=%d", i, c))} }},
			stream{group: "bad", clients: []string{scanner}, rate: scannerFactor * e.o.Rate, timeout: clientTimeout,
				next: func(_, i int) request {
					return request{ep: ep, target: ep.path(fmt.Sprintf("wp-admin/setup-%d.php", i))}
				}},
		)
		obs := px.observe()
		var blocked int64
		for _, w := range wafs {
			blocked += w.Blocked.Load()
		}

		r := newResult(obs)
		r.Innocent = summarize(fmt.Sprintf("%d clients", len(innocents)), run.of("innocent"))
		bad := summarize("scanner "+scanner, run.of("bad"))
		r.Bad = &bad
		r.Facts = append(r.Facts, fmt.Sprintf("the WAF %s %d scanner requests; the scanner got %s", how, blocked, bad.AnswersByStatus()))
		if obs.clientsAttributed > 0 {
			r.Facts = append(r.Facts, fmt.Sprintf("%d client_attributed event(s): the failures were pinned on the scanner", obs.clientsAttributed))
		}
		r.Headline = "innocent clients: " + errorsOrNone(r.Innocent)
		switch {
		case blocked == 0:
			r.Verdict, r.Why = Fail, "the WAF blocked nothing, so the incident was not re-enacted (is the client address forwarded in X-Forwarded-For or X-Real-IP?)"
		case r.Innocent.Failures > 0:
			r.Verdict = Fail
			r.Why = fmt.Sprintf("the scanner's blocked requests took the backends out: innocent clients got %s of %d requests", r.Innocent.FailuresByStatus(), r.Innocent.Requests)
		case obs.ejections > 0:
			r.Verdict = Fail
			r.Why = fmt.Sprintf("innocent clients were spared, but %d healthy backend(s) were ejected because of one client's failures", obs.ejections)
		default:
			r.Verdict = Pass
			r.Why = fmt.Sprintf("innocent clients saw 0 errors in %d requests while the WAF %s the scanner %d times; no backend was ejected", r.Innocent.Requests, how, blocked)
		}
		return r, nil
	}
}
