package server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/outcome"
	"github.com/sturdyproxy/sturdy/internal/testing/fake"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

// eventCounter counts the server's events by type since the server
// started.
type eventCounter struct {
	mu  sync.Mutex
	n   map[string]int
	all []event.Event
}

func countEvents(s *Server) *eventCounter {
	c := &eventCounter{n: map[string]int{}}
	s.Events().SubscribeWithHistory(func(e event.Event) {
		c.mu.Lock()
		c.n[e.Type]++
		c.all = append(c.all, e)
		c.mu.Unlock()
	})
	return c
}

func (c *eventCounter) get(typ string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[typ]
}

func (c *eventCounter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, e := range c.all {
		fmt.Fprintf(&b, "\n  %s %s %s %s: %s %v", e.Type, e.Pool, e.Host, e.Client+e.Route, e.Message, e.Evidence)
	}
	return b.String()
}

// tally counts answers by status, with 0 for transport errors.
type tally struct {
	mu sync.Mutex
	n  map[int]int
}

func (t *tally) add(status int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == nil {
		t.n = map[int]int{}
	}
	t.n[status]++
}

func (t *tally) failures() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := 0
	for s, n := range t.n {
		if s == 0 || s >= 500 {
			f += n
		}
	}
	return f
}

// load sends n GETs of path from each client ip, one every gap, all clients
// at once, and tallies the answers.
func load(t *testing.T, url string, ips []string, n int, gap time.Duration, path func(i int) string) *tally {
	t.Helper()
	tl := &tally{}
	paced(ips, n, time.Hour, gap, func(c *http.Client, i int) {
		resp, err := c.Get(url + path(i))
		if err != nil {
			tl.add(0)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		tl.add(resp.StatusCode)
	})
	return tl
}

// paced runs send from a client of each ip at once, each sending up to n
// requests for at most d, one every gap, and returns when all are done.
// It is the one paced load of these tests: load, steady and timedSteady.
func paced(ips []string, n int, d, gap time.Duration, send func(c *http.Client, i int)) {
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for _, ip := range ips {
		wg.Go(func() {
			c := fake.Client(ip, 10*time.Second)
			for i := 0; i < n && time.Now().Before(end); i++ {
				send(c, i)
				// real: the clients' pace is the scenario (requests a
				// second against the monitor's ticks, the attribution
				// windows and the route timeouts of a running server on
				// real sockets), not a wait for something to happen.
				time.Sleep(gap)
			}
		})
	}
	wg.Wait()
}

// nextTick waits until the server's health monitor has done its periodic
// work once more (where passive ejections are decided); 5s is a bound.
func nextTick(t *testing.T, s *Server) {
	t.Helper()
	n := s.Monitor().Ticks()
	if !testutil.Eventually(5*time.Second, func() bool { return s.Monitor().Ticks() > n }) {
		t.Fatal("the health monitor did not tick within 5s")
	}
}

func ips(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i+1)
	}
	return out
}

func noEjections(t *testing.T, s *Server, ev *eventCounter) {
	t.Helper()
	for _, typ := range []string{event.HostSuspect, event.HostEjected, event.HostDown, event.PoolEmpty} {
		if n := ev.get(typ); n != 0 {
			t.Errorf("%d %s events; events:%s", n, typ, ev)
		}
	}
	for _, p := range s.Runtime().Pools {
		for _, h := range p.Hosts {
			if h.Mode() != health.Healthy {
				t.Errorf("host %s is %s", h.Addr, h.Mode())
				for _, ph := range s.Status().Pools {
					for _, vh := range ph.Hosts {
						if vh.Addr == h.Addr {
							t.Errorf("host %s: %s (%s)", vh.Addr, vh.Reason, vh.Evidence)
						}
					}
				}
			}
		}
	}
}

const wafConfig = `
admin: { listen: "off" }
attribution: { window: 10s }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: site, default: true, pool: web } ]
pools:
  - name: web
    hosts: [ { addr: "{{w1}}" }, { addr: "{{w2}}" } ]
    health: { passive: { window: 10s, min_requests: 5 } }
`

// Incident 000: a WAF between the proxy and its backends blocks one
// scanner. Its failures follow it across backends: they are the client's.
func TestIncident000WAFBlocksOneClient(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name string
		m    fake.WAFMode
	}{{"502", fake.WAF502}, {"reset", fake.WAFReset}} {
		t.Run(mode.name, func(t *testing.T) {
			const scanner = "127.0.0.66"
			var wafs []string
			for i := 1; i <= 2; i++ {
				b, err := fake.NewBackend(fmt.Sprintf("b%d", i), fmt.Sprintf("127.1.0.%d", i))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(b.Close)
				w, err := fake.NewWAF(fmt.Sprintf("127.2.0.%d", i), b.Addr, scanner, mode.m)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(w.Close)
				wafs = append(wafs, w.Addr)
			}
			s, url, _ := startSturdy(t, parseConfig(t, wafConfig, map[string]string{"w1": wafs[0], "w2": wafs[1]}))
			ev := countEvents(s)

			var innocent *tally
			done := make(chan struct{})
			go func() {
				defer close(done)
				innocent = load(t, url, ips("127.0.0.", 5), 60, 10*time.Millisecond, func(i int) string { return fmt.Sprintf("/page/%d", i) })
			}()
			bad := load(t, url, []string{scanner}, 300, 0, func(i int) string { return fmt.Sprintf("/wp-admin/%d", i) })
			<-done

			if f := innocent.failures(); f != 0 {
				t.Errorf("innocent clients saw %d failures: %v", f, innocent.n)
			}
			if bad.failures() == 0 {
				t.Errorf("the scanner saw no failures; the WAF did not block: %v", bad.n)
			}
			noEjections(t, s, ev)
			if n := ev.get(event.ClientAttributed); n != 1 {
				t.Errorf("%d client_attributed events, want 1; events:%s", n, ev)
			}
			if !s.monitor.Attributed(scanner) {
				t.Error("the scanner is not attributed")
			}
		})
	}
}

const slowRouteConfig = `
admin: { listen: "off" }
attribution: { window: 10s }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  - { name: report, path: /report/, pool: app, timeouts: { response_header: 200ms } }
  - { name: site, default: true, pool: app }
pools:
  - name: app
    balance: hash
    hosts: [ { addr: "{{b1}}" }, { addr: "{{b2}}" } ]
    health: { passive: { window: 10s, min_requests: 5 } }
`

// Incident 002: one slow report endpoint times out on every backend. That
// is the route's problem; the other routes on the same backends are fine.
func TestIncident002SlowRouteIsTheRoutesProblem(t *testing.T) {
	t.Parallel()
	var addrs []string
	for i := 1; i <= 2; i++ {
		b, err := fake.NewBackend(fmt.Sprintf("b%d", i), fmt.Sprintf("127.1.0.%d", i))
		if err != nil {
			t.Fatal(err)
		}
		b.Set("/report/", fake.Behavior{Delay: 3 * time.Second})
		t.Cleanup(b.Close)
		addrs = append(addrs, b.Addr)
	}
	s, url, _ := startSturdy(t, parseConfig(t, slowRouteConfig, map[string]string{"b1": addrs[0], "b2": addrs[1]}))
	ev := countEvents(s)

	var site *tally
	done := make(chan struct{})
	go func() {
		defer close(done)
		site = load(t, url, ips("127.0.0.", 6), 40, 20*time.Millisecond, func(i int) string { return fmt.Sprintf("/orders/%d", i) })
	}()
	var slowest atomic.Int64
	report := &tally{}
	var wg sync.WaitGroup
	for _, ip := range ips("127.0.1.", 3) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := fake.Client(ip, 10*time.Second)
			for i := range 6 {
				start := time.Now()
				resp, err := c.Get(fmt.Sprintf("%s/report/%d", url, i))
				d := time.Since(start)
				if d > time.Duration(slowest.Load()) {
					slowest.Store(int64(d))
				}
				if err != nil {
					report.add(0)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				report.add(resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	<-done

	if f := site.failures(); f != 0 {
		t.Errorf("the site route saw %d failures: %v", f, site.n)
	}
	if report.n[504] != 18 {
		t.Errorf("report answers %v, want 18 x 504", report.n)
	}
	// Each report request waits the route's 200ms on at most two hosts:
	// the proxy's record of timed-out attempts, not how long the clients
	// waited, says that no request was tried again and again.
	var timedOut uint64
	for _, h := range s.Runtime().Pool("app").Hosts {
		timedOut += h.Attempts(outcome.ResponseTimeout)
	}
	t.Logf("measured: %d report requests, %d attempts timed out, slowest answer %s", report.total(), timedOut, time.Duration(slowest.Load()))
	if timedOut < 18 || timedOut > 2*18 {
		t.Errorf("%d attempts timed out for 18 report requests; want one or two each (the route's timeout is 200ms)", timedOut)
	}
	noEjections(t, s, ev)
	if !s.Runtime().Route("report").Tracker.Degraded() || ev.get(event.RouteDegraded) != 1 || s.Runtime().Route("site").Tracker.Degraded() {
		t.Errorf("report degraded=%v, events:%s", s.Runtime().Route("report").Tracker.Degraded(), ev)
	}
}

const nodeConfig = `
admin: { listen: "off" }
attribution: { window: 10s }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: search, default: true, pool: node, retry: { tries: 3 } } ]
pools:
  - name: node
    hosts: [ { addr: "{{n1}}" }, { addr: "{{n2}}" }, { addr: "{{n3}}" } ]
    health: { passive: { window: 10s, min_requests: 5 } }
`

// Incident 003: backends hang up on one kind of request. The request is
// the cause: it is tried on at most two hosts and charged to none.
func TestIncident003RequestThatKillsEveryBackend(t *testing.T) {
	t.Parallel()
	var nodes []*fake.NodeLike
	vars := map[string]string{}
	for i := 1; i <= 3; i++ {
		n, err := fake.NewNodeLike(fmt.Sprintf("127.1.0.%d", i), "crash-me")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		nodes = append(nodes, n)
		vars[fmt.Sprintf("n%d", i)] = n.Addr
	}
	s, url, _ := startSturdy(t, parseConfig(t, nodeConfig, vars))
	ev := countEvents(s)

	var innocent *tally
	done := make(chan struct{})
	go func() {
		defer close(done)
		innocent = load(t, url, ips("127.0.0.", 5), 60, 10*time.Millisecond, func(i int) string { return fmt.Sprintf("/search?q=shoes%d", i) })
	}()
	const poisoned = 40
	bad := load(t, url, []string{"127.0.0.99"}, poisoned, 5*time.Millisecond, func(i int) string { return fmt.Sprintf("/search?q=crash-me-%d", i) })
	<-done

	if f := innocent.failures(); f != 0 {
		t.Errorf("innocent clients saw %d failures: %v", f, innocent.n)
	}
	if bad.n[502] != poisoned {
		t.Errorf("poisoned requests got %v, want %d x 502", bad.n, poisoned)
	}
	var dropped int64
	for _, n := range nodes {
		dropped += n.Dropped.Load()
	}
	if dropped > 2*poisoned {
		t.Errorf("poisoned requests reached backends %d times; at most two hosts each (%d)", dropped, 2*poisoned)
	}
	noEjections(t, s, ev)
}

const deadHostConfig = `
admin: { listen: "off" }
attribution: { window: 5s }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: site, default: true, pool: web } ]
pools:
  - name: web
    hosts: [ { addr: "{{dead}}" }, { addr: "{{b1}}" }, { addr: "{{b2}}" } ]
    health: { passive: { window: 5s } }
`

// A truly dead host (connection refused) leaves rotation at once, and the
// requests that met it were retried: innocent clients see nothing.
func TestDeadHostLeavesRotationAtOnce(t *testing.T) {
	t.Parallel()
	b1, _ := fake.NewBackend("b1", "127.1.0.1")
	b2, _ := fake.NewBackend("b2", "127.1.0.2")
	t.Cleanup(b1.Close)
	t.Cleanup(b2.Close)
	s, url, _ := startSturdy(t, parseConfig(t, deadHostConfig, map[string]string{"dead": deadAddr(t), "b1": b1.Addr, "b2": b2.Addr}))
	ev := countEvents(s)
	tl := load(t, url, ips("127.0.0.", 3), 30, 0, func(i int) string { return "/" })
	if f := tl.failures(); f != 0 {
		t.Errorf("%d failures: %v", f, tl.n)
	}
	dead := s.Runtime().Pool("web").Hosts[0]
	if dead.Mode() != health.Ejected || ev.get(event.HostEjected) != 1 {
		t.Errorf("dead host is %s; events:%s", dead.Mode(), ev)
	}
	// It leaves after 3 failures in a row; the other two clients may each
	// have had an attempt on their way to it at that moment.
	if n := dead.Attempts(outcome.ConnectRefused) + dead.Attempts(outcome.ConnectTimeout); n > 3+2 {
		t.Errorf("dead host was tried %d times; it should leave after 3", n)
	}
}

const badHostConfig = `
admin: { listen: "off" }
attribution: { window: 3s }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: site, default: true, pool: web, retry: { budget: 50% } } ]
pools:
  - name: web
    hosts: [ { addr: "{{b1}}" }, { addr: "{{b2}}" }, { addr: "{{bad}}" } ]
    health:
      passive: { window: 3s, min_requests: 5, eject_time: 1m, max_eject_time: 1m }
      {{active}}

`

// A host answering 503 to everyone is ejected, with and without active
// checks; with them it comes back after rise passing probes.
func TestHostFailingForEveryoneIsEjected(t *testing.T) {
	t.Parallel()
	for _, withActive := range []bool{false, true} {
		t.Run(fmt.Sprintf("active=%v", withActive), func(t *testing.T) {
			var bs []*fake.Backend
			for i := 1; i <= 3; i++ {
				b, _ := fake.NewBackend(fmt.Sprintf("b%d", i), fmt.Sprintf("127.1.0.%d", i))
				t.Cleanup(b.Close)
				bs = append(bs, b)
			}
			bad := bs[2]
			bad.Set("", fake.Behavior{Status: 503})
			active := ""
			if withActive {
				active = "active: { path: /healthz, interval: 300ms, fast_interval: 100ms, timeout: 200ms, rise: 2, fall: 2, jitter: 0s }"
			}
			s, url, _ := startSturdy(t, parseConfig(t, badHostConfig, map[string]string{"b1": bs[0].Addr, "b2": bs[1].Addr, "bad": bad.Addr, "active": active}))
			ev := countEvents(s)
			host := s.Runtime().Pool("web").Hosts[2]
			gone := func() bool { return host.Mode() == health.Ejected || host.Mode() == health.Down }
			tl := &tally{}
			for round := 0; round < 40 && !gone(); round++ {
				r := load(t, url, ips("127.0.0.", 5), 4, 0, func(i int) string { return fmt.Sprintf("/item/%d", i) })
				for st, n := range r.n {
					for range n {
						tl.add(st)
					}
				}
				nextTick(t, s)
			}
			if !gone() {
				t.Fatalf("bad host still %s; events:%s", host.Mode(), ev)
			}
			if tl.failures() > 0 {
				t.Errorf("%d client-visible failures while the host was being found out (GETs are retried): %v", tl.failures(), tl.n)
			}
			if !withActive {
				if ev.get(event.HostEjected) != 1 {
					t.Errorf("events:%s", ev)
				}
				return
			}
			if ev.get(event.HostDown) != 1 || ev.get(event.HostEjected) != 0 {
				t.Errorf("with active checks the probe decides; events:%s", ev)
			}
			bad.Set("", fake.Behavior{})
			testutil.Eventually(5*time.Second, func() bool { return host.Mode() == health.Healthy })
			if host.Mode() != health.Healthy || ev.get(event.HostUp) != 1 {
				t.Fatalf("host %s after recovering; events:%s", host.Mode(), ev)
			}
			for _, e := range s.Events().Recent(50) {
				if e.Type == event.HostUp && e.Message != "host up: 2 readiness probes passed" {
					t.Errorf("%q; rise is 2", e.Message)
				}
			}
		})
	}
}

// relistener is a backend that can be stopped (connections refused) and
// started again on the same address.
type relistener struct {
	t    *testing.T
	addr string
	srv  *http.Server
}

func (r *relistener) start() {
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.srv = &http.Server{Handler: named("back")}
	go r.srv.Serve(ln)
}

func (r *relistener) stop() { r.srv.Close() }

// Every host out on passive evidence: panic routing keeps trying them, and
// a host that recovers takes traffic at once, not after its eject timer.
func TestPanicRoutingFindsTheRecoveredHost(t *testing.T) {
	t.Parallel()
	a := &relistener{t: t, addr: "127.1.0.1:0"}
	b := &relistener{t: t, addr: "127.1.0.2:0"}
	a.start()
	b.start()
	t.Cleanup(a.stop)
	t.Cleanup(b.stop)
	cfg := parseConfig(t, `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: site, default: true, pool: web } ]
pools:
  - name: web
    hosts: [ { addr: "{{a}}" }, { addr: "{{b}}" } ]
    health: { passive: { max_ejected: 100%, eject_time: 1h, max_eject_time: 1h } }
`, map[string]string{"a": a.addr, "b": b.addr})
	s, url, _ := startSturdy(t, cfg)
	ev := countEvents(s)
	a.stop()
	b.stop()
	for i := 0; i < 20 && s.Runtime().Pool("web").AvailableCount() > 0; i++ {
		get(t, http.DefaultClient, url+"/")
	}
	if n := s.Runtime().Pool("web").AvailableCount(); n != 0 {
		t.Fatalf("%d hosts still in rotation", n)
	}
	// Every host out: requests are still tried on them; none can be
	// reached, so the empty-pool chain answers (the sorry page), not a
	// bare "no live upstreams" 502.
	resp, body := get(t, http.DefaultClient, url+"/")
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || ev.get(event.PanicEntered) != 1 {
		t.Fatalf("%d %q; events:%s", resp.StatusCode, body, ev)
	}
	a.start()
	if c, err := net.Dial("tcp", a.addr); err != nil {
		t.Fatalf("direct dial after restart: %v", err)
	} else {
		c.Close()
	}
	start := time.Now()
	resp, body = get(t, http.DefaultClient, url+"/")
	if resp.StatusCode != 200 {
		for _, h := range s.Runtime().Pool("web").Hosts {
			t.Logf("%s %s", h.Addr, h.Mode())
		}
		t.Fatalf("after recovery: %d %q in %s; a=%s events:%s", resp.StatusCode, body, time.Since(start), a.addr, ev)
	}
	if s.Runtime().Pool("web").AvailableCount() != 1 {
		t.Fatal("the recovered host is not back in rotation")
	}
}

// A POST that reached a backend is never sent again; under a total outage,
// retries stay within the budget.
func TestPostNotReplayedAndRetriesWithinBudget(t *testing.T) {
	t.Parallel()
	b1, _ := fake.NewBackend("b1", "127.1.0.1")
	b2, _ := fake.NewBackend("b2", "127.1.0.2")
	t.Cleanup(b1.Close)
	t.Cleanup(b2.Close)
	b1.Set("", fake.Behavior{Status: 502})
	b2.Set("", fake.Behavior{Status: 502})
	cfg := parseConfig(t, `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: site, default: true, pool: web, retry: { tries: 3, budget: 20%, min_retries: 3 } } ]
pools:
  - name: web
    hosts: [ { addr: "{{b1}}" }, { addr: "{{b2}}" } ]
    health: { passive: { min_requests: 1000 } }
`, map[string]string{"b1": b1.Addr, "b2": b2.Addr})
	_, url, _ := startSturdy(t, cfg)
	const posts = 20
	for i := range posts {
		resp, err := http.Post(fmt.Sprintf("%s/order/%d", url, i), "application/json", strings.NewReader(`{"qty":1}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 502 {
			t.Fatalf("POST %d: %d, want the backend's 502", i, resp.StatusCode)
		}
	}
	if got := b1.Total() + b2.Total(); got != posts {
		t.Fatalf("backends saw %d POSTs for %d sent: replayed", got, posts)
	}
	const gets = 100
	before := b1.Total() + b2.Total()
	for i := range gets {
		resp, _ := get(t, http.DefaultClient, fmt.Sprintf("%s/item/%d", url, i))
		if resp.StatusCode != 502 {
			t.Fatalf("GET %d: %d", i, resp.StatusCode)
		}
	}
	attempts := b1.Total() + b2.Total() - before
	// Budget: 20% of the window's requests (120 with the POSTs), at least 3.
	if limit := int64(gets + (gets+posts)/5 + 1); attempts > limit {
		t.Fatalf("%d upstream attempts for %d GETs; the retry budget allows at most %d", attempts, gets, limit)
	}
	if attempts < gets+3 {
		t.Fatalf("%d attempts for %d GETs: not even the minimum retries happened", attempts, gets)
	}
}

// A retry that has tried every host in rotation does not go to an ejected
// host, and is not "panic routing": the pool is not empty.
func TestNoPanicWhileHostsAreInRotation(t *testing.T) {
	t.Parallel()
	a, _ := fake.NewBackend("a", "127.1.0.1")
	b, _ := fake.NewBackend("b", "127.1.0.2")
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)
	a.Set("", fake.Behavior{Status: 503})
	b.Set("", fake.Behavior{Status: 503})
	cfg := parseConfig(t, `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: site, default: true, pool: web, retry: { tries: 3, min_retries: 100 } } ]
pools:
  - name: web
    hosts: [ { addr: "{{a}}" }, { addr: "{{b}}" }, { addr: "{{dead}}" } ]
    health: { passive: { min_requests: 1000, eject_time: 1h, max_eject_time: 1h } }
`, map[string]string{"a": a.Addr, "b": b.Addr, "dead": deadAddr(t)})
	s, url, _ := startSturdy(t, cfg)
	ev := countEvents(s)
	for i := 0; i < 10 && ev.get(event.HostEjected) == 0; i++ {
		get(t, http.DefaultClient, url+"/")
	}
	if ev.get(event.HostEjected) != 1 {
		t.Fatalf("dead host not ejected; events:%s", ev)
	}
	dead := s.Runtime().Pool("web").Hosts[2]
	before := dead.Attempts(outcome.ConnectRefused)
	for range 10 {
		if resp, _ := get(t, http.DefaultClient, url+"/"); resp.StatusCode != 503 {
			t.Fatalf("status %d, want the backends' 503", resp.StatusCode)
		}
	}
	if dead.Attempts(outcome.ConnectRefused) != before || ev.get(event.PanicEntered) != 0 {
		t.Fatalf("the ejected host was tried (%d more attempts) or panic announced; events:%s", dead.Attempts(outcome.ConnectRefused)-before, ev)
	}
}
