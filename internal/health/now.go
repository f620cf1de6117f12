package health

import "time"

// Attribution asks whether *other* traffic succeeds on a host where a
// client, a route or a request fails. It must ask about now: in an outage
// that every client shares, the successes from before it are still in any
// window, and counting them made every innocent client look like the cause
// of its own failures within a second of an outage starting. So the
// question is asked of what happened on the host since the failures began,
// counted with the host's running totals (successes, failed attempts that
// were sent), never of a window's sums.

// nowSpan is how far back "now" reaches: a failure older than that starts
// the count afresh. A tenth of the attribution window, between 1s and 5s.
func nowSpan(window time.Duration) int64 {
	return int64(min(max(window/10, time.Second), 5*time.Second))
}

// hostSlot follows one host for one client or route: since when it has
// been failing there (at), the host's totals then, and its own failures
// since.
type hostSlot struct {
	h       *Host
	at      int64  // unix nanos: the first failure of this run on the host
	last    int64  // unix nanos: the latest failure on the host
	ok, bad uint64 // the host's successes and sent failures at `at`
	unexp   uint64 // the host's unexplained failures at `at`
	own     uint64 // the owner's failures on the host since `at`
	// ownBad counts those of own that were not explained when noted: the
	// part of the host's unexplained failures that is the owner's.
	ownBad  uint64
	charged uint64 // a client's failures charged to the host's window before it was attributed
	// route marks a route's slot. A route is judged against the other
	// routes on the host, and another route failing there as a whole
	// (hostState.routeLike) says nothing about whether the host serves
	// them: its failures are left out of the others' (and of the owner's
	// own unexplained ones). Two slow routes on the same hosts otherwise
	// vetoed each other for as long as both lasted.
	route bool
}

// note records a failure on the slot's host at ns; explained says the
// failure is known not to be the host's (see hostState.explained), and
// routeLike that it was counted as a route failing as a whole
// (hostState.routeLike). A run of failures older than span is forgotten:
// what the host did before it says nothing about now.
func (s *hostSlot) note(ns, span int64, explained, routeLike bool) {
	s.last = ns
	if s.at == 0 || ns-s.at > span {
		s.at = ns
		s.ok, s.bad, s.unexp = s.h.attempts[okClass].Load(), s.h.sent.Load(), s.unexplained()
		s.own, s.ownBad = 0, 0
		return
	}
	s.own++
	if !explained && !(routeLike && s.route) {
		s.ownBad++
	}
}

// unexplained is the host's count of failures the slot compares: for a
// route's slot, without other routes' failures as a whole.
func (s *hostSlot) unexplained() uint64 {
	if s.route {
		return since(s.h.unexplained(), s.h.routeLike.Load())
	}
	return s.h.unexplained()
}

// forget takes the owner's failure at ns back out of the slot: it turned
// out to be someone else's (a degraded route's). The first of a run
// forgets the run.
func (s *hostSlot) forget(ns int64) {
	switch {
	case s.own > 0:
		s.own--
	case s.at == ns:
		s.at = 0
	}
}

// unexplained is how many failed attempts reached the host that nobody
// else explains: the ones that may say it fails for its clients. Two
// scanners at once, each failing on every host, must not each make the
// hosts look failing for the other's judgement; nor must a degraded
// route's failures hide a scanner.
func (s *hostState) unexplained() uint64 {
	return since(s.sent.Load(), s.explained.Load())
}

// othersSucceed judges the slot at ns: known reports whether the run is
// long enough to say anything (a second failure within span), and ok
// whether, since the run began, the host succeeded at least once and more
// than twice as often as it failed for anyone else: others mostly succeed.
func (s *hostSlot) othersSucceed(ns, span int64) (known, ok bool) {
	if s.own == 0 || ns-s.at > span {
		return false, false
	}
	oks := since(s.h.attempts[okClass].Load(), s.ok)
	// The owner's concurrent failures are counted as sent before they are
	// noted here, so one may be in s.bad and in s.own as well: what is
	// left for the others never goes below zero (a wrapped count would
	// make every host look failing for others, and no route degraded).
	others := since(since(s.unexplained(), s.unexp), s.ownBad)
	return true, oks >= 1 && oks > 2*others
}

// alone reports whether, since the run began, the slot's host had no
// traffic but the owner's failing requests: it neither succeeded nor
// failed for anyone else, so it says nothing about whether others succeed
// there. Under hash balancing, which hashes clients and not routes, a
// route's requests can be all a host gets.
//
// For a route, failures that say nothing about the host (an attributed
// scanner's, another route's as a whole) are not traffic for anyone
// else: a scanner failing on every host made each host where the route
// had not yet been seen beside a success "failing for others", a veto,
// and a slow route beside it was never degraded (simulator seed 79).
func (s *hostSlot) alone() bool {
	oks := since(s.h.attempts[okClass].Load(), s.ok)
	if s.route {
		return oks == 0 && since(since(s.unexplained(), s.unexp), s.ownBad) == 0
	}
	return oks == 0 && since(since(s.h.sent.Load(), s.bad), s.own) == 0
}

// slotTally is what the hosts where an owner failed in the last window
// say about its failures: on how many others succeed now, on how many
// nobody else was served, and whether on any of them others do not
// succeed (a veto).
type slotTally struct {
	succeed, alone int
	vetoed         bool
	// ownSucceed counts the owner's failures in the runs on hosts where
	// others succeed, ownElse those on hosts that vetoed or served nobody
	// else.
	ownSucceed, ownElse uint64
}

// tallySlots applies othersSucceed to the slots with a failure in the
// last window. The counts include the owner's own successes; seen, asked
// of each host where others succeed, makes sure someone else succeeded
// there lately.
func tallySlots(slots []hostSlot, ns, span, window int64, seen func(*Host) bool) slotTally {
	var t slotTally
	for i := range slots {
		s := &slots[i]
		if ns-s.last > window {
			continue
		}
		k, ok := s.othersSucceed(ns, span)
		switch {
		case !k:
		case !ok && s.alone():
			t.alone++
			t.ownElse += s.own + 1
		case !ok || !seen(s.h):
			t.vetoed = true
			t.ownElse += s.own + 1
		default:
			t.succeed++
			t.ownSucceed += s.own + 1
		}
	}
	return t
}

// judgeSlots reports whether a client's failures are its own: other
// traffic succeeds now on at least two of the hosts where it fails, and
// most of its failures are on such hosts. A host where others fail too,
// or that served nobody else, speaks for the client: its failures there
// may be the host's. But one such host among several where everyone else
// is served does not make a scanner's failures on all of them the
// hosts' (a hanging or gray host beside a scanner kept it unjudged for as
// long as both lasted): what counts is where its failures are. An
// innocent failing on a broken host has most of its failures there.
//
// need is how many such hosts it takes: two, or one when one host is all
// the pool has in rotation (a pool of one, or its peer out for a fault
// of its own): there, failing where others are served is all the
// evidence there can be, and a scanner was never named.
func judgeSlots(slots []hostSlot, ns, span, window int64, need int, seen func(*Host) bool) bool {
	t := tallySlots(slots, ns, span, window, seen)
	return t.succeed >= need && t.ownSucceed > t.ownElse
}

// slotFor returns the slot of h in slots, adding one while there is room
// (nil when there is none). A host of an older config with the same state
// is the same host.
func slotFor(slots *[maxHostsPerEntry]hostSlot, n *int, h *Host) *hostSlot {
	for i := range slots[:*n] {
		if slots[i].h.hostState == h.hostState {
			return &slots[i]
		}
	}
	if *n == len(slots) {
		return nil
	}
	s := &slots[*n]
	*s = hostSlot{h: h}
	*n++
	return s
}

// servesOthers reports whether the host still succeeds for other requests
// now, at ns: since the current run of failures on it began (a failure
// more than span after the last starts a new run), it succeeded at least
// once and for at least one attempt in five. A new run knows nothing of
// now yet and asks whether the host succeeded since it last failed (or
// whether this is its first failure ever). A request that failed the same way on two hosts is the request's fault
// only when both still serve others; when they fail everything, it is
// theirs.
func (s *hostState) servesOthers(ns, span int64) bool {
	ok, bad := s.attempts[okClass].Load(), s.sent.Load()
	at := s.runAt.Load()
	if ns-at > span {
		okSince := since(ok, s.lastFailOK.Load())
		if s.runAt.CompareAndSwap(at, ns) {
			s.runOK.Store(ok)
			s.runBad.Store(bad)
		}
		s.lastFailOK.Store(ok)
		// A host that never failed before gives no reason to doubt that
		// the request is the cause.
		return at == 0 || okSince >= 1
	}
	s.lastFailOK.Store(ok)
	// Another request may have begun the run with counts read after
	// these: what happened since is never below zero.
	oks, bads := since(ok, s.runOK.Load()), since(bad, s.runBad.Load())
	return oks >= 1 && 4*oks >= bads
}

// since is cur-base for running counts read at different moments, 0 when
// base was read later.
func since(cur, base uint64) uint64 {
	if cur > base {
		return cur - base
	}
	return 0
}
