package health

import (
	"math/bits"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// windowBuckets is how many slices a passive window is cut into; the window
// slides one slice at a time.
const windowBuckets = 10

// window counts a host's recent attempts in a sliding window, lock-free.
// Besides counts it keeps 64-bit sketches of which clients and which routes
// succeeded and failed, enough to tell "several distinct clients" and
// "other routes succeed" without storing keys.
type window struct {
	width atomic.Int64 // bucket width in nanoseconds
	b     [windowBuckets]bucket
}

type bucket struct {
	epoch       atomic.Int64
	requests    atomic.Uint64
	failures    atomic.Uint64 // host-attributed only
	bad         atomic.Uint64 // every failed attempt, whoever was blamed
	badClients  atomic.Uint64
	okClients   atomic.Uint64
	failClients atomic.Uint64
	okRoutes    atomic.Uint64
	failRoutes  atomic.Uint64
	failClasses atomic.Uint64 // bit c: a failure of outcome.Class c
}

// Totals are a window's sums.
type Totals struct {
	Requests, Failures uint64
	// Bad counts every failed attempt, whoever it was attributed to, and
	// BadClients sketches whose they were.
	Bad, BadClients        uint64
	OKClients, FailClients uint64 // sketches; see Count
	OKRoutes, FailRoutes   uint64
	FailClasses            uint64 // bit c: a host-attributed failure of outcome.Class c
}

// Count estimates how many distinct keys a sketch holds (exact while keys
// hash to distinct bits; a lower bound otherwise).
func Count(sketch uint64) int { return bits.OnesCount64(sketch) }

// Classes names the outcome classes in a FailClasses set, in class order:
// "status_5xx" or "connect_refused, reset".
func Classes(set uint64) string {
	var b strings.Builder
	for c := outcome.Class(0); c < outcome.NumClasses; c++ {
		if set&(1<<c) != 0 {
			if b.Len() > 0 {
				b.WriteString(", ")
			}
			b.WriteString(c.String())
		}
	}
	return b.String()
}

// Bit is the sketch bit of a key hash.
func Bit(hash uint64) uint64 { return 1 << (hash & 63) }

// SetSpan sets the window's length; counts already kept are dropped.
func (w *window) SetSpan(d time.Duration) {
	width := int64(d) / windowBuckets
	if width <= 0 {
		width = int64(time.Second)
	}
	if w.width.Swap(width) != width {
		w.Reset()
	}
}

// Span returns the window's length.
func (w *window) Span() time.Duration {
	return time.Duration(w.width.Load() * windowBuckets)
}

func (w *window) current(now time.Time) *bucket {
	width := w.width.Load()
	if width == 0 {
		width = int64(3 * time.Second)
		w.width.CompareAndSwap(0, width)
	}
	epoch := now.UnixNano() / width
	b := &w.b[epoch%windowBuckets]
	if old := b.epoch.Load(); old != epoch && b.epoch.CompareAndSwap(old, epoch) {
		// A slot from an older lap: clear it. An add racing with this may
		// be lost; the window is an estimate by design.
		b.requests.Store(0)
		b.failures.Store(0)
		b.bad.Store(0)
		b.badClients.Store(0)
		b.okClients.Store(0)
		b.failClients.Store(0)
		b.okRoutes.Store(0)
		b.failRoutes.Store(0)
		b.failClasses.Store(0)
	}
	return b
}

// Success records a successful attempt by client bit c on route bit r.
func (w *window) Success(now time.Time, c, r uint64) {
	b := w.current(now)
	b.requests.Add(1)
	b.okClients.Or(c)
	b.okRoutes.Or(r)
}

// Attempt records a failed attempt by client bit c that was attributed
// elsewhere (a client, a request, a route): it counts as traffic, not
// against the host.
func (w *window) Attempt(now time.Time, c uint64) {
	b := w.current(now)
	b.requests.Add(1)
	b.bad.Add(1)
	b.badClients.Or(c)
}

// Failure records a failed attempt of class class attributed to the host,
// by client bit c on route bit r. The class is kept so that the evidence
// against a host says what went wrong, not only how often.
func (w *window) Failure(now time.Time, c, r uint64, class outcome.Class) {
	b := w.current(now)
	b.requests.Add(1)
	b.failures.Add(1)
	b.failClients.Or(c)
	b.failRoutes.Or(r)
	b.failClasses.Or(1 << class)
	b.bad.Add(1)
	b.badClients.Or(c)
}

// Uncharge takes n host-attributed failures back out of the window,
// newest slices first: they turned out to be a client's.
func (w *window) Uncharge(now time.Time, n uint64) {
	width := w.width.Load()
	if width == 0 {
		return
	}
	cur := now.UnixNano() / width
	for e := cur; e > cur-windowBuckets && n > 0; e-- {
		b := &w.b[e%windowBuckets]
		if b.epoch.Load() != e {
			continue
		}
		for {
			f := b.failures.Load()
			take := min(f, n)
			if take == 0 || b.failures.CompareAndSwap(f, f-take) {
				n -= take
				break
			}
		}
	}
}

// Sum adds up the buckets that are inside the window at now.
func (w *window) Sum(now time.Time) Totals { return w.SumRecent(now, windowBuckets) }

// SumRecent adds up the last k slices of the window (k of 10): what is
// happening now, rather than over the whole window.
func (w *window) SumRecent(now time.Time, k int) Totals {
	width := w.width.Load()
	if width == 0 {
		return Totals{}
	}
	cur := now.UnixNano() / width
	var t Totals
	for i := range w.b {
		b := &w.b[i]
		if e := b.epoch.Load(); e > cur-int64(k) && e <= cur {
			t.Requests += b.requests.Load()
			t.Failures += b.failures.Load()
			t.Bad += b.bad.Load()
			t.BadClients |= b.badClients.Load()
			t.OKClients |= b.okClients.Load()
			t.FailClients |= b.failClients.Load()
			t.OKRoutes |= b.okRoutes.Load()
			t.FailRoutes |= b.failRoutes.Load()
			t.FailClasses |= b.failClasses.Load()
		}
	}
	return t
}

// Reset drops every count, e.g. when a probe clears a suspect host.
func (w *window) Reset() {
	for i := range w.b {
		w.b[i].epoch.Store(-1)
	}
}
