package alert

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

// receiver is a local webhook endpoint that records the bodies it accepted.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	bodies   [][]byte
	tries    int
	got      chan struct{}                             // one value per accepted body
	behavior func(try int, w http.ResponseWriter) bool // false: refused
}

func newReceiver(t *testing.T, behavior func(try int, w http.ResponseWriter) bool) *receiver {
	r := &receiver{got: make(chan struct{}, 10_000), behavior: behavior}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.tries++
		try := r.tries
		r.mu.Unlock()
		if r.behavior != nil && !r.behavior(try, w) {
			return
		}
		if req.Header.Get("Content-Type") != "application/json" {
			t.Errorf("content type %q", req.Header.Get("Content-Type"))
		}
		r.mu.Lock()
		r.bodies = append(r.bodies, body)
		r.mu.Unlock()
		r.got <- struct{}{}
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) wait(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for range n {
		select {
		case <-r.got:
		case <-timeout:
			t.Fatalf("receiver got %d bodies, want %d", len(r.snapshot()), n)
		}
	}
}

func (r *receiver) snapshot() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.bodies)
}

func hook(name, url, format string, events ...string) Webhook {
	return Webhook{Name: name, URL: url, Format: format, Events: events, Timeout: 5 * time.Second}
}

// fast are options for tests: quick retries, nothing logged.
func fast() Options {
	return Options{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Instance: "test"}
}

func seqs(t *testing.T, bodies [][]byte) []uint64 {
	t.Helper()
	out := make([]uint64, 0, len(bodies))
	for _, b := range bodies {
		var e event.Event
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("body %s: %v", b, err)
		}
		out = append(out, e.Seq)
	}
	return out
}

// started runs d until stop(t, d) or the end of the test.
func started(t *testing.T, d *Dispatcher) *Dispatcher {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	var once sync.Once
	end := func() { once.Do(func() { cancel(); <-done }) }
	stops.Store(d, end)
	t.Cleanup(end)
	return d
}

var stops sync.Map // *Dispatcher → its stop func

// stop ends d's Run and waits for it.
func stop(t *testing.T, d *Dispatcher) {
	f, ok := stops.Load(d)
	if !ok {
		t.Fatal("stop of a dispatcher that was not started")
	}
	f.(func())()
}

// Test 3 of the issue: every event exactly once, in order, also through a
// receiver that fails every third try.
func TestEachEventOnceInOrder(t *testing.T) {
	steady := newReceiver(t, nil)
	flaky := newReceiver(t, func(try int, w http.ResponseWriter) bool {
		if try%3 == 0 {
			http.Error(w, "busy", http.StatusInternalServerError)
			return false
		}
		return true
	})
	d := started(t, New([]Webhook{hook("steady", steady.URL, "json"), hook("flaky", flaky.URL, "json")}, fast()))
	bus := event.NewBus(nil, 10, nil)
	bus.Subscribe(d.Notify)
	const n = 300
	for i := range n {
		bus.Emit(event.Event{Type: event.HostEjected, Pool: "web", Host: fmt.Sprintf("10.0.0.%d:80", i%250), Message: "ejected"})
	}
	steady.wait(t, n)
	flaky.wait(t, n)
	want := make([]uint64, n)
	for i := range want {
		want[i] = uint64(i + 1)
	}
	for _, r := range []*receiver{steady, flaky} {
		if got := seqs(t, r.snapshot()); !slices.Equal(got, want) {
			t.Errorf("seqs %v...", got[:min(20, len(got))])
		}
	}
	stop(t, d) // the senders count after the receiver answered
	st := d.Stats()
	flaky.mu.Lock()
	refused := uint64(flaky.tries - n)
	flaky.mu.Unlock()
	if st[0].Sent != n || st[1].Sent != n || st[1].Retries != refused || st[1].Dropped+st[1].Failed != 0 {
		t.Errorf("stats %+v", st)
	}
	if st[1].LastError != "" {
		t.Errorf("last error %q after a successful delivery", st[1].LastError)
	}
}

// blackhole accepts connections and never answers.
func blackhole(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String() + "/hook"
}

func p99(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)*99/100]
}

// A receiver that never answers does not hold up the emitter: 5000 events
// are emitted while it answers none of them (an Emit that waited on it
// would never return), the queue keeps what fits and the rest are dropped
// and counted. Emit's p99 with and without it is logged, not judged: a
// wall-clock bound would fail on a busy machine, not on a fault.
func TestBlackholedReceiverNeverSlowsEmit(t *testing.T) {
	measure := func(bus *event.Bus) time.Duration {
		lat := make([]time.Duration, 0, 5000)
		for i := range 5000 {
			start := time.Now()
			bus.Emit(event.Event{Type: event.PoolEmpty, Pool: "p", Message: fmt.Sprint(i)})
			lat = append(lat, time.Since(start))
		}
		return p99(lat)
	}
	without := measure(event.NewBus(nil, 100, nil))

	o := fast()
	o.QueueSize = 64
	o.DrainTimeout = 50 * time.Millisecond
	d := started(t, New([]Webhook{hook("hole", blackhole(t), "json")}, o))
	bus := event.NewBus(nil, 100, nil)
	bus.Subscribe(d.Notify)
	with := measure(bus)
	t.Logf("Emit p99: %v without webhooks, %v with a blackholed one", without, with)
	st := d.Stats()[0]
	// The queue is full; the sender may hold one more event, in flight to
	// the blackhole, taken off the queue.
	if st.Queued < 63 || st.Queued > 64 || uint64(st.Queued)+st.Dropped < 5000-1 || st.Sent != 0 {
		t.Errorf("stats %+v", st)
	}
	// The end of Run gives up on the blackhole when its drain timeout
	// ends, and counts what it could not send.
	stop(t, d)
	st = d.Stats()[0]
	if st.Queued != 0 || st.Sent+st.Failed+st.Dropped != 5000 {
		t.Errorf("after Stop: %+v", st)
	}
	d.Notify(event.Event{Type: event.PoolEmpty}) // after Stop: dropped, no panic
	if got := d.Stats()[0].Dropped; got != st.Dropped+1 {
		t.Errorf("dropped %d after Stop, want %d", got, st.Dropped+1)
	}
}

// When the queue is full the oldest waiting event goes: the newest
// transitions tell the state now.
func TestFullQueueDropsOldest(t *testing.T) {
	release := make(chan struct{})
	first := make(chan struct{}, 1)
	r := newReceiver(t, func(try int, w http.ResponseWriter) bool {
		if try == 1 {
			first <- struct{}{}
			<-release
		}
		return true
	})
	o := fast()
	o.QueueSize = 3
	d := started(t, New([]Webhook{hook("r", r.URL, "json")}, o))
	bus := event.NewBus(nil, 10, nil)
	bus.Subscribe(d.Notify)
	bus.Emit(event.Event{Type: event.HostSuspect})
	<-first // event 1 is in flight
	for range 9 {
		bus.Emit(event.Event{Type: event.HostSuspect})
	}
	close(release)
	r.wait(t, 4)
	if got := seqs(t, r.snapshot()); !slices.Equal(got, []uint64{1, 8, 9, 10}) {
		t.Errorf("delivered %v, want [1 8 9 10]", got)
	}
	stop(t, d)
	if st := d.Stats()[0]; st.Dropped != 6 || st.Sent != 4 {
		t.Errorf("stats %+v", st)
	}
}

func TestFilterByEventType(t *testing.T) {
	r := newReceiver(t, nil)
	d := started(t, New([]Webhook{hook("r", r.URL, "json", event.PoolEmpty, event.PoolRestored)}, fast()))
	defer stop(t, d)
	for _, typ := range []string{event.HostSuspect, event.PoolEmpty, event.ReloadApplied, event.PoolRestored} {
		d.Notify(event.Event{Type: typ, Seq: uint64(len(typ))})
	}
	r.wait(t, 2)
	var types []string
	for _, b := range r.snapshot() {
		var e struct {
			Type, Instance string
		}
		json.Unmarshal(b, &e)
		types = append(types, e.Type+"@"+e.Instance)
	}
	if !slices.Equal(types, []string{"pool_empty@test", "pool_restored@test"}) {
		t.Errorf("got %v", types)
	}
}

func TestRetriesThenGivesUp(t *testing.T) {
	var mu sync.Mutex
	statuses := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		statuses[r.URL.Path]++
		mu.Unlock()
		switch r.URL.Path {
		case "/down":
			http.Error(w, "down", http.StatusBadGateway)
		case "/gone":
			http.Error(w, "no_service", http.StatusNotFound)
		case "/slow-down":
			w.Header().Set("Retry-After", "3600")
			http.Error(w, "rate limited", http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()
	o := fast()
	o.MaxAttempts = 3
	var logs testutil.SyncBuffer
	o.Log = slog.New(slog.NewTextHandler(&logs, nil))
	d := started(t, New([]Webhook{
		hook("down", srv.URL+"/down", "json"), hook("gone", srv.URL+"/gone", "json"), hook("slow", srv.URL+"/slow-down", "json"),
	}, o))
	d.Notify(event.Event{Type: event.PoolEmpty})
	// Stop waits for the queued event; no new retries start once stopping,
	// so wait for the tries to finish first.
	if !testutil.Eventually(10*time.Second, func() bool {
		st := d.Stats()
		return st[0].Failed == 1 && st[1].Failed == 1 && st[2].Failed == 1
	}) {
		t.Fatalf("stats %+v", d.Stats())
	}
	stop(t, d)
	st := d.Stats()
	mu.Lock()
	defer mu.Unlock()
	// Retry-After: 3600 is capped by MaxBackoff, so all three tries happen.
	if statuses["/down"] != 3 || statuses["/gone"] != 1 || statuses["/slow-down"] != 3 {
		t.Errorf("tries %v", statuses)
	}
	if st[0].Retries != 2 || st[1].Retries != 0 || st[0].LastError == "" || st[1].LastErrorTime.IsZero() {
		t.Errorf("stats %+v", st)
	}
	// One line when each webhook starts failing and one per lost event,
	// not one per try.
	text := logs.String()
	if n := strings.Count(text, "webhook delivery failing"); n != 3 {
		t.Errorf("%d 'failing' lines:\n%s", n, text)
	}
	if n := strings.Count(text, "webhook gave up on an event"); n != 3 {
		t.Errorf("%d 'gave up' lines:\n%s", n, text)
	}
}

// Stop delivers what is queued before returning.
func TestStopDeliversQueue(t *testing.T) {
	r := newReceiver(t, nil)
	d := started(t, New([]Webhook{hook("r", r.URL, "json")}, fast()))
	for i := range 50 {
		d.Notify(event.Event{Type: event.ReloadApplied, Seq: uint64(i + 1)})
	}
	stop(t, d)
	if got := len(r.snapshot()); got != 50 {
		t.Errorf("delivered %d of 50 before Stop returned", got)
	}
}

func TestReconfigure(t *testing.T) {
	a, b := newReceiver(t, nil), newReceiver(t, nil)
	d := started(t, New([]Webhook{hook("a", a.URL, "json"), hook("b", b.URL, "json")}, fast()))
	d.Notify(event.Event{Type: event.PoolEmpty, Seq: 1})
	a.wait(t, 1)
	b.wait(t, 1)
	// a unchanged, b removed, c added.
	c := newReceiver(t, nil)
	d.Reconfigure([]Webhook{hook("a", a.URL, "json"), hook("c", c.URL, "slack")})
	d.Notify(event.Event{Type: event.PoolRestored, Seq: 2})
	a.wait(t, 1)
	c.wait(t, 1)
	stop(t, d)
	st := d.Stats()
	if len(st) != 2 || st[0].Name != "a" || st[0].Sent != 2 || st[1].Name != "c" || st[1].Sent != 1 || st[1].Format != "slack" {
		t.Errorf("stats %+v", st)
	}
	if len(b.snapshot()) != 1 {
		t.Error("a removed webhook got an event after Reconfigure")
	}
}
