package health

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// A request that failed the same way on two hosts that serve others is
// the request's, unless its route's other requests fail that way too
// with none served meanwhile: a slow route's first requests time out on
// two hosts each, before the route has the failures to be degraded, and
// were answered "the request failed the same way on two backends" (the
// simulator's request precision, 0.85). The others' failed attempts count
// as they happen (AttemptFailed); the client's own do not, and any
// success of the route ends them.
func TestARouteFailingForOthersOwnsARequestsTwoFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before func(p *Pool, report, site testRoute)
		want   Attribution
	}{
		{"the route's other clients time out too, none served since", func(p *Pool, report, _ testRoute) {
			report.tr.AttemptFailed(outcome.ResponseTimeout, bitOf("198.51.100.2"))
			report.tr.AttemptFailed(outcome.ResponseTimeout, bitOf("198.51.100.3"))
		}, AttrRoute},
		{"the route served a request since the others failed", func(p *Pool, report, _ testRoute) {
			report.tr.AttemptFailed(outcome.ResponseTimeout, bitOf("198.51.100.2"))
			p.Record(p.Hosts[1], outcome.OK, req(report, "198.51.100.4"), time.Now())
		}, AttrRequest},
		{"only the client's own requests failed before", func(p *Pool, report, _ testRoute) {
			report.tr.AttemptFailed(outcome.ResponseTimeout, bitOf("198.51.100.1"))
		}, AttrRequest},
		{"the others failed another way", func(p *Pool, report, _ testRoute) {
			report.tr.AttemptFailed(outcome.Reset, bitOf("198.51.100.2"))
		}, AttrRequest},
		{"another route's requests fail that way", func(p *Pool, _, site testRoute) {
			site.tr.AttemptFailed(outcome.ResponseTimeout, bitOf("198.51.100.2"))
		}, AttrRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m, p, _ := setup(t, 2, "{}", nil)
				report, site := route(m, "report", 0), route(m, "site", 1)
				for _, h := range p.Hosts {
					siteTraffic(p, site, h, 20)
				}
				time.Sleep(100 * time.Millisecond)
				tc.before(p, report, site)
				got := p.Settle(req(report, "198.51.100.1"), []Failure{
					{Host: p.Hosts[0], Class: outcome.ResponseTimeout}, {Host: p.Hosts[1], Class: outcome.ResponseTimeout},
				}, true, time.Now())
				if got != tc.want {
					t.Fatalf("attributed to %q, want %q", got, tc.want)
				}
				if n := m.AttributedCount(AttrHost); n != 0 {
					t.Fatalf("%d failures charged to hosts that serve others", n)
				}
				if report.tr.Degraded() {
					t.Fatal("the route is degraded on one request's failures")
				}
			})
		})
	}
}
