package drill

import (
	"context"
	"fmt"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/fake"
)

// Incident 002: nginx (ip_hash, default max_fails=1 fail_timeout=10s) in
// front of two Tomcats. One report endpoint ran past proxy_read_timeout;
// those timeouts marked both healthy backends down and every endpoint
// answered 502 in 10-second waves. sturdy must treat a timeout on one slow
// route as that route's problem.

// slowTimeout is the report route's response timeout in the built-in
// configs: the incident's 60s, scaled down to fit a drill.
const slowTimeout = 300 * time.Millisecond

func slowSturdy(v vars) string {
	return `
admin: { listen: "off" }
listeners: [ { name: web, listen: "` + v.Listen + `" } ]
routes:
  # The report endpoint has its own timeout (design.md section 6).
  - { name: slow, path: /report/, pool: app, timeouts: { response_header: ` + slowTimeout.String() + ` } }
  - { name: fast, default: true, pool: app }
pools:
  - name: app
    balance: hash # the incident's ip_hash
    hosts: ` + yamlHosts(v.Pools["main"]) + `
`
}

// slowNginx is the incident's setup: ip_hash with nginx's default passive
// settings (written out) and one read timeout for every location.
func slowNginx(v vars) string {
	return `
upstream mdata {
    ip_hash;
` + nginxServers(v.Pools["main"], "max_fails=1 fail_timeout=10s") + `}
server {
    listen ` + v.Listen + ` default_server;
    server_name _;
    proxy_read_timeout ` + nginxDuration(slowTimeout) + `;
    location / {
        proxy_pass http://mdata;
        proxy_set_header Host $host;
    }
}
`
}

func slowRoute(ctx context.Context, e *env) (*Result, error) {
	st := &stage{
		hosts: map[string]int{"main": 2},
		routes: []routeNeed{
			{role: "slow", pool: "main", host: "bi.drill.test", path: "/report/", slow: true},
			{role: "fast", pool: "main", host: "bi.drill.test", path: "/", fast: true},
		},
		sturdy: slowSturdy,
		nginx:  slowNginx,
	}
	if skip, err := e.prepare(st); err != nil || skip != "" {
		return notApplicable(skip), err
	}
	var backends []*fake.Backend
	st.pools = map[string][]string{}
	for i := range e.hosts("main") {
		b, err := fake.NewBackend(fmt.Sprintf("tomcat%d", i+1), e.net.host(octetMain, i))
		if err != nil {
			return nil, err
		}
		e.onCleanup(b.Close)
		backends = append(backends, b)
		st.pools["main"] = append(st.pools["main"], b.Addr)
	}
	px, err := e.start(ctx, st)
	if err != nil {
		return nil, err
	}
	slow, _ := px.endpoint("slow")
	fast, _ := px.endpoint("fast")
	exp := px.expect("slow")
	timeout := exp.responseTimeout
	if timeout <= 0 {
		timeout = slowTimeout
	}
	// Slower than the timeout on every backend, whatever the route allows.
	for _, b := range backends {
		b.Set(slow.path(""), fake.Behavior{Delay: timeout + time.Second})
	}
	reportTimeout := min(timeout*time.Duration(max(exp.tries, 1))+2*time.Second, 15*time.Second)

	innocents := e.innocents(6)
	reporters := []string{e.net.client(6), e.net.client(7), e.net.client(8)}
	px.arm()
	run := runLoad(ctx, e.o.Duration,
		stream{group: "innocent", clients: innocents, rate: e.o.Rate, offsets: e.offsets(len(innocents)), timeout: clientTimeout,
			next: func(c, i int) request {
				return request{ep: fast, target: fast.path(fmt.Sprintf("orders/%d?c=%d", i, c))}
			}},
		stream{group: "bad", clients: reporters, rate: e.o.Rate / 4, offsets: e.offsets(len(reporters)), timeout: reportTimeout,
			next: func(c, i int) request {
				return request{ep: slow, target: slow.path(fmt.Sprintf("distinct?view=%d", i))}
			}},
	)
	obs := px.observe()

	r := newResult(obs)
	r.Innocent = summarize(fmt.Sprintf("%d clients of other pages", len(innocents)), run.of("innocent"))
	bad := summarize(fmt.Sprintf("%d callers of the slow route", len(reporters)), run.of("bad"))
	r.Bad = &bad
	r.Facts = append(r.Facts, fmt.Sprintf("slow-route callers got %s, the slowest after %.1fs (route timeout %s)", bad.AnswersByStatus(), bad.MaxMs/1000, timeout))
	if obs.routesDegraded > 0 {
		r.Facts = append(r.Facts, fmt.Sprintf("%d route_degraded event(s): the timeouts were pinned on the route", obs.routesDegraded))
	}
	r.Headline = "other pages: " + errorsOrNone(r.Innocent)
	switch {
	case r.Innocent.Failures > 0:
		r.Verdict = Fail
		r.Why = fmt.Sprintf("timeouts on one slow route took the backends out: requests for other pages got %s of %d", r.Innocent.FailuresByStatus(), r.Innocent.Requests)
	case obs.ejections > 0:
		r.Verdict = Fail
		r.Why = fmt.Sprintf("other pages were spared, but %d healthy backend(s) were ejected over one route's timeouts", obs.ejections)
	default:
		r.Verdict = Pass
		r.Why = fmt.Sprintf("other pages saw 0 errors in %d requests while the slow route answered %s; no backend was ejected", r.Innocent.Requests, bad.AnswersByStatus())
	}
	return r, nil
}
