// Package recent counts events over the last minute, lock-free: the "what
// is happening now" figures that sit next to the counters since start, such
// as the status page's error rate per route and per host. A counter since
// start cannot say that a route fails now (a week of good answers drowns a
// minute of 503s); a Window can, and costs the request path one atomic add.
package recent

import (
	"sync/atomic"
	"time"
)

// Window geometry: twelve slices of five seconds. The window slides one
// slice at a time, so a sum covers between Span-Width and Span.
const (
	Width   = 5 * time.Second
	buckets = 12
	Span    = buckets * Width
	// Slots is how many separate counts a Window keeps (status classes,
	// attempts and failures, ...); the caller gives each slot its meaning.
	Slots = 8
)

// Window counts events per slot over the last Span. The zero value is
// ready to use. Adds and sums may run concurrently, and no add is lost:
// each count carries the slice of time it belongs to in its high bits, so
// starting a slice's new lap is one compare-and-swap on the count itself,
// not a clearing that adds already counting in the new lap could race
// with (that lost events at every rollover).
type Window struct {
	n [buckets][Slots]atomic.Uint64
}

// A count is lapBits of the slice's number (its Unix time over Width, mod
// 2^32: a lap of 680 years) above countBits of events, 4e9 per slot and
// slice, more than a proxy answers in five seconds.
const (
	countBits = 32
	countMask = 1<<countBits - 1
)

func slice(ns int64) uint32 { return uint32(ns / int64(Width)) }

// Add counts one event in slot i at ns, in Unix nanoseconds: the request
// path has its start and duration at hand, and a time.Time built from
// them (Time.Add) would cost more than the count.
func (w *Window) Add(ns int64, i int) {
	s := slice(ns)
	add(&w.n[s%buckets][i], s)
}

// Add2 counts one event in slot i and one in slot j at ns, finding the
// slice once.
func (w *Window) Add2(ns int64, i, j int) {
	s := slice(ns)
	b := &w.n[s%buckets]
	add(&b[i], s)
	add(&b[j], s)
}

// add counts one event at slice s in c: one atomic add, unless c still
// holds an older lap's count.
func add(c *atomic.Uint64, s uint32) {
	for {
		v := c.Add(1)
		// A newer slice than s only when the clock stepped back: the
		// event is counted in the newer slice, which is near enough.
		if int32(uint32(v>>countBits)-s) >= 0 {
			return
		}
		// v is a count from an older lap, this add included: the slice
		// starts again from this one event, unless another add started
		// it first (or added to the old count since), in which case
		// this add's one went with the old count and is made again.
		if c.CompareAndSwap(v, uint64(s)<<countBits|1) {
			return
		}
	}
}

// Totals are a window's sums.
type Totals struct {
	N [Slots]uint64
	// Span is how much time the sums cover: the slices inside the window,
	// the current one up to now.
	Span time.Duration
}

// Sum adds up the slices inside the window at now.
func (w *Window) Sum(now time.Time) Totals {
	ns := now.UnixNano()
	cur := slice(ns)
	t := Totals{Span: (buckets-1)*Width + time.Duration(ns%int64(Width))}
	for i := range w.n {
		for j := range w.n[i] {
			v := w.n[i][j].Load()
			if age := int32(cur - uint32(v>>countBits)); age >= 0 && age < buckets {
				t.N[j] += v & countMask
			}
		}
	}
	return t
}
