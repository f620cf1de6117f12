package cache

import (
	"sync"
	"sync/atomic"
	"time"
)

// routeState is one route's counters and stale-masking episode. Counters are
// atomics so the request path never locks for them; the metrics layer reads
// them at scrape time through Stats.
type routeState struct {
	hits, misses, revalidated, stale, bypasses atomic.Uint64
	collapsed, stored                          atomic.Uint64
	originRequests, originErrors, errorsHidden atomic.Uint64

	emitMu  sync.Mutex  // serialises episode transitions and their events; taken before mu
	mu      sync.Mutex  // guards episode
	episode *episode    // nil while the route's origin errors are not masked
	masking atomic.Bool // episode != nil, readable without the lock
}

// RouteStats is a snapshot of one route's counters. Every answer given by
// Serve is counted in exactly one of Hits, Misses, Revalidated, Stale and
// Bypasses; ServeStale answers count in Stale.
type RouteStats struct {
	Hits        uint64 // fresh stored response, origin not asked
	Misses      uint64 // answered with the origin's response (includes collapsed followers)
	Revalidated uint64 // stored response confirmed by a 304
	Stale       uint64 // stale stored response (stale-while-revalidate, stale-if-error, ServeStale)
	Bypasses    uint64 // cache not used: method, path, Authorization, Cookie, Range
	Collapsed   uint64 // requests that waited for another request's origin fetch
	Stored      uint64 // responses written to the store

	OriginRequests uint64 // fetches made by the cache, including background revalidations
	// OriginErrors counts fetches that failed (error or a FailStatuses
	// status), whether or not a stale answer hid the failure from the
	// client. Client cancellations are not counted.
	OriginErrors uint64
	// ErrorsHidden counts failures that a client did not see because it got
	// a stale copy instead: failed fetches answered with stale-if-error,
	// and ServeStale answers.
	ErrorsHidden uint64

	Masking      bool      // stale answers are currently hiding origin errors
	MaskingSince time.Time // start of the current masking episode
}

// Stats is a snapshot of the whole cache.
type Stats struct {
	Bytes     uint64 // total weight stored (bodies + headers + keys), approximate
	Objects   int    // entries stored (responses and Vary markers), approximate
	Evictions uint64 // entries evicted to stay within MaxBytes
	Routes    map[string]RouteStats
}

func (c *Cache) route(name string) *routeState {
	if rs, ok := c.routes.Load(name); ok {
		return rs.(*routeState)
	}
	rs, _ := c.routes.LoadOrStore(name, &routeState{})
	return rs.(*routeState)
}

// Stats returns a snapshot of all counters; cheap enough to call per scrape.
func (c *Cache) Stats() Stats {
	s := Stats{
		Bytes:     c.store.c.WeightedSize(),
		Objects:   c.store.c.EstimatedSize(),
		Evictions: c.store.evictions.Load(),
		Routes:    map[string]RouteStats{},
	}
	c.routes.Range(func(k, v any) bool {
		s.Routes[k.(string)] = v.(*routeState).snapshot()
		return true
	})
	return s
}

// RouteStats returns one route's counters (zero if the route was never seen).
func (c *Cache) RouteStats(route string) RouteStats {
	if rs, ok := c.routes.Load(route); ok {
		return rs.(*routeState).snapshot()
	}
	return RouteStats{}
}

func (rs *routeState) snapshot() RouteStats {
	s := RouteStats{
		Hits:           rs.hits.Load(),
		Misses:         rs.misses.Load(),
		Revalidated:    rs.revalidated.Load(),
		Stale:          rs.stale.Load(),
		Bypasses:       rs.bypasses.Load(),
		Collapsed:      rs.collapsed.Load(),
		Stored:         rs.stored.Load(),
		OriginRequests: rs.originRequests.Load(),
		OriginErrors:   rs.originErrors.Load(),
		ErrorsHidden:   rs.errorsHidden.Load(),
	}
	rs.mu.Lock()
	if rs.episode != nil {
		s.Masking, s.MaskingSince = true, rs.episode.since
	}
	rs.mu.Unlock()
	return s
}

// count records the answer kind of one Serve call.
func (rs *routeState) count(status string) {
	switch status {
	case StatusHit:
		rs.hits.Add(1)
	case StatusMiss:
		rs.misses.Add(1)
	case StatusRevalidated:
		rs.revalidated.Add(1)
	case StatusStale:
		rs.stale.Add(1)
	case StatusBypass:
		rs.bypasses.Add(1)
	}
}
