package health

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// RouteTracker watches one route's failures. A route whose failures spread
// over its pool's hosts while other routes succeed on the same hosts is
// degraded: the failures are the route's (a slow report, say), and the
// hosts stay in rotation for everyone else (incident 002).
type RouteTracker struct {
	name string
	m    *Monitor

	degraded atomic.Bool
	recent   pairWindow // the route's successes (a) and failures (b), last 10s

	mu       sync.Mutex // guards the fields below; only failures take it
	times    [clientRing]int64
	n        int
	hosts    [maxHostsPerEntry]hostSlot
	nhosts   int
	last     int64
	since    time.Time
	evidence string
}

// NewRouteTracker returns the tracker for a route. The compile step keeps
// a route's tracker across reloads (by name), so a degraded route stays
// degraded.
func NewRouteTracker(m *Monitor, name string) *RouteTracker {
	return &RouteTracker{name: name, m: m}
}

// Degraded reports whether the route's failures are currently its own.
func (rt *RouteTracker) Degraded() bool { return rt != nil && rt.degraded.Load() }

// Describe returns since when the route is degraded and why.
func (rt *RouteTracker) Describe() (time.Time, string) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.since, rt.evidence
}

func (rt *RouteTracker) record(p *Pool, bit uint64, h *Host, class outcome.Class, now time.Time) bool {
	if rt == nil {
		return false
	}
	cfg := p.attr
	ns, span := now.UnixNano(), nowSpan(cfg.Window)
	rt.mu.Lock()
	rt.times[rt.n%clientRing] = ns
	rt.n++
	rt.last = ns
	if slot := slotFor(&rt.hosts, &rt.nhosts, h); slot != nil {
		slot.note(ns, span)
	}
	if rt.degraded.Load() {
		rt.mu.Unlock()
		rt.recent.addB(now, 1)
		return true
	}
	recent := 0
	for i := 0; i < min(rt.n, clientRing); i++ {
		if rt.times[i] > ns-int64(cfg.Window) {
			recent++
		}
	}
	rt.recent.addB(now, 1)
	// The route must be failing as a whole, not for one client among many
	// it serves well (a scanner on the site's route is the scanner's), and
	// other routes must succeed now on the hosts where it fails. A pool of
	// one host has only that host to compare on.
	oks, fails := rt.recent.sum(now)
	seen := func(h *Host) bool { return h.window.SumRecent(now, 2).OKRoutes&^bit != 0 }
	tally := tallySlots(rt.hosts[:rt.nhosts], ns, span, int64(cfg.Window), seen)
	spreadOK := spreadOwn(tally)
	if len(p.Hosts) == 1 && rt.nhosts == 1 {
		k, ok := rt.hosts[0].othersSucceed(ns, span)
		spreadOK = k && ok && seen(rt.hosts[0].h)
		tally.succeed = 1
	}
	if recent < cfg.RouteMinFailures || fails < oks || !spreadOK {
		rt.mu.Unlock()
		return false
	}
	rt.degraded.Store(true)
	rt.since = now
	rt.evidence = fmt.Sprintf("%d failures (last: %s) on %d hosts in %s while other routes succeeded at the same time on %d of them and failed on none", recent, class, rt.nhosts, cfg.Window, tally.succeed)
	ev := rt.evidence
	rt.mu.Unlock()
	rt.m.emit(event.Event{
		Type: event.RouteDegraded, Severity: event.Warning, Route: rt.name, Pool: p.Name,
		Message:  "route degraded: its failures are its own; its hosts stay in rotation for other routes",
		Evidence: map[string]any{"evidence": ev},
	})
	return true
}

// spreadOwn reports whether the hosts where a route fails make its
// failures its own: it fails on two hosts at least, other routes succeed
// now on one of them at least, and on none do they fail. Under hash
// balancing every client of a route can land on one host that serves
// nothing else (incident 002): that host neither clears nor blames the
// route, but the route failing there too, as on a host where the others
// succeed, is what a route's own problem looks like. The route is never
// degraded on such hosts alone: with nothing to compare, a host that
// fails everything it gets would look the same.
func spreadOwn(t slotTally) bool {
	return !t.vetoed && t.succeed >= 1 && t.succeed+t.alone >= 2
}

// sweep recovers a degraded route after a window without failures and
// forgets hosts seen before it.
func (rt *RouteTracker) sweep(now time.Time, window time.Duration) {
	rt.mu.Lock()
	quiet := now.UnixNano()-rt.last > int64(window)
	if !quiet {
		rt.mu.Unlock()
		return
	}
	rt.nhosts = 0
	wasDegraded := rt.degraded.Swap(false)
	since := rt.since
	rt.mu.Unlock()
	if wasDegraded {
		rt.m.emit(event.Event{
			Type: event.RouteRecovered, Route: rt.name,
			Message:  "route recovered: no failures for a whole window",
			Evidence: map[string]any{"degraded_seconds": now.Sub(since).Seconds()},
		})
	}
}

// success records a successful request on the route.
func (rt *RouteTracker) success(now time.Time) {
	if rt != nil {
		rt.recent.addA(now, 1)
	}
}
