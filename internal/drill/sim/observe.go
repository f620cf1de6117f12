package sim

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/server"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// sampleEvery is how often the observer reads sturdy's status snapshot
// (the in-process twin of /api/status).
const sampleEvery = 250 * time.Millisecond

// observer records what sturdy concluded during a run: every event, as
// it is emitted, and the status snapshot's counters, sampled.
type observer struct {
	srv   *server.Server
	w     *World
	since func() time.Duration

	mu      sync.Mutex // guards events
	events  []seen
	samples []sample // the sampling goroutine's, read after it stopped
}

// seen is one event and when, in the run's time.
type seen struct {
	at time.Duration
	e  event.Event
}

// sample is the snapshot's counters at one moment.
type sample struct {
	at         time.Duration
	attributed view.Attribution
	// faults counts the edge's client_fault decisions by reason
	// (malformed_body, short_body, body_timeout, ...).
	faults map[string]uint64
	// gone counts answers to clients that left first (499), all routes.
	gone uint64
	// out is, per host IP, whether it is out of rotation (ejected or
	// down).
	out map[string]bool
}

func observe(s *server.Server, w *World, since func() time.Duration) *observer {
	o := &observer{srv: s, w: w, since: since}
	s.Events().Subscribe(func(e event.Event) {
		// On the emitter's goroutine: only record.
		o.mu.Lock()
		o.events = append(o.events, seen{since(), e})
		o.mu.Unlock()
	})
	return o
}

func (o *observer) sample(ctx context.Context) {
	for {
		o.take()
		if !pause(ctx, sampleEvery) {
			return
		}
	}
}

// last takes the run's final sample.
func (o *observer) last() { o.take() }

func (o *observer) take() {
	st := o.srv.Status()
	s := sample{at: o.since(), attributed: maps.Clone(st.Attributed), faults: map[string]uint64{}, out: map[string]bool{}}
	maps.Copy(s.faults, st.Edge.Decisions["client_fault"])
	for _, r := range st.Routes {
		s.gone += r.Requests["499"]
	}
	for _, p := range st.Pools {
		for _, h := range p.Hosts {
			s.out[ipOf(h.Addr)] = h.State == view.Ejected || h.State == view.Down
		}
	}
	o.samples = append(o.samples, s)
}

func (o *observer) recorded() []seen {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]seen(nil), o.events...)
}

// ipOf is the IP of "ip:port" (or the string itself).
func ipOf(addr string) string {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[:i]
		}
	}
	return addr
}
