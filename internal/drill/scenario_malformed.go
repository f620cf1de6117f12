package drill

import (
	"context"
	"fmt"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/testing/fake"
)

// Incident 003: nginx in front of Node.js. URLs with raw non-ASCII bytes
// made Node close the socket without a word (ACK, then FIN); nginx counted
// that against the backends, ejected them, and unrelated requests got 502.
// sturdy must reject or re-encode such requests at the edge, and a request
// that fails the same way on two backends is the request's failure.

// malformedTargets are request targets as an unencoding client sends them:
// raw UTF-8 (and one GBK) bytes in the query and the path, after the
// postmortem's captured request.
func malformedTargets() []string {
	return []string{
		"api/hotel/detailrecommend?hotelName=7)\xef\xbf\xbdR\xef\xbf\xbd(fI7\xef\xbf\xbd\xef\xbf\xbd)\xe2\x94\xb3\xe2\x94\x93",
		"api/hotel/detailrecommend?hotelName=\xe4\xbd\xa0\xe5\xa5\xbd",
		"search/\xe9\x85\x92\xe5\xba\x97?city=1",
		"api/hotel/list?keyword=\xb1\xb1\xbe\xa9",
	}
}

func malformedSturdy(v vars) string {
	return `
admin: { listen: "off" }
listeners: [ { name: web, listen: "` + v.Listen + `" } ]
routes:
  - { name: site, default: true, pool: node }
pools:
  - name: node
    hosts: ` + yamlHosts(v.Pools["main"]) + `
`
}

// malformedNginx is the postmortem's config: a plain upstream (nginx's
// defaults, max_fails=1 fail_timeout=10s, written out) and proxy_pass.
func malformedNginx(v vars) string {
	return `
upstream node_server {
` + nginxServers(v.Pools["main"], "max_fails=1 fail_timeout=10s") + `}
server {
    listen ` + v.Listen + ` default_server;
    server_name _;
    location / {
        proxy_pass http://node_server;
        proxy_set_header Host $host;
    }
}
`
}

func malformedURL(ctx context.Context, e *env) (*Result, error) {
	st := &stage{
		hosts:  map[string]int{"main": 3},
		routes: []routeNeed{{role: "site", pool: "main", host: "hotel.drill.test", path: "/"}},
		sturdy: malformedSturdy,
		nginx:  malformedNginx,
	}
	if skip, err := e.prepare(st); err != nil || skip != "" {
		return notApplicable(skip), err
	}
	var nodes []*fake.NodeLike
	st.pools = map[string][]string{}
	for i := range e.hosts("main") {
		n, err := fake.NewNodeLike(e.net.host(octetMain, i), "")
		if err != nil {
			return nil, err
		}
		e.onCleanup(n.Close)
		nodes = append(nodes, n)
		st.pools["main"] = append(st.pools["main"], n.Addr)
	}
	px, err := e.start(ctx, st)
	if err != nil {
		return nil, err
	}
	ep, _ := px.endpoint("site")
	innocents := e.innocents(5)
	sender := e.badClient()
	targets := malformedTargets()
	first := e.pick(len(targets))
	px.arm()
	run := runLoad(ctx, e.o.Duration,
		stream{group: "innocent", clients: innocents, rate: e.o.Rate, offsets: e.offsets(len(innocents)), timeout: clientTimeout,
			next: func(c, i int) request {
				return request{ep: ep, target: ep.path(fmt.Sprintf("api/hotel/list?page=%d&c=%d", i, c))}
			}},
		stream{group: "bad", clients: []string{sender}, rate: e.o.Rate, timeout: clientTimeout,
			next: func(_, i int) request {
				return request{ep: ep, target: ep.path(targets[(first+i)%len(targets)]), raw: true}
			}},
	)
	obs := px.observe()
	var dropped int64
	for _, n := range nodes {
		dropped += n.Dropped.Load()
	}

	r := newResult(obs)
	r.Innocent = summarize(fmt.Sprintf("%d clients", len(innocents)), run.of("innocent"))
	bad := summarize("sender "+sender, run.of("bad"))
	r.Bad = &bad
	r.Facts = append(r.Facts,
		fmt.Sprintf("malformed requests got %s", describeMalformed(bad)),
		fmt.Sprintf("backends hung up on malformed requests %d times for %d sent", dropped, bad.Requests))
	r.Headline = "innocent clients: " + errorsOrNone(r.Innocent)
	switch {
	case r.Innocent.Failures > 0:
		r.Verdict = Fail
		r.Why = fmt.Sprintf("backends hanging up on malformed URLs were taken out: innocent clients got %s of %d requests", r.Innocent.FailuresByStatus(), r.Innocent.Requests)
	case obs.ejections > 0:
		r.Verdict = Fail
		r.Why = fmt.Sprintf("innocent clients were spared, but %d backend(s) were ejected over requests that fail everywhere", obs.ejections)
	case dropped > 2*int64(bad.Requests):
		r.Verdict = Fail
		r.Why = fmt.Sprintf("each malformed request was tried on more than two backends (%d hang-ups for %d requests)", dropped, bad.Requests)
	default:
		r.Verdict = Pass
		r.Why = fmt.Sprintf("innocent clients saw 0 errors in %d requests; malformed requests got %s; no backend was ejected", r.Innocent.Requests, describeMalformed(bad))
	}
	return r, nil
}

// describeMalformed says how the malformed requests were answered.
func describeMalformed(g Group) string {
	var parts []string
	for _, k := range sortedKeys(g.Answers) {
		what := ""
		switch k {
		case "400":
			what = " (refused at the edge)"
		case "200":
			what = " (re-encoded and answered)"
		case "502":
			what = " (failed on the backends)"
		}
		parts = append(parts, fmt.Sprintf("%s×%d%s", k, g.Answers[k], what))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}
