package health

import (
	"sync/atomic"
	"time"
)

// pairWindow counts two things over the last ten seconds, one slice per
// second, lock-free.
type pairWindow struct {
	b [pairSlices]struct {
		epoch atomic.Int64
		a, b  atomic.Int64
	}
}

const pairSlices = 10

func (w *pairWindow) slot(now time.Time) int {
	epoch := now.Unix()
	i := int(epoch % pairSlices)
	s := &w.b[i]
	if old := s.epoch.Load(); old != epoch && s.epoch.CompareAndSwap(old, epoch) {
		s.a.Store(0)
		s.b.Store(0)
	}
	return i
}

func (w *pairWindow) addA(now time.Time, n int64) { w.b[w.slot(now)].a.Add(n) }
func (w *pairWindow) addB(now time.Time, n int64) { w.b[w.slot(now)].b.Add(n) }

func (w *pairWindow) sum(now time.Time) (a, b int64) {
	cur := now.Unix()
	for i := range w.b {
		s := &w.b[i]
		if e := s.epoch.Load(); e > cur-pairSlices && e <= cur {
			a += s.a.Load()
			b += s.b.Load()
		}
	}
	return a, b
}

// Budget caps a pool's retries at a share of its recent requests, so that a
// failing pool is not hammered by a retry storm.
type Budget struct {
	w pairWindow // requests (a) and retries (b)
	// Made and Refused count retries since start.
	Made, Refused atomic.Uint64
}

// Request counts a request that reached the pool.
func (b *Budget) Request(now time.Time) { b.w.addA(now, 1) }

// Allow reports whether one more retry fits in the budget (share of recent
// requests, at least min per window) and, if so, counts it.
func (b *Budget) Allow(now time.Time, share float64, min int) bool {
	reqs, retries := b.w.sum(now)
	if float64(retries) >= max(share*float64(reqs), float64(min)) {
		b.Refused.Add(1)
		return false
	}
	b.w.addB(now, 1)
	b.Made.Add(1)
	return true
}
