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
	"github.com/sturdyproxy/sturdy/internal/outcome"
	"github.com/sturdyproxy/sturdy/internal/testing/fake"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

// timing tallies answers and how long they took.
type timing struct {
	tally
	mu      sync.Mutex
	slow    int // answers that took at least the route's timeout
	retryAf int // 503s with Retry-After
	max     time.Duration
}

func (tm *timing) add(status int, d time.Duration, hdr http.Header, slow time.Duration) {
	tm.tally.add(status)
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if d >= slow {
		tm.slow++
	}
	if status == 503 && hdr.Get("Retry-After") != "" {
		tm.retryAf++
	}
	tm.max = max(tm.max, d)
}

// timedSteady is steady, timing each answer; slow is the route's timeout.
func timedSteady(t *testing.T, url string, clients []string, d, gap, slow time.Duration) *timing {
	t.Helper()
	tm := &timing{}
	paced(clients, 10000, d, gap, func(c *http.Client, i int) {
		start := time.Now()
		resp, err := c.Get(fmt.Sprintf("%s/item/%d", url, i))
		if err != nil {
			tm.add(0, time.Since(start), nil, slow)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		tm.add(resp.StatusCode, time.Since(start), resp.Header, slow)
	})
	return tm
}

const blackholedConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  - { name: site, default: true, pool: web, timeouts: { response_header: 300ms }, sorry: { retry_after: 5s } }
pools:
  - name: web
    hosts: [ { addr: "{{h1}}" }, { addr: "{{h2}}" }, { addr: "{{h3}}" } ]
    health: { passive: { window: 10s, trial_interval: 500ms } }
`

// Every host of a pool without active checks accepts connections and never
// answers. Passive evidence may eject only half of them, so every request
// used to wait the full timeout and get 504, for as long as it lasted.
// Once no host has succeeded for a while, for several clients, the pool is
// known to be failing: the empty-pool chain answers at once (a sorry page
// with Retry-After), one trial request per host goes through every
// trial_interval, and the first success brings the pool back.
func TestBlackholedPoolAnswersFromTheChainAtOnce(t *testing.T) {
	t.Parallel()
	var holes []*fake.Blackhole
	vars := map[string]string{}
	for i := 1; i <= 3; i++ {
		b, err := fake.NewBlackhole(fmt.Sprintf("127.1.0.%d", i))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		holes = append(holes, b)
		vars[fmt.Sprintf("h%d", i)] = b.Addr
	}
	s, url, _ := startSturdy(t, parseConfig(t, blackholedConfig, vars))
	ev := countEvents(s)
	const timeout = 300 * time.Millisecond
	clients := ips("127.0.0.", 4)
	// Until the pool is known to be failing: about a fifth of the 10s
	// window when the machine is idle, longer under load, when fewer
	// requests fail per second (bounded).
	start := time.Now()
	before := &tally{}
	for time.Since(start) < 15*time.Second && ev.get(event.PoolFailing) == 0 {
		tm := timedSteady(t, url, clients, time.Second, 20*time.Millisecond, timeout)
		for status, n := range tm.n {
			for range n {
				before.add(status)
			}
		}
	}
	detected := time.Since(start)
	if ev.get(event.PoolFailing) != 1 {
		t.Fatalf("%d pool_failing events after %s of traffic (%d answers, %v); events:%s", ev.get(event.PoolFailing), detected.Round(time.Millisecond), before.total(), before.n, ev)
	}
	// Once it is, only the trials (one per host per 500ms) wait.
	tm := timedSteady(t, url, clients, 2*time.Second, 20*time.Millisecond, timeout)
	total := tm.total()
	t.Logf("measured: blackholed pool, 4 clients: failing known after %s (%d answers before, %v); then in 2s %d answers, %d waited the %s timeout, %d were 503 with Retry-After, answers %v",
		detected.Round(100*time.Millisecond), before.total(), before.n, total, tm.slow, timeout, tm.retryAf, tm.n)
	if tm.slow > 24 || tm.retryAf < total/2 {
		t.Errorf("after detection %d of %d answers waited for the timeout, %d sorry pages with Retry-After", tm.slow, total, tm.retryAf)
	}
	// One host comes back: a trial finds it and the pool answers again.
	addr := holes[1].Addr
	holes[1].Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: named("back")}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	c := fake.Client("127.0.0.7", 5*time.Second)
	ok := testutil.Eventually(3*time.Second, func() bool {
		resp, err := c.Get(url + "/again")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == 200 && strings.HasPrefix(string(b), "back")
	})
	if !ok || ev.get(event.PoolRecovered) != 1 {
		t.Fatalf("the pool did not come back with its host (recovered events %d); events:%s", ev.get(event.PoolRecovered), ev)
	}
}

const noHangConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  - { name: site, default: true, pool: web, timeouts: { response_header: 5s } }
pools:
  - name: web
    hosts: [ { addr: "{{b1}}" }, { addr: "{{b2}}" }, { addr: "{{b3}}" } ]
    health:
      active: { path: /healthz, interval: 200ms, fast_interval: 100ms, timeout: 150ms, fall: 1, jitter: 0s }
`

// A host hangs, probes and all. Requests already waiting on it when its
// probe marks it down are not left to their 5s timeout: idempotent ones go
// to another host, the others are answered at once by the empty-pool chain.
func TestNoHangAfterTheProbeMarksAHostDown(t *testing.T) {
	t.Parallel()
	vars := map[string]string{}
	var bs []*fake.Backend
	for i := 1; i <= 3; i++ {
		b, err := fake.NewBackend(fmt.Sprintf("b%d", i), fmt.Sprintf("127.1.0.%d", i))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		bs = append(bs, b)
		vars[fmt.Sprintf("b%d", i)] = b.Addr
	}
	s, url, _ := startSturdy(t, parseConfig(t, noHangConfig, vars))
	ev := countEvents(s)
	if st := steady(t, url, ips("127.0.0.", 3), 300*time.Millisecond, 20*time.Millisecond); st.failures() != 0 {
		t.Fatalf("before: %v", st.n)
	}
	bs[2].Set("", fake.Behavior{Delay: time.Minute})
	start := time.Now()
	var slowest atomic.Int64
	gets, posts := &tally{}, &tally{}
	var postsReached atomic.Int64
	arrivals(12, 10*time.Millisecond, func(i int) {
		c := fake.Client(fmt.Sprintf("127.0.0.%d", 20+i), 10*time.Second)
		t0 := time.Now()
		var resp *http.Response
		var err error
		if i%2 == 0 {
			resp, err = c.Get(fmt.Sprintf("%s/item/%d", url, i))
		} else {
			resp, err = c.Post(fmt.Sprintf("%s/order/%d", url, i), "text/plain", strings.NewReader("qty=1"))
		}
		d := time.Since(t0)
		for old := slowest.Load(); int64(d) > old && !slowest.CompareAndSwap(old, int64(d)); old = slowest.Load() {
		}
		tl := gets
		if i%2 == 1 {
			tl = posts
		}
		if err != nil {
			tl.add(0)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		tl.add(resp.StatusCode)
		if i%2 == 1 && resp.StatusCode == 503 && resp.Header.Get("Retry-After") == "" {
			t.Errorf("POST %d: 503 without Retry-After", i)
		}
	})
	for _, b := range bs {
		for i := range 12 {
			postsReached.Add(b.Hits(fmt.Sprintf("/order/%d", i)))
		}
	}
	t.Logf("measured: host hangs, 12 requests sent over 120ms: slowest answer %s, GETs %v, POSTs %v, %d host_down, took %s",
		time.Duration(slowest.Load()), gets.n, posts.n, ev.get(event.HostDown), time.Since(start))
	if ev.get(event.HostDown) != 1 {
		t.Errorf("%d host_down events; events:%s", ev.get(event.HostDown), ev)
	}
	// Whether a request waited out its timeout is the proxy's own record,
	// not how long the client waited: no attempt on any host ended in
	// response_timeout (the cut ends them as cut when the probe fails).
	for _, h := range s.Runtime().Pool("web").Hosts {
		if n := h.Attempts(outcome.ResponseTimeout); n != 0 {
			t.Errorf("%d attempts on %s waited out the 5s timeout (slowest answer %s): a request hung after its host was marked down", n, h.Addr, time.Duration(slowest.Load()))
		}
	}
	if gets.n[200] != 6 {
		t.Errorf("GETs %v, want 6 x 200 (re-dispatched to another host)", gets.n)
	}
	if posts.n[504] != 0 || posts.n[200]+posts.n[503] != 6 {
		t.Errorf("POSTs %v, want 200 or the chain's 503, never a 504 after the timeout", posts.n)
	}
	if postsReached.Load() != 6 {
		t.Errorf("the POSTs reached backends %d times for 6 sent: one was replayed", postsReached.Load())
	}
}

const blackholedFallbackConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  - { name: site, default: true, pool: web, fallback: { pool: spare }, timeouts: { response_header: 300ms } }
pools:
  - name: web
    hosts: [ { addr: "{{h1}}" }, { addr: "{{h2}}" } ]
    health: { passive: { window: 10s, trial_interval: 500ms } }
  - name: spare
    hosts: [ { addr: "{{spare}}" } ]
`

// The same blackhole in front of a route with a fallback pool: once the
// pool is known to be failing, the fallback answers at once, 200s, and
// nobody waits for the timeout but the trials (one per host per 500ms),
// which the fallback answers when they fail.
// Detection is waited for, so that a slow machine makes the test slower,
// not wrong.
func TestBlackholedPoolAnswersFromTheFallbackPool(t *testing.T) {
	t.Parallel()
	vars := map[string]string{}
	for i := 1; i <= 2; i++ {
		b, err := fake.NewBlackhole(fmt.Sprintf("127.1.1.%d", i))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		vars[fmt.Sprintf("h%d", i)] = b.Addr
	}
	spare, err := fake.NewBackend("spare", "127.1.1.9")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(spare.Close)
	vars["spare"] = spare.Addr
	s, url, _ := startSturdy(t, parseConfig(t, blackholedFallbackConfig, vars))
	ev := countEvents(s)
	const timeout = 300 * time.Millisecond
	clients := ips("127.0.1.", 4)
	before := 0
	for i := 0; ev.get(event.PoolFailing) == 0; i++ {
		if i == 20 {
			t.Fatalf("the pool was not found failing in 20s; events:%s", ev)
		}
		before += timedSteady(t, url, clients, time.Second, 20*time.Millisecond, timeout).total()
	}
	tm := timedSteady(t, url, clients, 2*time.Second, 20*time.Millisecond, timeout)
	total := tm.total()
	tm.tally.mu.Lock()
	ok := tm.n[200]
	tm.tally.mu.Unlock()
	t.Logf("measured: blackholed pool with a fallback pool, 4 clients: %d answers until it was found failing; in the 2s after, %d answers, %d waited the %s timeout (the trials), answers %v",
		before, total, tm.slow, timeout, tm.n)
	if ev.get(event.PoolFailing) != 1 {
		t.Fatalf("%d pool_failing events; events:%s", ev.get(event.PoolFailing), ev)
	}
	// Two hosts, a trial each per 500ms: about 8 in 2s. A trial that
	// fails is a GET: the fallback answers it too.
	if tm.slow > 12 || ok != total {
		t.Errorf("after detection %d of %d answers waited for the timeout, %d from the fallback pool", tm.slow, total, ok)
	}
}
