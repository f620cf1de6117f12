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
// ready to use. Adds and sums may run concurrently; an add that races with
// the clearing of a slice from an older lap may be lost, which a rate shown
// to people can afford.
type Window struct {
	b [buckets]bucket
}

type bucket struct {
	epoch atomic.Int64 // which Width-long slice of time the counts belong to
	n     [Slots]atomic.Uint64
}

// Add counts one event in slot i at ns, in Unix nanoseconds: the request
// path has its start and duration at hand, and a time.Time built from
// them (Time.Add) would cost more than the count.
func (w *Window) Add(ns int64, i int) { w.at(ns).n[i].Add(1) }

// Add2 counts one event in slot i and one in slot j at ns, finding the
// slice once.
func (w *Window) Add2(ns int64, i, j int) {
	b := w.at(ns)
	b.n[i].Add(1)
	b.n[j].Add(1)
}

func (w *Window) at(ns int64) *bucket {
	epoch := ns / int64(Width)
	b := &w.b[epoch%buckets]
	if old := b.epoch.Load(); old < epoch && b.epoch.CompareAndSwap(old, epoch) {
		// A slice from an older lap: its counts are a minute old.
		for i := range b.n {
			b.n[i].Store(0)
		}
	}
	// old > epoch only when the clock stepped back: the event is counted
	// in the newer slice, which is near enough.
	return b
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
	cur := ns / int64(Width)
	t := Totals{Span: (buckets-1)*Width + time.Duration(ns%int64(Width))}
	for i := range w.b {
		b := &w.b[i]
		if e := b.epoch.Load(); e > cur-buckets && e <= cur {
			for j := range b.n {
				t.N[j] += b.n[j].Load()
			}
		}
	}
	return t
}
