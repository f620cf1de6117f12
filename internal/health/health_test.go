package health

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/outcome"
	"github.com/sturdyproxy/sturdy/internal/pool"
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

// setup builds a monitor and one pool of n hosts from a config snippet for
// the pool's health (YAML inside pools[0]).
func setup(t *testing.T, n int, healthYAML string) (*Monitor, *Pool, *recorder) {
	t.Helper()
	hosts := ""
	for i := range n {
		hosts += fmt.Sprintf("{ addr: 10.0.0.%d:80 }, ", i+1)
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
listeners: [ { name: web, listen: 127.0.0.1:0 } ]
attribution: { window: 10s }
routes: [ { name: a, default: true, pool: p }, { name: b, path: /b/, pool: p } ]
pools:
  - name: p
    hosts: [ %s ]
    health: %s
`, hosts, healthYAML)), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	m := NewMonitor(cfg.Attribution, rec, time.Hour) // ticks are driven by the test
	t.Cleanup(m.Close)
	specs := make([]pool.Spec, n)
	for i := range specs {
		specs[i] = pool.Spec{Addr: fmt.Sprintf("10.0.0.%d:80", i+1), Weight: 1}
	}
	p, _ := pool.New("p", pool.RoundRobin, specs, nil)
	hp := m.NewPool(p, cfg.Pools[0].Health)
	m.Apply([]*Pool{hp})
	return m, hp, rec
}

func bitOf(k string) uint64 { return pool.Bit(pool.HashString(k)) }

func req(hp *Pool, rt *RouteTracker, client string) *Request {
	return &Request{Pool: hp, Route: rt, ClientKey: client, ClientBit: bitOf(client)}
}

var t0 = time.Unix(1_700_000_000, 0)

func TestOneClientFailingEverywhereIsAttributedOnce(t *testing.T) {
	m, hp, rec := setup(t, 2, "{}")
	rt := m.Route("a", pool.Bit(0))
	h0, h1 := hp.Pool.Hosts[0], hp.Pool.Hosts[1]
	now := t0
	for i := range 20 {
		now = now.Add(100 * time.Millisecond)
		// Innocent clients succeed on both hosts.
		for c := range 4 {
			k := fmt.Sprintf("192.0.2.%d", c)
			hp.Success(hp.Pool.Hosts[(i+c)%2], bitOf(k), rt.Bit(), now)
		}
		// The scanner fails on both, one attempt each (as after a retry).
		m.Settle(req(hp, rt, "203.0.113.66"), []Failure{{h0, outcome.Status5xx, 502}, {h1, outcome.Status5xx, 502}}, true, now)
	}
	if n := rec.count(event.ClientAttributed); n != 1 {
		t.Fatalf("%d client_attributed events, want 1", n)
	}
	if !m.Attributed("203.0.113.66") || m.Attributed("192.0.2.1") {
		t.Fatal("wrong client attributed")
	}
	// Nothing was debited to the hosts: no host failures at all.
	for _, h := range hp.Pool.Hosts {
		if f := h.Window.Sum(now).Failures; f != 0 {
			t.Fatalf("host %s was debited %d failures", h.Addr, f)
		}
	}
	hp.tick(now)
	if h0.Mode() != pool.Healthy || h1.Mode() != pool.Healthy {
		t.Fatalf("hosts %s %s, want healthy", h0.Mode(), h1.Mode())
	}
	if m.AttributedCount(AttrClient) == 0 || m.AttributedCount(AttrHost) != 0 {
		t.Fatalf("client %d host %d", m.AttributedCount(AttrClient), m.AttributedCount(AttrHost))
	}
	// A quiet window releases the client, once.
	m.Tick(now.Add(11 * time.Second))
	m.Tick(now.Add(12 * time.Second))
	if rec.count(event.ClientReleased) != 1 || m.Attributed("203.0.113.66") {
		t.Fatal("client not released exactly once")
	}
}

func TestOneClientCannotEjectAHost(t *testing.T) {
	m, hp, rec := setup(t, 3, "{ passive: { min_requests: 5 } }")
	rt := m.Route("a", pool.Bit(0))
	bad := hp.Pool.Hosts[0]
	now := t0
	// A POST-only client (no retries) fails 50 times on host 0 alone, while
	// others succeed there too: one client, one host, no pattern to act on.
	for i := range 50 {
		now = now.Add(10 * time.Millisecond)
		m.Settle(req(hp, rt, "203.0.113.9"), []Failure{{bad, outcome.Reset, 0}}, false, now)
		hp.Success(hp.Pool.Hosts[1+i%2], bitOf("192.0.2.1"), rt.Bit(), now)
		hp.Success(bad, bitOf("192.0.2.2"), rt.Bit(), now)
	}
	hp.tick(now)
	if bad.Mode() != pool.Healthy || rec.count(event.HostSuspect) != 0 {
		t.Fatalf("host %s after one client's failures", bad.Mode())
	}
}

func TestOutlierIsEjectedWithBackoffWithinShare(t *testing.T) {
	m, hp, rec := setup(t, 4, "{ passive: { min_requests: 5, eject_time: 1s, max_eject_time: 3s, slow_start: 0s } }")
	rt := m.Route("a", pool.Bit(0))
	now := t0
	fail := func(h *pool.Host, n int) {
		for i := range n {
			k := fmt.Sprintf("192.0.2.%d", i%5)
			m.Settle(req(hp, rt, k), []Failure{{h, outcome.Status5xx, 503}}, false, now)
		}
	}
	ok := func(h *pool.Host, n int) {
		for i := range n {
			hp.Success(h, bitOf(fmt.Sprintf("192.0.2.%d", i%5)), rt.Bit(), now)
		}
	}
	h0, h1 := hp.Pool.Hosts[0], hp.Pool.Hosts[1]
	fail(h0, 10)
	fail(h1, 10)
	ok(hp.Pool.Hosts[2], 10)
	ok(hp.Pool.Hosts[3], 10)
	hp.tick(now)
	if h0.Mode() != pool.Ejected || h1.Mode() != pool.Ejected {
		t.Fatalf("modes %s %s, want both ejected (2 of 4 is within 50%%)", h0.Mode(), h1.Mode())
	}
	// A third bad host would exceed the share: it stays in, suspect.
	h2 := hp.Pool.Hosts[2]
	fail(h2, 30)
	hp.tick(now)
	if h2.Mode() != pool.Suspect {
		t.Fatalf("third host %s, want suspect (max_ejected 50%%)", h2.Mode())
	}
	// Eject time 1s, then back.
	now = now.Add(1100 * time.Millisecond)
	hp.tick(now)
	if h0.Mode() == pool.Ejected {
		t.Fatal("not restored after eject time")
	}
	// Ejected again: 2s this time.
	now = now.Add(time.Millisecond)
	fail(h0, 20)
	ok(hp.Pool.Hosts[3], 20)
	hp.tick(now)
	if h0.Mode() != pool.Ejected {
		t.Fatalf("h0 %s, want ejected again", h0.Mode())
	}
	if d := time.Duration(h0.EjectUntil.Load() - now.UnixNano()); d != 2*time.Second {
		t.Fatalf("second ejection lasts %s, want 2s", d)
	}
	// h0 twice, h1 once, and h2 once the share had room again.
	if rec.count(event.HostEjected) != 4 || h0.Ejections.Load() != 2 || h2.Ejections.Load() != 1 {
		t.Fatalf("%d host_ejected events, want 4", rec.count(event.HostEjected))
	}
}

func TestSharedProblemEjectsNobody(t *testing.T) {
	m, hp, rec := setup(t, 3, "{ passive: { min_requests: 5, max_ejected: 100% } }")
	rt := m.Route("a", pool.Bit(0))
	now := t0
	// Every host fails half of everyone's requests: not any host's fault
	// more than its peers'.
	for _, h := range hp.Pool.Hosts {
		for i := range 20 {
			k := fmt.Sprintf("192.0.2.%d", i%7)
			if i%2 == 0 {
				m.Settle(req(hp, rt, k), []Failure{{h, outcome.Status5xx, 503}}, false, now)
			} else {
				hp.Success(h, bitOf(k), rt.Bit(), now)
			}
		}
	}
	hp.tick(now)
	if n := rec.count(event.HostSuspect); n != 0 {
		t.Fatalf("%d hosts made suspect for a problem they all share", n)
	}
}

func TestRouteFailingOnEveryHostIsDegraded(t *testing.T) {
	m, hp, rec := setup(t, 2, "{}")
	slow, site := m.Route("a", pool.Bit(0)), m.Route("b", pool.Bit(1))
	now := t0
	for i := range 6 {
		now = now.Add(time.Second)
		hp.Success(hp.Pool.Hosts[i%2], bitOf("192.0.2.1"), site.Bit(), now)
		hp.Success(hp.Pool.Hosts[(i+1)%2], bitOf("192.0.2.2"), site.Bit(), now)
		m.Settle(req(hp, slow, fmt.Sprintf("192.0.2.%d", i)), []Failure{
			{hp.Pool.Hosts[0], outcome.ResponseTimeout, 0}, {hp.Pool.Hosts[1], outcome.ResponseTimeout, 0},
		}, true, now)
	}
	if !slow.Degraded() || site.Degraded() || rec.count(event.RouteDegraded) != 1 {
		t.Fatalf("slow degraded=%v site degraded=%v events=%d", slow.Degraded(), site.Degraded(), rec.count(event.RouteDegraded))
	}
	for _, h := range hp.Pool.Hosts {
		if h.Window.Sum(now).Failures != 0 || h.Mode() != pool.Healthy {
			t.Fatalf("host %s debited", h.Addr)
		}
	}
	m.Tick(now.Add(11 * time.Second))
	if slow.Degraded() || rec.count(event.RouteRecovered) != 1 {
		t.Fatal("route did not recover after a quiet window")
	}
}

func TestConnectFailuresInARowEjectAtOnce(t *testing.T) {
	_, hp, rec := setup(t, 2, "{}")
	h := hp.Pool.Hosts[0]
	for range 3 {
		hp.ConnectFailed(h, outcome.ConnectRefused, t0)
	}
	if h.Mode() != pool.Ejected || rec.count(event.HostSuspect) != 1 || rec.count(event.HostEjected) != 1 {
		t.Fatalf("mode %s, events %+v", h.Mode(), rec.evs)
	}
}

func TestConnectFailuresWithActiveChecksOnlyMakeSuspect(t *testing.T) {
	_, hp, _ := setup(t, 2, "{ active: { path: /healthz, interval: 1h, timeout: 1s, jitter: 0s } }")
	h := hp.Pool.Hosts[0]
	for range 5 {
		hp.ConnectFailed(h, outcome.ConnectRefused, t0)
	}
	if h.Mode() != pool.Suspect {
		t.Fatalf("mode %s: passive evidence alone must not eject where active checks exist", h.Mode())
	}
	hp.checkResult(h, true, "status 200", t0)
	if h.Mode() != pool.Healthy || h.ConnectFailures.Load() != 0 {
		t.Fatalf("a passing probe must clear a suspect host: %s", h.Mode())
	}
	for range 5 {
		hp.ConnectFailed(h, outcome.ConnectRefused, t0)
	}
	hp.checkResult(h, false, "connection refused", t0)
	if h.Mode() != pool.Down {
		t.Fatalf("a failing probe must decide: %s", h.Mode())
	}
	hp.checkResult(h, true, "status 200", t0)
	if h.Mode() != pool.Down {
		t.Fatal("up after one probe; rise is 2")
	}
	hp.checkResult(h, true, "status 200", t0)
	if h.Mode() != pool.Healthy {
		t.Fatalf("not up after rise probes: %s", h.Mode())
	}
}

func TestPanicEpisodeAndPoolEmptyEvents(t *testing.T) {
	_, hp, rec := setup(t, 2, "{ passive: { max_ejected: 100%, eject_time: 1h, max_eject_time: 1h } }")
	for _, h := range hp.Pool.Hosts {
		for range 3 {
			hp.ConnectFailed(h, outcome.ConnectRefused, t0)
		}
	}
	hp.tick(t0)
	if rec.count(event.PoolEmpty) != 1 {
		t.Fatal("no pool_empty event")
	}
	var tr pool.Tried
	h := hp.Pool.Panic(tr)
	if h == nil {
		t.Fatal("no panic pick among passively ejected hosts")
	}
	hp.PanicPick(t0)
	hp.PanicPick(t0)
	hp.Success(h, 1, 1, t0.Add(time.Second))
	if h.Mode() != pool.Healthy {
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
	b := newBudget()
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
		cfg, err := config.Parse([]byte(`
listeners: [ { name: web, listen: 127.0.0.1:0 } ]
routes: [ { name: a, default: true, pool: p } ]
pools: [ { name: p, hosts: [ { addr: "10.0.0.1:80" }, { addr: "10.0.0.2:80" } ], health: { passive: { eject_time: 10s } } } ]
`), "t.yaml")
		if err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		m := NewMonitor(cfg.Attribution, rec, time.Second)
		defer m.Close()
		p, _ := pool.New("p", pool.RoundRobin, []pool.Spec{{Addr: "10.0.0.1:80"}, {Addr: "10.0.0.2:80"}}, nil)
		hp := m.NewPool(p, cfg.Pools[0].Health)
		m.Apply([]*Pool{hp})
		for range 3 {
			hp.ConnectFailed(p.Hosts[0], outcome.ConnectRefused, time.Now())
		}
		if p.Hosts[0].Mode() != pool.Ejected {
			t.Fatal("not ejected")
		}
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if p.Hosts[0].Mode() != pool.Ejected {
			t.Fatal("restored before the eject time")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if p.Hosts[0].Mode() != pool.Healthy || rec.count(event.HostRestored) != 1 {
			t.Fatalf("mode %s after eject time", p.Hosts[0].Mode())
		}
	})
}

// In a full outage everyone fails everywhere: successes from before it must
// not make each failing client look like the cause of its own failures.
func TestFullOutageAttributesNoClient(t *testing.T) {
	m, hp, rec := setup(t, 2, "{}")
	rt := m.Route("a", pool.Bit(0))
	now := t0
	for c := range 5 {
		hp.Success(hp.Pool.Hosts[c%2], bitOf(fmt.Sprintf("192.0.2.%d", c)), rt.Bit(), now)
	}
	now = now.Add(5 * time.Second) // the outage starts
	for range 10 {
		now = now.Add(100 * time.Millisecond)
		for c := range 5 {
			k := fmt.Sprintf("192.0.2.%d", c)
			m.Settle(req(hp, rt, k), []Failure{{hp.Pool.Hosts[0], outcome.Status5xx, 503}, {hp.Pool.Hosts[1], outcome.Status5xx, 503}}, true, now)
		}

	}
	if n := rec.count(event.ClientAttributed); n != 0 {
		t.Fatalf("%d clients attributed during a full outage", n)
	}
}

// Failures on a route that mostly succeeds for everyone else are not the
// route's: a scanner on the site's one route leaves it healthy.
func TestScannerDoesNotDegradeItsRoute(t *testing.T) {
	m, hp, rec := setup(t, 2, "{}")
	site, other := m.Route("a", pool.Bit(0)), m.Route("b", pool.Bit(1))
	now := t0
	for i := range 20 {
		now = now.Add(50 * time.Millisecond)
		for c := range 4 {
			h := hp.Pool.Hosts[(i+c)%2]
			hp.Success(h, bitOf(fmt.Sprintf("192.0.2.%d", c)), site.Bit(), now)
			site.Success(now)
			hp.Success(h, bitOf(fmt.Sprintf("192.0.2.%d", c)), other.Bit(), now)
		}
		m.Settle(req(hp, site, "203.0.113.66"), []Failure{{hp.Pool.Hosts[0], outcome.Status5xx, 502}, {hp.Pool.Hosts[1], outcome.Status5xx, 502}}, true, now)
	}
	if site.Degraded() || rec.count(event.RouteDegraded) != 0 {
		t.Fatal("the scanner's route was marked degraded")
	}
	if rec.count(event.ClientAttributed) != 1 {
		t.Fatalf("%d client_attributed events, want 1", rec.count(event.ClientAttributed))
	}
}
