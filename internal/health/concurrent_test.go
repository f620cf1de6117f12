package health

import (
	"fmt"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// Failures the simulator found charged to the wrong party once the
// single-scanner rules held (#32): several misbehaving clients at once,
// a scanner beside a broken host, a degraded route's excuse stretched to
// a host's own failures, and innocents judged by the killing request.

// innocents succeed on every host of p, n clients, one request each.
func innocents(p *Pool, rt testRoute, n int, now time.Time) {
	for c := range n {
		for _, h := range p.Hosts {
			p.Record(h, outcome.OK, req(rt, fmt.Sprintf("192.0.2.%d", 10+c)), now)
		}
	}
}

// Two scanners at once, the busier one failing more often on every host
// than the visitors succeed there: each is attributed. Before, the slower
// one was judged against the busier one's failures ("the hosts fail for
// others") and never attributed, its failures charged to the hosts
// (simulator seed 10: 126 of them).
func TestTwoScannersAtOnceAreEachAttributed(t *testing.T) {
	m, p, rec := setup(t, 3, "{}", nil)
	rt := route(m, "site", 0)
	busy, slow := "203.0.113.1", "203.0.113.2"
	if bitOf(busy) == bitOf(slow) || bitOf(busy)&bitOf("192.0.2.10") != 0 || bitOf(slow)&bitOf("192.0.2.10") != 0 {
		t.Fatal("the test's clients share a sketch bit")
	}
	now := t0
	for i := range 60 {
		now = now.Add(100 * time.Millisecond)
		innocents(p, rt, 1, now)
		for _, h := range p.Hosts {
			for range 3 {
				p.Settle(req(rt, busy), []Failure{{Host: h, Class: outcome.Status5xx, Status: 502}}, false, now)
			}
		}
		p.Settle(req(rt, slow), []Failure{{Host: p.Hosts[i%3], Class: outcome.Status5xx, Status: 502}}, false, now)
	}
	if !m.Attributed(busy) || !m.Attributed(slow) || m.Attributed("192.0.2.10") {
		t.Fatalf("attributed: busy %v, slow %v, the visitor %v; want both scanners and not the visitor", m.Attributed(busy), m.Attributed(slow), m.Attributed("192.0.2.10"))
	}
	if n := rec.count(event.ClientAttributed); n != 2 {
		t.Fatalf("%d client_attributed events, want 2", n)
	}
	if rt.tr.Degraded() {
		t.Fatal("two scanners degraded the route")
	}
	if c := m.AttributedCount(AttrHost); c != 0 {
		t.Fatalf("%d failures charged to hosts, want 0 (the scanners' own)", c)
	}
}

// A scanner failing on every host while one host fails for everyone (it
// hangs, or goes gray): most of the scanner's failures are on hosts where
// everyone else is served, so it is attributed; the broken host stays
// charged with the visitors' failures. Before, the broken host vetoed the
// judgement, and the visitors failing on it made the route look like
// "its own problem in the making": the scanner went unjudged for as long
// as both lasted (simulator seeds 19 and 29).
func TestAScannerBesideABrokenHostIsAttributed(t *testing.T) {
	m, p, _ := setup(t, 3, "{ max_ejected: 0% }", nil)
	rt := route(m, "site", 0)
	scanner := "203.0.113.1"
	broken := p.Hosts[2]
	now := t0
	for i := range 60 {
		now = now.Add(100 * time.Millisecond)
		for c := range 3 {
			k := fmt.Sprintf("192.0.2.%d", 10+c)
			for _, h := range p.Hosts[:2] {
				p.Record(h, outcome.OK, req(rt, k), now)
			}
			if (i+c)%3 == 0 {
				p.Record(broken, outcome.OK, req(rt, k), now)
			} else {
				p.Settle(req(rt, k), []Failure{{Host: broken, Class: outcome.ResponseTimeout}}, false, now)
			}
		}
		p.Settle(req(rt, scanner), []Failure{{Host: p.Hosts[i%3], Class: outcome.Status5xx, Status: 502}}, false, now)
	}
	if !m.Attributed(scanner) {
		t.Fatal("the scanner beside a broken host is not attributed")
	}
	for c := range 3 {
		if k := fmt.Sprintf("192.0.2.%d", 10+c); m.Attributed(k) {
			t.Fatalf("visitor %s, failing on the broken host, is attributed", k)
		}
	}
	if broken.window.Sum(now).Failures == 0 {
		t.Fatal("the broken host is charged nothing")
	}
}

// A route degraded for answering 502 everywhere owns its 502s, not a
// host's resets of its requests: those are the host's, and the host is
// judged on them. Before, every failure on a degraded route was the
// route's, and a resetting host beside a failing route was never acted
// on (simulator seed 147).
func TestADegradedRouteOwnsOnlyItsWayOfFailing(t *testing.T) {
	m, p, _ := setup(t, 3, "{}", nil)
	report, site := route(m, "report", 0), route(m, "site", 1)
	now := t0
	for i := range 20 {
		now = now.Add(100 * time.Millisecond)
		innocents(p, site, 4, now)
		k := fmt.Sprintf("192.0.2.%d", 10+i%4)
		p.Settle(req(report, k), []Failure{{Host: p.Hosts[i%3], Class: outcome.Status5xx, Status: 502}}, false, now)
	}
	if !report.tr.Degraded() {
		t.Fatal("the failing route is not degraded")
	}
	before := m.AttributedCount(AttrHost)
	now = now.Add(100 * time.Millisecond)
	a := p.Settle(req(report, "192.0.2.11"), []Failure{{Host: p.Hosts[0], Class: outcome.Reset}}, false, now)
	if a != AttrHost || m.AttributedCount(AttrHost) != before+1 {
		t.Fatalf("a host's reset on the degraded route was attributed to %v, want the host", a)
	}
	if a := p.Settle(req(report, "192.0.2.12"), []Failure{{Host: p.Hosts[1], Class: outcome.Status5xx, Status: 502}}, false, now); a != AttrRoute {
		t.Fatalf("the route's own 502 was attributed to %v, want the route", a)
	}
}

// A visitor who now and then sends a request that fails the same way on
// two hosts (it kills whatever serves it, incident 003) is not a client
// failing on every host: its other requests succeed. Those failures are
// the request's, and the visitor is never attributed for them. Before,
// three such requests (six failures on two hosts) made it a faulty
// client, and a failing host's failures from it were then "its own".
func TestAVisitorSendingAKillingRequestIsNotAFaultyClient(t *testing.T) {
	m, p, rec := setup(t, 3, "{}", nil)
	rt := route(m, "site", 0)
	visitor := "192.0.2.10"
	now := t0
	for i := range 80 {
		now = now.Add(100 * time.Millisecond)
		innocents(p, rt, 3, now)
		if i%4 == 0 {
			a, b := p.Hosts[i%3], p.Hosts[(i+1)%3]
			got := p.Settle(req(rt, visitor), []Failure{{Host: a, Class: outcome.EOFBeforeResponse}, {Host: b, Class: outcome.EOFBeforeResponse}}, true, now)
			if got != AttrRequest {
				t.Fatalf("the killing request's failure was attributed to %v, want the request", got)
			}
		}
	}
	if m.Attributed(visitor) || rec.count(event.ClientAttributed) != 0 {
		t.Fatal("the visitor who sent a killing request is attributed as a faulty client")
	}
}

// Visitors who each send the killing request now and then, and are
// served on the route otherwise, do not make the route degraded: one of
// their requests failed, not the route for them. Once they were no
// longer taken for faulty clients (above), the route was blamed instead:
// 83 wrong route conclusions in the simulator's runs with a killing
// request, over 1000 seeds.
func TestVisitorsSendingAKillingRequestDoNotDegradeTheirRoute(t *testing.T) {
	m, p, rec := setup(t, 3, "{}", nil)
	site, other := route(m, "site", 0), route(m, "other", 1)
	now := t0
	for i := range 80 {
		now = now.Add(100 * time.Millisecond)
		innocents(p, site, 6, now)
		innocents(p, other, 2, now)
		if i%3 == 0 {
			k := fmt.Sprintf("192.0.2.%d", 10+(i/3)%6)
			a, b := p.Hosts[i%3], p.Hosts[(i+1)%3]
			if got := p.Settle(req(site, k), []Failure{{Host: a, Class: outcome.EOFBeforeResponse}, {Host: b, Class: outcome.EOFBeforeResponse}}, true, now); got != AttrRequest {
				t.Fatalf("the killing request's failure was attributed to %v, want the request", got)
			}
		}
	}
	if site.tr.Degraded() || rec.count(event.RouteDegraded) != 0 {
		t.Fatal("visitors who sent a killing request made their route degraded")
	}
}
