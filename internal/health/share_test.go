package health

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/health/balance"
	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// Share of traffic proves nothing: a scanner sending ten times what each
// visitor sends, refused by a WAF in front of every host, is the
// scanner's problem, however much of the route's traffic it is. The
// requests are walked the way the proxy walks them (the pool's choice,
// a retry on another host within the budget, none for an attributed
// client or a degraded route), at seeded random moments, for 25 seconds
// of the demo's defaults.

// simClient is one source of requests in a simulation.
type simClient struct {
	key   string
	every time.Duration // mean gap between requests
	route testRoute
	// fails reports whether host h fails this client's request (with a
	// 502, the WAF's answer, or a response timeout).
	fails   func(h *Host) bool
	timeout bool
	from    time.Duration // when it starts sending, after the run's start
	next    time.Time
	errors  int // requests answered with a failure
}

// simRun sends the clients' requests for d from t0, ticking the monitor
// every second, and returns when it ends.
func simRun(rng *rand.Rand, m *Monitor, p *Pool, attr *Attributing, routes []testRoute, clients []*simClient, d time.Duration) time.Time {
	now := t0
	for _, c := range clients {
		c.next = now.Add(c.from + time.Duration(rng.Int64N(int64(c.every))))
	}
	set := &Set{Pools: []*Pool{p}, Attributing: attr}
	for _, r := range routes {
		set.Routes = append(set.Routes, r.tr)
	}
	nextTick := now.Add(time.Second)
	for now.Before(t0.Add(d)) {
		sort.Slice(clients, func(i, j int) bool { return clients[i].next.Before(clients[j].next) })
		c := clients[0]
		if nextTick.Before(c.next) {
			now = nextTick
			m.Tick(set, now)
			nextTick = now.Add(time.Second)
			continue
		}
		now = c.next
		// Poisson-like arrivals: gaps from a half to one and a half times
		// the mean.
		c.next = now.Add(c.every/2 + time.Duration(rng.Int64N(int64(c.every))))
		if !simRequest(p, m, c, now) {
			c.errors++
		}
	}
	return now
}

// simRequest walks one request through the pool as the proxy does and
// reports whether it was served.
func simRequest(p *Pool, m *Monitor, c *simClient, now time.Time) bool {
	r := req(c.route, c.key)
	p.Budget().Request(now)
	var tried balance.Tried
	var fails []Failure
	same := false
	for attempt := range 2 {
		h := p.Next(balance.HashString(c.key), &tried, now)
		if h == nil {
			break
		}
		if attempt > 0 && !p.Budget().Allow(now, 0.2, 3) {
			break
		}
		tried.Add(h.Index())
		if !c.fails(h) {
			p.Record(h, outcome.OK, r, now)
			if len(fails) > 0 {
				p.Settle(r, fails, false, now)
			}
			return true
		}
		f := Failure{Host: h, Class: outcome.Status5xx, Status: 502}
		if c.timeout {
			f = Failure{Host: h, Class: outcome.ResponseTimeout}
		}
		same = same || FailedElsewhere(fails, f)
		fails = append(fails, f)
		if same || c.route.tr.Degraded() || m.Attributed(c.key) {
			break
		}
	}
	if len(fails) > 0 {
		p.Settle(r, fails, same, now)
	}
	return false
}

// demoAttributing is the attribution config's defaults.
var demoAttributing = &Attributing{Window: 30 * time.Second, ClientMinFailures: 5, RouteMinFailures: 5}

func demoPool(t *testing.T) (*Monitor, *Pool, *recorder) {
	t.Helper()
	m, p, rec := setup(t, 3, "{}", nil)
	p.attr = demoAttributing
	return m, p, rec
}

const scannerKey = "203.0.113.66"

// visitors are n clients on the site and the other route, about one
// request a second each, served everywhere.
func visitors(n int, site, other testRoute) []*simClient {
	var out []*simClient
	for i := range n {
		for _, rt := range []testRoute{site, other} {
			out = append(out, &simClient{
				key: fmt.Sprintf("198.51.100.%d", 11+i), every: 2 * time.Second, route: rt,
				fails: func(*Host) bool { return false },
			})
		}
	}
	return out
}

func TestAScannerThatOutnumbersTheVisitorsIsTheScanners(t *testing.T) {
	for seed := range uint64(120) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 32))
			m, p, rec := demoPool(t)
			site, other := route(m, "site", 0), route(m, "other", 1)
			// Four visitors as in the demo, or two; a scanner ten to forty
			// times as busy as each.
			n := 2 + 2*int(seed%2)
			clients := visitors(n, site, other)
			every := []time.Duration{25, 50, 100}[seed%3] * time.Millisecond
			scanner := &simClient{key: scannerKey, every: every, route: site, fails: func(*Host) bool { return true }}
			clients = append(clients, scanner)
			simRun(rng, m, p, demoAttributing, []testRoute{site, other}, clients, 25*time.Second)

			if !m.Attributed(scannerKey) {
				t.Errorf("the scanner is not attributed; events: %v", rec.types())
			}
			if n := m.AttributedCount(AttrHost); n != 0 {
				t.Errorf("%d failures attributed to hosts", n)
			}
			if n := m.AttributedCount(AttrRoute); n != 0 || site.tr.Degraded() || rec.count(event.RouteDegraded) != 0 {
				t.Errorf("%d failures attributed to the route (degraded %v)", n, site.tr.Degraded())
			}
			for _, c := range clients {
				if c != scanner && c.errors != 0 {
					t.Errorf("visitor %s: %d errors", c.key, c.errors)
				}
			}
			for _, h := range p.Hosts {
				if h.Mode() != Healthy {
					t.Errorf("host %s %s", h.Addr, h.Mode())
				}
			}
			if t.Failed() {
				t.Logf("attributed: client %d, request %d; scanner errors %d", m.AttributedCount(AttrClient), m.AttributedCount(AttrRequest), scanner.errors)
			}
		})
	}
}

// A route's own fault is still found: failing for five distinct clients
// on every host while the other route succeeds there, it is degraded and
// no host or client is blamed.
func TestARouteFailingForSeveralClientsIsDegraded(t *testing.T) {
	for seed := range uint64(60) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 33))
			m, p, rec := demoPool(t)
			site, report := route(m, "site", 0), route(m, "report", 1)
			clients := visitors(4, site, site)
			for i := range 5 {
				clients = append(clients, &simClient{
					key: fmt.Sprintf("192.0.2.%d", 50+i), every: time.Second, route: report, timeout: true,
					fails: func(*Host) bool { return true },
				})
			}
			simRun(rng, m, p, demoAttributing, []testRoute{site, report}, clients, 25*time.Second)

			if !report.tr.Degraded() || rec.count(event.RouteDegraded) != 1 || site.tr.Degraded() {
				t.Errorf("report degraded %v, site degraded %v, %d route_degraded events", report.tr.Degraded(), site.tr.Degraded(), rec.count(event.RouteDegraded))
			}
			if n := rec.count(event.ClientAttributed); n != 0 {
				t.Errorf("%d clients attributed for the route's fault", n)
			}
			for _, h := range p.Hosts {
				if h.Mode() != Healthy {
					t.Errorf("host %s %s", h.Addr, h.Mode())
				}
			}
		})
	}
}

// types lists the events' types, in order.
func (r *recorder) types() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.evs {
		out = append(out, e.Type)
	}
	return out
}
