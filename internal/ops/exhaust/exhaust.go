// Package exhaust keeps sturdy's own resource exhaustion apart from
// everyone else's failures. When sturdy runs out of file descriptors,
// socket buffers, memory or local ports, dials to healthy backends fail
// and accepts fail, and none of it is a backend's doing: the request path
// classes such attempts local_error (never host evidence, see
// internal/outcome) and tells a Tracker, which counts them, writes one
// aggregated warning per interval, announces the episode as an event
// (resource_exhausted, then resource_recovered) and fails readiness while
// it lasts.
//
// It also raises the process's soft file-descriptor limit to the hard one
// at start (RaiseFileLimit), for the runtimes that do not.
package exhaust

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// Operations that can hit sturdy's own limits.
const (
	OpUpstream = iota // connecting to (or talking with) a backend
	OpAccept          // accepting a client connection
	numOps
)

var opNames = [numOps]string{OpUpstream: "upstream", OpAccept: "accept"}

// Ops lists the operation names, as metric labels.
func Ops() []string { return opNames[:] }

// DefaultHold is how long after the last failure readiness stays failed
// and the episode stays open.
const DefaultHold = 10 * time.Second

// Aggregator counts repeated conditions for an aggregated log line (see
// internal/ops/logagg).
type Aggregator interface{ Add(key string) }

// Options configure a Tracker. Zero fields are fine.
type Options struct {
	// Agg receives one key per operation and resource; nil drops them.
	Agg Aggregator
	// Bus receives the episode's events; nil drops them.
	Bus event.Emitter
	// Hold is DefaultHold when 0.
	Hold time.Duration
	// Now is time.Now when nil.
	Now func() time.Time
}

// Tracker counts sturdy's own exhaustion. Its counting methods are safe
// for concurrent use and cost an atomic add or two; Run owns the episode.
type Tracker struct {
	o      Options
	res    []string
	counts [numOps][]atomic.Uint64 // by op, by resource index
	notes  [numOps][]string
	last   atomic.Int64 // Unix nanoseconds of the last failure, 0 for none

	// Episode state, written by Check (Run's goroutine) only.
	active atomic.Bool
	since  atomic.Int64
	seenAt uint64 // total when the episode opened
}

// New returns a tracker; Run (or Check, in tests) announces episodes.
func New(o Options) *Tracker {
	if o.Hold <= 0 {
		o.Hold = DefaultHold
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	t := &Tracker{o: o, res: outcome.LocalResources()}
	for op := range numOps {
		t.counts[op] = make([]atomic.Uint64, len(t.res))
		t.notes[op] = make([]string, len(t.res))
		for i, r := range t.res {
			what := "connections to backends failed"
			if op == OpAccept {
				what = "client connections could not be accepted"
			}
			t.notes[op][i] = fmt.Sprintf("sturdy ran out of %s: %s (sturdy's own limit; no backend was charged)", strings.ReplaceAll(r, "_", " "), what)
		}
	}
	return t
}

// UpstreamFailed counts an upstream attempt that failed on sturdy's own
// limits.
func (t *Tracker) UpstreamFailed(err error) { t.add(OpUpstream, err) }

// AcceptFailed counts an accept error and reports whether it was
// sturdy's own exhaustion.
func (t *Tracker) AcceptFailed(err error) bool {
	if !outcome.IsLocalExhaustion(err) {
		return false
	}
	t.add(OpAccept, err)
	return true
}

func (t *Tracker) add(op int, err error) {
	i := t.index(outcome.LocalResource(err))
	t.counts[op][i].Add(1)
	t.last.Store(t.o.Now().UnixNano())
	if t.o.Agg != nil {
		t.o.Agg.Add(t.notes[op][i])
	}
}

func (t *Tracker) index(res string) int {
	for i, r := range t.res {
		if r == res {
			return i
		}
	}
	return 0 // unnamed: counted with file descriptors, the usual one
}

func (t *Tracker) total() uint64 {
	var n uint64
	for op := range numOps {
		for i := range t.counts[op] {
			n += t.counts[op][i].Load()
		}
	}
	return n
}

// Counts returns the failures since start by operation and resource.
func (t *Tracker) Counts() map[string]map[string]uint64 {
	out := make(map[string]map[string]uint64, numOps)
	for op := range numOps {
		m := make(map[string]uint64, len(t.res))
		for i, r := range t.res {
			m[r] = t.counts[op][i].Load()
		}
		out[opNames[op]] = m
	}
	return out
}

// NotReady is the readiness reason while sturdy is short of its own
// resources (a failure within the hold time), or "".
func (t *Tracker) NotReady(now time.Time) string {
	last := t.last.Load()
	if last == 0 || now.Sub(time.Unix(0, last)) > t.o.Hold {
		return ""
	}
	var parts []string
	for op := range numOps {
		for i, r := range t.res {
			if n := t.counts[op][i].Load(); n > 0 {
				parts = append(parts, fmt.Sprintf("%s %s: %d", opNames[op], r, n))
			}
		}
	}
	return "sturdy itself is out of resources (failures since start: " + strings.Join(parts, ", ") + "); raise its limits (LimitNOFILE, ulimit -n) or lower its load"
}

// Active reports whether an episode is open, and since when.
func (t *Tracker) Active() (bool, time.Time) {
	if !t.active.Load() {
		return false, time.Time{}
	}
	return true, time.Unix(0, t.since.Load())
}

// Run checks for episodes every second until ctx ends.
func (t *Tracker) Run(ctx context.Context) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			t.Check()
		}
	}
}

// Check opens an episode when failures arrived since the last check, and
// closes one when none arrived for the hold time, announcing each once.
// Only one goroutine may call it (Run's).
func (t *Tracker) Check() {
	now := t.o.Now()
	total := t.total()
	last := time.Unix(0, t.last.Load())
	switch {
	case !t.active.Load() && total > t.seenAt:
		t.active.Store(true)
		t.since.Store(last.UnixNano())
		t.seenAt = total
		t.emit(event.Event{
			Type: event.ResourceExhausted, Severity: event.Critical,
			Message:  "sturdy ran out of its own resources; the failures are counted as local_error, against no backend",
			Evidence: t.evidence(),
		})
	case t.active.Load() && now.Sub(last) > t.o.Hold:
		t.active.Store(false)
		t.seenAt = total
		ev := t.evidence()
		ev["episode_seconds"] = last.Sub(time.Unix(0, t.since.Load())).Seconds()
		t.emit(event.Event{
			Type: event.ResourceRecovered, Message: "sturdy has its resources again: no local failure for " + t.o.Hold.String(),
			Evidence: ev,
		})
	case t.active.Load():
		t.seenAt = total
	}
}

func (t *Tracker) evidence() map[string]any {
	ev := map[string]any{}
	for op, m := range t.Counts() {
		for r, n := range m {
			if n > 0 {
				ev[op+"_"+r] = n
			}
		}
	}
	return ev
}

func (t *Tracker) emit(e event.Event) {
	if t.o.Bus != nil {
		t.o.Bus.Emit(e)
	}
}
