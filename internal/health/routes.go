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
	clients  clientSketch // which clients succeeded and failed on the route lately
	// clientFaults counts 5xx answers of the route that turned out to be
	// their client's own (it was attributed after them), until the
	// route's figures take them (TakeClientFaults).
	clientFaults atomic.Uint64

	// classes holds the outcome classes (bit c: class c) the route has
	// failed with since it was last quiet, up to when it was degraded:
	// the way the route fails. A degraded route owns only failures of
	// those classes; a host resetting its requests while the route answers
	// 502 everywhere, or a WAF's 502 to a scanner on a route that times
	// out, is not the route's.
	classes atomic.Uint64

	// run sketches, per class, the clients whose attempts on the route
	// reached a backend and failed that way since the route last served
	// a request, on any host (AttemptFailed): whether other clients'
	// requests fail the way one request did, known as they fail, before
	// any of them is settled (a slow route's first requests are answered
	// two timeouts after they began; the others' first timeouts come in
	// meanwhile). A success clears it; inRun spares the successes of a
	// route not failing any store.
	run   [outcome.NumClasses]atomic.Uint64
	inRun atomic.Bool
	// runFailed counts the route's requests settled with a failure since
	// it last served one (a success clears it): how long the route has
	// been failing as a whole (failingAsWhole). A request answered by its
	// retry is settled after its success and counts one: an estimate.
	runFailed atomic.Uint64

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

// routeMinClients is how many distinct clients must fail on a route
// before it can be degraded. One client failing everywhere is that
// client's problem (client attribution comes first), two may be two such
// clients; three clients that have nothing in common but the route make
// the route the common factor. Counted from 64-bit sketches, the number
// is a lower bound.
const routeMinClients = 3

// record adds a failure of request r on host h that no client explains,
// and reports whether the route is (now) degraded. routeLike says the
// route's other clients' attempts failed that way too, none of its
// requests served since (hostState.routeLike).
func (rt *RouteTracker) record(p *Pool, r *Request, h *Host, class outcome.Class, routeLike bool, now time.Time) bool {
	if rt == nil || rt.degraded.Load() && !rt.failsWith(class) {
		return false
	}
	cfg := p.attr
	bit := r.RouteBit
	ns, span := now.UnixNano(), nowSpan(cfg.Window)
	rt.clients.add(now, cfg.Window, r.ClientBit, true)
	if rt.failingAsWhole(class, r.ClientBit) {
		// A client served since it failed here fails again the route's
		// way: it is failing on the route. Any other failure (a killing
		// request, sent now and then among requests the route serves)
		// does not undo its being served. Asked of the route's run of
		// failures, not of the request's two hosts: on a pool left with
		// one host in rotation no request fails on two, and the clients
		// served on the route before it broke stayed served for a whole
		// window (seed 291 of the simulator).
		rt.clients.addRefail(now, cfg.Window, r.ClientBit)
	}
	rt.mu.Lock()
	rt.times[rt.n%clientRing] = ns
	rt.n++
	rt.last = ns
	if slot := slotFor(&rt.hosts, &rt.nhosts, h); slot != nil {
		slot.route = true
		slot.note(ns, span, rt.degraded.Load(), routeLike && !rt.degraded.Load())
	}
	if rt.degraded.Load() {
		rt.mu.Unlock()
		return true
	}
	rt.classes.Or(1 << class)
	recent := 0
	for i := 0; i < min(rt.n, clientRing); i++ {
		if rt.times[i] > ns-int64(cfg.Window) {
			recent++
		}
	}
	// The route must be failing as a whole: for several distinct clients,
	// at least half of those it served lately, whatever share of its
	// requests each sends (a scanner outnumbering the visitors of the
	// site's route is the scanner's, and it is attributed first). And
	// other routes must succeed now on the hosts where it fails. A pool
	// of one host has only that host to compare on.
	// A client that succeeded on the route since it failed there is not
	// failing on it: one request of its failed (a request that kills
	// whatever serves it, sent now and then by visitors who are otherwise
	// served), not the route. A route failing for its clients serves them
	// nothing. (It came back after it failed, so it stays back in the
	// window as long as its failure does, until it fails there again.)
	attributed := p.m.clients.bits.Load()
	ok, failed := rt.clients.sum(now, cfg.Window, windowBuckets)
	back := rt.clients.backSinceFailed(now, cfg.Window, windowBuckets)
	failing, all := Count(failed&^back&^attributed), Count((ok|failed)&^attributed)
	seen := func(h *Host) bool { return h.window.SumRecent(now, 2).OKRoutes&^bit != 0 }
	tally := tallySlots(rt.hosts[:rt.nhosts], ns, span, int64(cfg.Window), seen)
	spreadOK := spreadOwn(tally)
	if len(p.Hosts) == 1 && rt.nhosts == 1 {
		k, ok := rt.hosts[0].othersSucceed(ns, span)
		spreadOK = k && ok && seen(rt.hosts[0].h)
		tally.succeed = 1
	}
	// A pool left with one host in rotation (its peers out for their own
	// faults) is a pool of one while it lasts: the route can fail on that
	// host only, and other routes succeeding there now is all there is to
	// compare. Waiting for a second host made a route failing beside a
	// broken peer never named (seeds 221, 446 of the simulator).
	if !spreadOK && !tally.vetoed && tally.succeed == 1 && tally.alone == 0 && p.AvailableCount() == 1 {
		spreadOK = true
	}
	if recent < cfg.RouteMinFailures || failing < routeMinClients || 2*failing < all || !spreadOK {
		rt.mu.Unlock()
		return false
	}
	rt.degraded.Store(true)
	rt.since = now
	rt.evidence = fmt.Sprintf("%d failures (last: %s) from %d of its %d clients on %d hosts in %s while other routes succeeded at the same time on %d of them and failed on none", recent, class, failing, all, rt.nhosts, cfg.Window, tally.succeed)
	ev := rt.evidence
	rt.mu.Unlock()
	rt.m.emit(event.Event{
		Type: event.RouteDegraded, Severity: event.Warning, Route: rt.name, Pool: p.Name,
		Message:  "route degraded: its failures are its own; its hosts stay in rotation for other routes",
		Evidence: map[string]any{"evidence": ev},
	})
	return true
}

// failsWith reports whether class is one the route has been failing with.
func (rt *RouteTracker) failsWith(class outcome.Class) bool {
	return rt.classes.Load()&(1<<class) != 0
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
	rt.classes.Store(0)
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

// success records a successful request of client bit c on the route.
func (rt *RouteTracker) success(now time.Time, window time.Duration, c uint64) {
	if rt == nil {
		return
	}
	rt.clients.add(now, window, c, false)
	if rt.inRun.Load() && rt.inRun.Swap(false) {
		// A failure racing with the clearing may be lost: an estimate.
		for i := range rt.run {
			rt.run[i].Store(0)
		}
	}
	if rt.runFailed.Load() != 0 {
		rt.runFailed.Store(0)
	}
}

// AttemptFailed notes, as it happens, that an attempt of client bit c's
// request on the route reached a backend and failed with class (the
// keep-alive race apart: it says nothing about the route). Only failures
// pay for it.
func (rt *RouteTracker) AttemptFailed(class outcome.Class, c uint64) {
	if rt == nil || class >= outcome.NumClasses {
		return
	}
	rt.run[class].Or(c)
	rt.inRun.Store(true)
}

// othersFailing reports whether, since the route last served a request,
// other clients' attempts on it failed the way client bit c's request
// did last (class): the route's requests are failing that way, not this
// one request. A request that failed the same way on two hosts is then
// one of a route's failing requests (a slow route's, timing out wherever
// they go), not the one request that breaks whatever serves it while its
// route serves the others. The client's own requests are left out: a
// scanner's failures, one after another, are not the route's.
func (rt *RouteTracker) othersFailing(class outcome.Class, c uint64) bool {
	if rt == nil || class >= outcome.NumClasses {
		return false
	}
	return rt.run[class].Load()&^c != 0
}

// settled notes a request of the route settled with a failure: one more
// of its run of failures (runFailed).
func (rt *RouteTracker) settled() {
	if rt != nil {
		rt.runFailed.Add(1)
	}
}

// failingAsWhole reports whether the route is failing as a whole: other
// clients' attempts failed the way client bit c's did (class), and its
// last requests failed, as many as it takes clients to make a route's
// problem (routeMinClients), none served since. A request that kills
// whatever serves it, sent now and then among requests the route serves,
// seldom fails that many times in a row.
func (rt *RouteTracker) failingAsWhole(class outcome.Class, c uint64) bool {
	return rt.othersFailing(class, c) && rt.runFailed.Load() >= routeMinClients
}

// failingSince reports whether an attempt of the route failed with class
// since the route last served a request: not when one of its requests
// was answered after that, on any host.
func (rt *RouteTracker) failingSince(class outcome.Class) bool {
	return class < outcome.NumClasses && rt.run[class].Load() != 0
}

// TakeClientFaults returns, and forgets, how many of the route's earlier
// 5xx answers went to clients attributed since: the route's figures
// count them as the clients' own. One atomic load while there are none.
func (rt *RouteTracker) TakeClientFaults() uint64 {
	if rt == nil || rt.clientFaults.Load() == 0 {
		return 0
	}
	return rt.clientFaults.Swap(0)
}

// inTheMaking reports whether the route looks like its own problem, made
// or in the making, so that client bit c failing on it with class is not
// to be judged on this failure: two other clients (not attributed) failed
// on it in the window, and it is degraded (and fails that way) or fails
// across its hosts the way a route does (on two or more, on none of them beside other routes'
// failures). Clients failing on one broken host are no reason to hold
// back judging a client that fails everywhere (a hanging host beside a
// scanner kept the scanner unjudged for as long as it scanned).
func (rt *RouteTracker) inTheMaking(p *Pool, r *Request, class outcome.Class, now time.Time, c uint64) bool {
	if rt == nil || rt.degraded.Load() && !rt.failsWith(class) {
		return false
	}
	cfg := p.attr
	_, failed := rt.clients.sum(now, cfg.Window, windowBuckets)
	if Count(failed&^c&^rt.m.clients.bits.Load()) < routeMinClients-1 {
		return false
	}
	if rt.degraded.Load() {
		return true // made: its failures are the route's (Settle)
	}
	bit := r.RouteBit
	seen := func(h *Host) bool { return h.window.SumRecent(now, 2).OKRoutes&^bit != 0 }
	rt.mu.Lock()
	t := tallySlots(rt.hosts[:rt.nhosts], now.UnixNano(), nowSpan(cfg.Window), int64(cfg.Window), seen)
	rt.mu.Unlock()
	return !t.vetoed && t.succeed+t.alone >= 2
}

// clientSketch remembers which clients succeeded and which failed on a
// route, per tenth of the attribution window, as 64-bit sketches (like a
// host's window). The request path pays one atomic OR per success.
type clientSketch struct {
	b [windowBuckets]struct {
		epoch    atomic.Int64
		ok, fail atomic.Uint64
		// back: clients that succeeded on the route after failing on it
		// (clientTracker.served): a request of theirs failed, not the
		// route for them.
		back atomic.Uint64
		// refail: clients that failed on the route the route's way (see
		// RouteTracker.record).
		refail atomic.Uint64
	}
}

func sliceWidth(window time.Duration) int64 {
	return max(int64(window)/windowBuckets, int64(100*time.Millisecond))
}

func (s *clientSketch) add(now time.Time, window time.Duration, c uint64, failed bool) {
	epoch := now.UnixNano() / sliceWidth(window)
	b := &s.b[epoch%windowBuckets]
	if old := b.epoch.Load(); old != epoch && b.epoch.CompareAndSwap(old, epoch) {
		// A slice from an older lap; an add racing with the clearing may
		// be lost: an estimate, like the hosts' windows.
		b.ok.Store(0)
		b.fail.Store(0)
		b.back.Store(0)
		b.refail.Store(0)
	}
	if failed {
		b.fail.Or(c)
	} else {
		b.ok.Or(c)
	}
}

// addBack records that client bit c succeeded on the route after failing
// on it.
func (s *clientSketch) addBack(now time.Time, window time.Duration, c uint64) {
	s.add(now, window, c, false) // clears a stale slice first
	epoch := now.UnixNano() / sliceWidth(window)
	s.b[epoch%windowBuckets].back.Or(c)
}

// addRefail records that client bit c failed on the route the route's
// way.
func (s *clientSketch) addRefail(now time.Time, window time.Duration, c uint64) {
	epoch := now.UnixNano() / sliceWidth(window)
	b := &s.b[epoch%windowBuckets]
	if b.epoch.Load() == epoch { // add cleared a stale slice first
		b.refail.Or(c)
	}
}

// backSinceFailed returns the clients that came back in the last k
// slices and have not failed on the route the route's way in a later
// slice (addRefail): a client
// served after a failure (a request of its failed, not the route) that
// fails again once the route breaks is failing on it. Counting every
// client that came back anywhere in the window left a route failing for
// all its clients short of failing ones for a whole window (its clients
// had been served after failing on a broken host before the route broke:
// seeds 823, 59 of the simulator). Within one slice the order is not
// known, and the client counts as back.
func (s *clientSketch) backSinceFailed(now time.Time, window time.Duration, k int) uint64 {
	cur := now.UnixNano() / sliceWidth(window)
	var back uint64
	for e := cur - int64(k) + 1; e <= cur; e++ {
		b := &s.b[((e%windowBuckets)+windowBuckets)%windowBuckets]
		if b.epoch.Load() != e {
			continue
		}
		back = back&^b.refail.Load() | b.back.Load()
	}
	return back
}

// sum returns the clients that succeeded and failed in the last k slices.
func (s *clientSketch) sum(now time.Time, window time.Duration, k int) (ok, failed uint64) {
	cur := now.UnixNano() / sliceWidth(window)
	for i := range s.b {
		b := &s.b[i]
		if e := b.epoch.Load(); e > cur-int64(k) && e <= cur {
			ok |= b.ok.Load()
			failed |= b.fail.Load()
		}
	}
	return ok, failed
}
