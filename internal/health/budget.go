package health

import (
	"sync/atomic"
	"time"
)

// budgetBuckets of budgetWidth make the retry budget's sliding window.
const (
	budgetBuckets = 10
	budgetWidth   = time.Second
)

// Budget caps a pool's retries at a share of its recent requests, so that a
// failing pool is not hammered by a retry storm.
type Budget struct {
	b [budgetBuckets]struct {
		epoch             atomic.Int64
		requests, retries atomic.Int64
	}
	// Made and Refused count retries since start.
	Made, Refused atomic.Uint64
}

func newBudget() *Budget { return &Budget{} }

func (b *Budget) slot(now time.Time) int {
	epoch := now.UnixNano() / int64(budgetWidth)
	i := int(epoch % budgetBuckets)
	s := &b.b[i]
	if old := s.epoch.Load(); old != epoch && s.epoch.CompareAndSwap(old, epoch) {
		s.requests.Store(0)
		s.retries.Store(0)
	}
	return i
}

// Request counts a request that reached the pool.
func (b *Budget) Request(now time.Time) {
	b.b[b.slot(now)].requests.Add(1)
}

// Allow reports whether one more retry fits in the budget (share of recent
// requests, at least min per window) and, if so, counts it.
func (b *Budget) Allow(now time.Time, share float64, min int) bool {
	i := b.slot(now)
	cur := now.UnixNano() / int64(budgetWidth)
	var reqs, retries int64
	for j := range b.b {
		s := &b.b[j]
		if e := s.epoch.Load(); e > cur-budgetBuckets && e <= cur {
			reqs += s.requests.Load()
			retries += s.retries.Load()
		}
	}
	if float64(retries) >= max(share*float64(reqs), float64(min)) {
		b.Refused.Add(1)
		return false
	}
	b.b[i].retries.Add(1)
	b.Made.Add(1)
	return true
}
