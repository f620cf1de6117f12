package health

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// Route faults beside other faults on the same hosts.

// slowRequest plays one GET of a slow route as the proxy does: it times
// out on each host in turn, each attempt noted as it fails
// (AttemptFailed), then it is settled.
func slowRequest(p *Pool, rt testRoute, client string, hosts ...*Host) Attribution {
	var fails []Failure
	for _, h := range hosts {
		rt.tr.AttemptFailed(outcome.ResponseTimeout, bitOf(client))
		fails = append(fails, Failure{Host: h, Class: outcome.ResponseTimeout})
	}
	return p.Settle(req(rt, client), fails, len(hosts) > 1, time.Now())
}

// Two slow routes on the same two hosts, a third route served there all
// along: each route is degraded, and no host is charged. Before, each
// slow route's timeouts were "others failing" on the hosts for the other
// one, so that neither was ever degraded while both lasted, and the
// hosts, failing four attempts in five, were not "serving others": the
// timeouts were charged to them until the gray rule took one out
// (simulator seed 267: a host out for 10 s, both routes named after
// 15 s).
func TestTwoSlowRoutesOnTheSameHostsAreEachDegraded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, p, rec := setup(t, 2, "{}", nil)
		site, report, export := route(m, "site", 0), route(m, "report", 1), route(m, "export", 2)
		// Each route's first request says nothing yet: it fails on two
		// hosts, and no other request of its route has failed.
		var first uint64
		for i := range 30 {
			if i == 1 {
				first = m.AttributedCount(AttrHost)
			}
			for c := range 4 {
				k := fmt.Sprintf("192.0.2.%d", 10+c)
				p.Record(p.Hosts[(i+c)%2], outcome.OK, req(site, k), time.Now())
			}
			k := fmt.Sprintf("192.0.2.%d", 10+i%4)
			a, b := p.Hosts[i%2], p.Hosts[(i+1)%2]
			slowRequest(p, report, k, a, b)
			slowRequest(p, export, k, b, a)
			time.Sleep(200 * time.Millisecond)
		}
		if !report.tr.Degraded() || !export.tr.Degraded() || site.tr.Degraded() || rec.count(event.RouteDegraded) != 2 {
			t.Fatalf("report degraded %v, export degraded %v, site degraded %v; want the slow two", report.tr.Degraded(), export.tr.Degraded(), site.tr.Degraded())
		}
		if n := m.AttributedCount(AttrHost) - first; n != 0 {
			t.Errorf("%d timeouts of the slow routes charged to the hosts after their first requests", n)
		}
		for _, h := range p.Hosts {
			if h.Mode() != Healthy {
				t.Errorf("host %s %s", h.Addr, h.Mode())
			}
		}
	})
}

// A scanner, attributed, failing on every host many times a second while
// a route is slow: the route's requests, timing out on two hosts that
// serve the other route, are the route's from the first, not the hosts'.
// The scanner's failures say nothing about whether the hosts serve
// others; they made the hosts look failing, and the slow route's
// timeouts were charged to them until it was degraded (simulator seed
// 79).
func TestAScannersFailuresDoNotMakeASlowRoutesTimeoutsTheHosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, p, _ := setup(t, 3, "{}", nil)
		site, report := route(m, "site", 0), route(m, "report", 1)
		scanner := "203.0.113.9"
		scan := func() {
			for _, h := range p.Hosts {
				for range 3 {
					p.Settle(req(site, scanner), []Failure{{Host: h, Class: outcome.Status5xx, Status: 502}}, false, time.Now())
				}
			}
		}
		for range 20 {
			innocents(p, site, 3, time.Now())
			scan()
			time.Sleep(100 * time.Millisecond)
		}
		if !m.Attributed(scanner) {
			t.Fatal("the scanner is not attributed")
		}
		for i := range 20 {
			innocents(p, site, 3, time.Now())
			scan()
			k := fmt.Sprintf("192.0.2.%d", 10+i%3)
			slowRequest(p, report, k, p.Hosts[i%3], p.Hosts[(i+1)%3])
			time.Sleep(200 * time.Millisecond)
		}
		if !report.tr.Degraded() {
			t.Fatal("the slow route is not degraded")
		}
		if n := m.AttributedCount(AttrHost); n != 0 {
			t.Errorf("%d of the slow route's timeouts charged to the hosts", n)
		}
	})
}

// A pool of two with one host out (down for its own fault): the route's
// visitors were served on it after a killing request of theirs failed
// there, then the route turns slow on the host left. They fail on it
// again as a route's clients do, every request, and the route is
// degraded. Before, only a request failing on two hosts said so, none
// can on one host, and the visitors counted as served on the route for a
// whole window (simulator seed 291: named after 15 s).
func TestVisitorsServedBeforeARouteBrokeOnTheLastHostFailOnItAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, p, rec := setup(t, 2, "{}", nil)
		site, report := route(m, "site", 0), route(m, "report", 1)
		h := p.Hosts[0]
		p.SetMode(p.Hosts[1].Addr, Maintenance, time.Now())
		visitors := []string{"192.0.2.10", "192.0.2.11", "192.0.2.12", "192.0.2.13"}
		for _, k := range visitors {
			p.Settle(req(report, k), []Failure{{Host: h, Class: outcome.EOFBeforeResponse}}, false, time.Now())
			time.Sleep(50 * time.Millisecond)
			p.Record(h, outcome.OK, req(report, k), time.Now())
		}
		time.Sleep(2 * time.Second) // the report breaks later
		for i := range 12 {
			for _, k := range visitors {
				p.Record(h, outcome.OK, req(site, k), time.Now())
			}
			slowRequest(p, report, visitors[i%4], h)
			time.Sleep(300 * time.Millisecond)
		}
		if !report.tr.Degraded() || site.tr.Degraded() || rec.count(event.RouteDegraded) != 1 {
			t.Fatalf("report degraded %v, site degraded %v; want the report", report.tr.Degraded(), site.tr.Degraded())
		}
	})
}

// A host whose requests of a route time out while the route is served
// on its peer (each GET answered by its retry there) has its probe asked
// at once, and that probe failing takes it down: the traffic and the
// probe agree. Before, the host waited for failures in a row from three
// clients, or for three failed probes at their interval (10 s or more),
// and a hanging host beside a slow route, which holds the clients up, was
// found after 13 to 19 s (simulator seeds 51, 783). A probe nobody asked
// for still needs fall failures in a row.
func TestAProbeAskedByTheTrafficDecidesAtOnce(t *testing.T) {
	for _, asked := range []bool{true, false} {
		t.Run(fmt.Sprintf("asked %v", asked), func(t *testing.T) {
			probe := &Probe{Method: "GET", Path: "/healthz", ExpectLo: 200, ExpectHi: 399, Interval: time.Hour, FastInterval: time.Second, Timeout: time.Second, Rise: 2, Fall: 3}
			m, p, rec := setup(t, 2, "{}", probe)
			site := route(m, "site", 0)
			h, peer := p.Hosts[0], p.Hosts[1]
			now := t0
			for c := range 4 {
				p.Record(peer, outcome.OK, req(site, fmt.Sprintf("192.0.2.%d", 20+c)), now)
			}
			if asked {
				for c := range 2 {
					k := fmt.Sprintf("192.0.2.%d", 10+c)
					now = now.Add(100 * time.Millisecond)
					site.tr.AttemptFailed(outcome.ResponseTimeout, bitOf(k))
					p.Record(peer, outcome.OK, req(site, k), now) // its retry
					p.Settle(req(site, k), []Failure{{Host: h, Class: outcome.ResponseTimeout}}, false, now)
				}
			}
			p.checkResult(h, false, "request failed: context deadline exceeded", now)
			if down := h.Mode() == Down; down != asked || (rec.count(event.HostDown) == 1) != asked {
				t.Fatalf("host %s after one failed probe; want down only when its traffic asked for it", h.Mode())
			}
			if peer.Mode() != Healthy {
				t.Fatalf("peer %s", peer.Mode())
			}
		})
	}
}

// A slow route whose requests time out on two hosts, one of which served
// nobody else since (the site's visitors were on the other two), while an
// attributed scanner fails on every host: that host says nothing about
// the route, and the route is degraded on the other, where the site is
// served. Before, the scanner's failures there were "failing for
// others", a veto, and the route was not degraded while the scanner
// scanned (simulator seed 79).
func TestAScannerOnAHostDoesNotVetoARouteThatFailsThere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, p, rec := setup(t, 3, "{}", nil)
		site, report := route(m, "site", 0), route(m, "report", 1)
		a, b, c := p.Hosts[0], p.Hosts[1], p.Hosts[2]
		scanner := "203.0.113.9"
		scan := func() {
			for _, h := range p.Hosts {
				p.Settle(req(site, scanner), []Failure{{Host: h, Class: outcome.Status5xx, Status: 502}}, false, time.Now())
			}
		}
		for range 10 {
			innocents(p, site, 3, time.Now())
			scan()
			time.Sleep(100 * time.Millisecond)
		}
		if !m.Attributed(scanner) {
			t.Fatal("the scanner is not attributed")
		}
		for i := range 12 {
			for k := range 3 {
				p.Record(a, outcome.OK, req(site, fmt.Sprintf("192.0.2.%d", 10+k)), time.Now())
				p.Record(c, outcome.OK, req(site, fmt.Sprintf("192.0.2.%d", 10+k)), time.Now())
			}
			scan()
			slowRequest(p, report, fmt.Sprintf("192.0.2.%d", 20+i%3), a, b)
			time.Sleep(150 * time.Millisecond)
		}
		if !report.tr.Degraded() || rec.count(event.RouteDegraded) != 1 {
			t.Fatal("the slow route is not degraded")
		}
	})
}
