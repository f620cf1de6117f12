package health

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/health/balance"
	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// recorder collects events.
type recorder struct {
	mu  sync.Mutex
	evs []event.Event
}

func (r *recorder) Emit(e event.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, e)
}

func (r *recorder) count(typ string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// setup builds a monitor and one pool of n hosts; passiveYAML is the
// pool's health.passive in YAML (defaults filled by the config package) and
// probe its active check, or nil.
func setup(t *testing.T, n int, passiveYAML string, probe *Probe) (*Monitor, *Pool, *recorder) {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
listeners: [ { name: web, listen: 127.0.0.1:0 } ]
routes: [ { name: a, default: true, pool: p } ]
pools: [ { name: p, hosts: [ { addr: "10.0.0.1:80" } ], health: { passive: %s } } ]
`, passiveYAML)), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	m := NewMonitor(Options{Bus: rec}) // ticks are driven by the test
	pc := PoolConfig{Name: "p", Balance: "round_robin", FailStatuses: []int{502, 503, 504}, Passive: passiveOf(cfg.Pools[0].Health.Passive), Probe: probe}
	for i := range n {
		pc.Hosts = append(pc.Hosts, HostSpec{Addr: fmt.Sprintf("10.0.0.%d:80", i+1), Weight: 1})
	}
	p, err := NewPool(m, testAttributing, pc, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m, p, rec
}

// passiveOf is compile's conversion (compile/pools.go), repeated here: the
// tests write passive settings in YAML so that the config's defaults apply.
func passiveOf(ps config.Passive) Passive {
	return Passive{
		Off: !ps.On(), Window: ps.Window.D(), MinRequests: ps.MinRequests, MinClients: ps.MinClients,
		FailureRate: float64(ps.FailureRate), ConsecutiveConnectFailures: ps.ConsecutiveConnectFailures,
		MaxEjected: float64(ps.MaxEjected), EjectTime: ps.EjectTime.D(), MaxEjectTime: ps.MaxEjectTime.D(),
		SlowStart: ps.SlowStart.D(), TrialInterval: ps.TrialInterval.D(),
		GrayFailure: GrayFailure{Off: !ps.GrayFailure.On(), Disagreements: ps.GrayFailure.Disagreements, Within: ps.GrayFailure.Within.D()},
	}
}

var testAttributing = &Attributing{Window: 10 * time.Second, ClientMinFailures: 5, RouteMinFailures: 5}

// testRoute is a route's tracker and its sketch bit.
type testRoute struct {
	tr  *RouteTracker
	bit uint64
}

func route(m *Monitor, name string, i uint64) testRoute {
	return testRoute{NewRouteTracker(m, name), 1 << i}
}

func bitOf(k string) uint64 { return 1 << (balance.HashString(k) & 63) }

func req(rt testRoute, client string) *Request {
	return &Request{Route: rt.tr, RouteBit: rt.bit, ClientKey: client, ClientBit: bitOf(client)}
}

// set is what Tick looks at: the one pool and the given routes.
func set(p *Pool, routes ...testRoute) *Set {
	s := &Set{Pools: []*Pool{p}, Attributing: testAttributing}
	for _, r := range routes {
		s.Routes = append(s.Routes, r.tr)
	}
	return s
}

var t0 = time.Unix(1_700_000_000, 0)

func TestOneClientFailingEverywhereIsAttributedOnce(t *testing.T) {
	m, hp, rec := setup(t, 2, "{}", nil)
	rt := route(m, "a", 0)
	h0, h1 := hp.Hosts[0], hp.Hosts[1]
	now := t0
	for i := range 20 {
		now = now.Add(100 * time.Millisecond)
		// Innocent clients succeed on both hosts.
		for c := range 4 {
			k := fmt.Sprintf("192.0.2.%d", c)
			hp.Record(hp.Hosts[(i+c)%2], outcome.OK, req(rt, k), now)
		}
		// The scanner fails on both, one attempt each (as after a retry).
		hp.Settle(req(rt, "203.0.113.66"), []Failure{{Host: h0, Class: outcome.Status5xx, Status: 502}, {Host: h1, Class: outcome.Status5xx, Status: 502}}, true, now)
	}
	if n := rec.count(event.ClientAttributed); n != 1 {
		t.Fatalf("%d client_attributed events, want 1", n)
	}
	if !m.Attributed("203.0.113.66") || m.Attributed("192.0.2.1") {
		t.Fatal("wrong client attributed")
	}
	// Nothing was debited to the hosts: no host failures at all.
	for _, h := range hp.Hosts {
		if f := h.Window(now).Failures; f != 0 {
			t.Fatalf("host %s was debited %d failures", h.Addr, f)
		}
	}
	hp.tick(now)
	if h0.Mode() != Healthy || h1.Mode() != Healthy {
		t.Fatalf("hosts %s %s, want healthy", h0.Mode(), h1.Mode())
	}
	if m.AttributedCount(AttrClient) == 0 || m.AttributedCount(AttrHost) != 0 {
		t.Fatalf("client %d host %d", m.AttributedCount(AttrClient), m.AttributedCount(AttrHost))
	}
	// A quiet window releases the client, once.
	m.Tick(set(hp, rt), now.Add(11*time.Second))
	m.Tick(set(hp, rt), now.Add(12*time.Second))
	if rec.count(event.ClientReleased) != 1 || m.Attributed("203.0.113.66") {
		t.Fatal("client not released exactly once")
	}
}

func TestOneClientCannotEjectAHost(t *testing.T) {
	m, hp, rec := setup(t, 3, "{ min_requests: 5 }", nil)
	rt := route(m, "a", 0)
	bad := hp.Hosts[0]
	now := t0
	// A POST-only client (no retries) fails 50 times on host 0 alone, while
	// others succeed there too: one client, one host, no pattern to act on.
	for i := range 50 {
		now = now.Add(10 * time.Millisecond)
		hp.Settle(req(rt, "203.0.113.9"), []Failure{{Host: bad, Class: outcome.Reset, Status: 0}}, false, now)
		hp.Record(hp.Hosts[1+i%2], outcome.OK, req(rt, "192.0.2.1"), now)
		hp.Record(bad, outcome.OK, req(rt, "192.0.2.2"), now)
	}
	hp.tick(now)
	if bad.Mode() != Healthy || rec.count(event.HostSuspect) != 0 {
		t.Fatalf("host %s after one client's failures", bad.Mode())
	}
}

func TestOutlierIsEjectedWithBackoffWithinShare(t *testing.T) {
	m, hp, rec := setup(t, 4, "{ min_requests: 5, eject_time: 1s, max_eject_time: 3s, slow_start: 0s }", nil)
	rt := route(m, "a", 0)
	now := t0
	fail := func(h *Host, n int) {
		for i := range n {
			k := fmt.Sprintf("192.0.2.%d", i%5)
			hp.Settle(req(rt, k), []Failure{{Host: h, Class: outcome.Status5xx, Status: 503}}, false, now)
		}
	}
	ok := func(h *Host, n int) {
		for i := range n {
			hp.Record(h, outcome.OK, req(rt, fmt.Sprintf("192.0.2.%d", i%5)), now)
		}
	}
	h0, h1 := hp.Hosts[0], hp.Hosts[1]
	fail(h0, 10)
	fail(h1, 5)
	for i := range 5 {
		hp.Settle(req(rt, fmt.Sprintf("192.0.2.%d", i)), []Failure{{Host: h1, Class: outcome.Reset, Status: 0}}, false, now)
	}
	ok(hp.Hosts[2], 10)
	ok(hp.Hosts[3], 10)
	hp.tick(now)
	if h0.Mode() != Ejected || h1.Mode() != Ejected {
		t.Fatalf("modes %s %s, want both ejected (2 of 4 is within 50%%)", h0.Mode(), h1.Mode())
	}
	// The evidence names what failed, in class order, not only how often.
	// (The five client keys fall on four bits of the sketch.)
	for h, want := range map[*Host]string{
		h0: "10 of 10 requests failed (status_5xx) from 4 clients in 30s; peers 0%",
		h1: "10 of 10 requests failed (reset, status_5xx) from 4 clients in 30s; peers 0%",
	} {
		if _, _, ev := h.Describe(); ev != want {
			t.Errorf("%s: evidence %q, want %q", h.Addr, ev, want)
		}
	}
	// A third bad host would exceed the share: it stays in, suspect.
	h2 := hp.Hosts[2]
	fail(h2, 30)
	hp.tick(now)
	if h2.Mode() != Suspect {
		t.Fatalf("third host %s, want suspect (max_ejected 50%%)", h2.Mode())
	}
	// Eject time 1s, then back.
	now = now.Add(1100 * time.Millisecond)
	hp.tick(now)
	if h0.Mode() == Ejected {
		t.Fatal("not restored after eject time")
	}
	// Ejected again: 2s this time.
	now = now.Add(time.Millisecond)
	fail(h0, 20)
	ok(hp.Hosts[3], 20)
	hp.tick(now)
	if h0.Mode() != Ejected {
		t.Fatalf("h0 %s, want ejected again", h0.Mode())
	}
	if d := time.Duration(h0.ejectUntil.Load() - now.UnixNano()); d != 2*time.Second {
		t.Fatalf("second ejection lasts %s, want 2s", d)
	}
	// h0 twice, h1 once, and h2 once the share had room again.
	if rec.count(event.HostEjected) != 4 || h0.Ejections() != 2 || h2.Ejections() != 1 {
		t.Fatalf("%d host_ejected events, want 4", rec.count(event.HostEjected))
	}
}

func TestSharedProblemEjectsNobody(t *testing.T) {
	m, hp, rec := setup(t, 3, "{ min_requests: 5, max_ejected: 100% }", nil)
	rt := route(m, "a", 0)
	now := t0
	// Every host fails half of everyone's requests: not any host's fault
	// more than its peers'.
	for _, h := range hp.Hosts {
		for i := range 20 {
			k := fmt.Sprintf("192.0.2.%d", i%7)
			if i%2 == 0 {
				hp.Settle(req(rt, k), []Failure{{Host: h, Class: outcome.Status5xx, Status: 503}}, false, now)
			} else {
				hp.Record(h, outcome.OK, req(rt, k), now)
			}
		}
	}
	hp.tick(now)
	if n := rec.count(event.HostSuspect); n != 0 {
		t.Fatalf("%d hosts made suspect for a problem they all share", n)
	}
}

func TestRouteFailingOnEveryHostIsDegraded(t *testing.T) {
	m, hp, rec := setup(t, 2, "{}", nil)
	slow, site := route(m, "a", 0), route(m, "b", 1)
	now := t0
	for i := range 6 {
		now = now.Add(time.Second)
		hp.Record(hp.Hosts[i%2], outcome.OK, req(site, "192.0.2.1"), now)
		hp.Record(hp.Hosts[(i+1)%2], outcome.OK, req(site, "192.0.2.2"), now)
		hp.Settle(req(slow, fmt.Sprintf("192.0.2.%d", i)), []Failure{
			{Host: hp.Hosts[0], Class: outcome.ResponseTimeout, Status: 0}, {Host: hp.Hosts[1], Class: outcome.ResponseTimeout, Status: 0},
		}, true, now)
	}
	if !slow.tr.Degraded() || site.tr.Degraded() || rec.count(event.RouteDegraded) != 1 {
		t.Fatalf("slow degraded=%v site degraded=%v events=%d", slow.tr.Degraded(), site.tr.Degraded(), rec.count(event.RouteDegraded))
	}
	for _, h := range hp.Hosts {
		if h.Window(now).Failures != 0 || h.Mode() != Healthy {
			t.Fatalf("host %s debited", h.Addr)
		}
	}
	m.Tick(set(hp, slow, site), now.Add(11*time.Second))
	if slow.tr.Degraded() || rec.count(event.RouteRecovered) != 1 {
		t.Fatal("route did not recover after a quiet window")
	}
}

func TestConnectFailuresInARowEjectAtOnce(t *testing.T) {
	_, hp, rec := setup(t, 2, "{}", nil)
	h := hp.Hosts[0]
	for range 3 {
		hp.Record(h, outcome.ConnectRefused, nil, t0)
	}
	if h.Mode() != Ejected || rec.count(event.HostSuspect) != 1 || rec.count(event.HostEjected) != 1 {
		t.Fatalf("mode %s, events %+v", h.Mode(), rec.evs)
	}
}

func TestConnectFailuresWithActiveChecksOnlyMakeSuspect(t *testing.T) {
	_, hp, _ := setup(t, 2, "{}", &Probe{Method: "GET", Path: "/healthz", ExpectLo: 200, ExpectHi: 399, Interval: time.Hour, FastInterval: time.Second, Timeout: time.Second, Rise: 2, Fall: 3})
	h := hp.Hosts[0]
	for range 5 {
		hp.Record(h, outcome.ConnectRefused, nil, t0)
	}
	if h.Mode() != Suspect {
		t.Fatalf("mode %s: passive evidence alone must not eject where active checks exist", h.Mode())
	}
	hp.checkResult(h, true, "status 200", t0)
	if h.Mode() != Healthy || h.connectFailures.Load() != 0 {
		t.Fatalf("a passing probe must clear a suspect host: %s", h.Mode())
	}
	for range 5 {
		hp.Record(h, outcome.ConnectRefused, nil, t0)
	}
	hp.checkResult(h, false, "connection refused", t0)
	if h.Mode() != Down {
		t.Fatalf("a failing probe must decide: %s", h.Mode())
	}
	hp.checkResult(h, true, "status 200", t0)
	if h.Mode() != Down {
		t.Fatal("up after one probe; rise is 2")
	}
	hp.checkResult(h, true, "status 200", t0)
	if h.Mode() != Healthy {
		t.Fatalf("not up after rise probes: %s", h.Mode())
	}
}

func TestPanicEpisodeAndPoolEmptyEvents(t *testing.T) {
	_, hp, rec := setup(t, 2, "{ max_ejected: 100%, eject_time: 1h, max_eject_time: 1h }", nil)
	for _, h := range hp.Hosts {
		for range 3 {
			hp.Record(h, outcome.ConnectRefused, nil, t0)
		}
	}
	hp.tick(t0)
	if rec.count(event.PoolEmpty) != 1 {
		t.Fatal("no pool_empty event")
	}
	var tr balance.Tried
	h := hp.Panic(&tr)
	if h == nil {
		t.Fatal("no panic pick among passively ejected hosts")
	}
	hp.Panic(&tr)
	hp.Record(h, outcome.OK, req(route(hp.m, "a", 0), "192.0.2.1"), t0.Add(time.Second))
	if h.Mode() != Healthy {
		t.Fatalf("a panic-routed success must restore the host at once, not after the 1h eject time: %s", h.Mode())
	}
	hp.tick(t0.Add(2 * time.Second))
	for typ, want := range map[string]int{event.PanicEntered: 1, event.PanicLeft: 1, event.PoolRestored: 1, event.HostRestored: 1} {
		if got := rec.count(typ); got != want {
			t.Errorf("%s: %d events, want %d", typ, got, want)
		}
	}
}

func TestBudget(t *testing.T) {
	b := new(Budget)
	for range 100 {
		b.Request(t0)
	}
	allowed := 0
	for range 100 {
		if b.Allow(t0, 0.2, 3) {
			allowed++
		}
	}
	if allowed != 20 || b.Refused.Load() != 80 {
		t.Fatalf("allowed %d refused %d", allowed, b.Refused.Load())
	}
	// The window slides: ten seconds later the budget is fresh but small.
	later := t0.Add(11 * time.Second)
	allowed = 0
	for range 10 {
		if b.Allow(later, 0.2, 3) {
			allowed++
		}
	}
	if allowed != 3 {
		t.Fatalf("floor: allowed %d, want 3", allowed)
	}
}

// The monitor's own goroutine restores an ejected host when its eject time
// is over, in fake time.
func TestMonitorLoopRestoresInFakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, hp, rec := setup(t, 2, "{ eject_time: 10s }", nil)
		m := NewMonitor(Options{Bus: rec, Tick: time.Second, Current: func() *Set { return set(hp) }})
		hp.m = m
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- m.Run(ctx) }()
		h := hp.Hosts[0]
		for range 3 {
			hp.Record(h, outcome.ConnectRefused, nil, time.Now())
		}
		if h.Mode() != Ejected {
			t.Fatal("not ejected")
		}
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if h.Mode() != Ejected {
			t.Fatal("restored before the eject time")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if h.Mode() != Healthy || rec.count(event.HostRestored) != 1 {
			t.Fatalf("mode %s after eject time", h.Mode())
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// In a full outage everyone fails everywhere: successes from before it must
// not make each failing client look like the cause of its own failures.
func TestFullOutageAttributesNoClient(t *testing.T) {
	m, hp, rec := setup(t, 2, "{}", nil)
	rt := route(m, "a", 0)
	now := t0
	for c := range 5 {
		hp.Record(hp.Hosts[c%2], outcome.OK, req(rt, fmt.Sprintf("192.0.2.%d", c)), now)
	}
	now = now.Add(5 * time.Second) // the outage starts
	for range 10 {
		now = now.Add(100 * time.Millisecond)
		for c := range 5 {
			k := fmt.Sprintf("192.0.2.%d", c)
			hp.Settle(req(rt, k), []Failure{{Host: hp.Hosts[0], Class: outcome.Status5xx, Status: 503}, {Host: hp.Hosts[1], Class: outcome.Status5xx, Status: 503}}, true, now)
		}

	}
	if n := rec.count(event.ClientAttributed); n != 0 {
		t.Fatalf("%d clients attributed during a full outage", n)
	}
}

// Failures on a route that mostly succeeds for everyone else are not the
// route's: a scanner on the site's one route leaves it healthy.
func TestScannerDoesNotDegradeItsRoute(t *testing.T) {
	m, hp, rec := setup(t, 2, "{}", nil)
	site, other := route(m, "a", 0), route(m, "b", 1)
	now := t0
	for i := range 20 {
		now = now.Add(50 * time.Millisecond)
		for c := range 4 {
			h := hp.Hosts[(i+c)%2]
			hp.Record(h, outcome.OK, req(site, fmt.Sprintf("192.0.2.%d", c)), now)
			hp.Record(h, outcome.OK, req(other, fmt.Sprintf("192.0.2.%d", c)), now)
		}
		hp.Settle(req(site, "203.0.113.66"), []Failure{{Host: hp.Hosts[0], Class: outcome.Status5xx, Status: 502}, {Host: hp.Hosts[1], Class: outcome.Status5xx, Status: 502}}, true, now)
	}
	if site.tr.Degraded() || rec.count(event.RouteDegraded) != 0 {
		t.Fatal("the scanner's route was marked degraded")
	}
	if rec.count(event.ClientAttributed) != 1 {
		t.Fatalf("%d client_attributed events, want 1", rec.count(event.ClientAttributed))
	}
}

// Issue 36: in a pool without active checks, a host that max_ejected
// keeps in rotation as suspect gets only what the healthy hosts cannot
// take, so it may never see the success that would reset its connection
// failures in a row. It must still return when its ejection would have
// ended, as health.md says, and at once when it succeeds again.
func TestHeldSuspectClearsWithoutProbe(t *testing.T) {
	_, hp, _ := setup(t, 2, "{ eject_time: 10s, max_eject_time: 10s, slow_start: 0s }", nil)
	a, b := hp.Hosts[0], hp.Hosts[1]
	for range 3 {
		hp.Record(a, outcome.ConnectRefused, nil, t0)
	}
	for range 3 {
		hp.Record(b, outcome.ConnectRefused, nil, t0)
	}
	if a.Mode() != Ejected || b.Mode() != Suspect {
		t.Fatalf("modes %s %s, want ejected and held suspect (max_ejected 50%% of 2)", a.Mode(), b.Mode())
	}
	// No request reaches b after it recovered: the eject time clears it.
	now := t0.Add(5 * time.Second)
	hp.tick(now)
	if b.Mode() != Suspect {
		t.Fatalf("b %s after 5s, want still suspect: its ejection would last 10s", b.Mode())
	}
	now = t0.Add(10 * time.Second)
	hp.tick(now)
	if b.Mode() != Healthy || a.Mode() != Healthy {
		t.Fatalf("modes %s %s after the eject time, want both back", a.Mode(), b.Mode())
	}
	if since, reason, _ := b.Describe(); !since.Equal(now) || reason == "" {
		t.Errorf("b since %s, reason %q", since, reason)
	}

	// Held again; this time a request succeeds on it: back at the next tick.
	for range 3 {
		hp.Record(a, outcome.ConnectRefused, nil, now)
	}
	for range 3 {
		hp.Record(b, outcome.ConnectRefused, nil, now)
	}
	if b.Mode() != Suspect {
		t.Fatalf("b %s, want held suspect again", b.Mode())
	}
	hp.Record(b, outcome.OK, &Request{Route: NewRouteTracker(hp.m, "a")}, now.Add(time.Second))
	hp.tick(now.Add(time.Second))
	if b.Mode() != Healthy {
		t.Fatalf("b %s after a success, want healthy", b.Mode())
	}
}

// A host that never changed state has been in it since it was compiled
// in: /api/status must not show the zero time.
func TestHostSinceIsItsLoadTime(t *testing.T) {
	before := time.Now()
	_, hp, _ := setup(t, 1, "{}", nil)
	if since, _, _ := hp.Hosts[0].Describe(); since.Before(before) || since.After(time.Now()) {
		t.Errorf("since %s, want the time the pool was built", since)
	}
}
