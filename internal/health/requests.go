package health

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sturdyproxy/sturdy/internal/health/balance"
	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// A request that kills whatever serves it (incident 003) fails the same
// way on every host it reaches, and the second host's agreement names it
// (Settle's sameTwice). A pool left with one host in rotation, its peers
// out for their own faults, has no second host to agree: each copy of the
// request failed on that host alone, was charged to it (or, on a
// kept-alive connection, to nobody) and was never named. What is left to
// compare with is time: the same request (method, path and query) failing
// the same way again and again, never served in between, on a host that
// served others in between. A host that fails for others too is not
// cleared by it, and a request that is served now and then is not one
// that kills whatever serves it.

// requestMinFailures is how many failures in a row of the same request,
// the same way, name it when no second host agreed: the third, after two
// gaps in which the host served others. Two in a row happen to a popular
// path on a host failing a little for everyone.
const requestMinFailures = 3

const (
	maxRequestsPerShard = 256
	maxRequestHosts     = 4
)

// requestTracker remembers the requests that failed lately, by
// fingerprint. Only failures add to it; a success pays one atomic load
// while no request with its sketch bit has failed, so its cost grows with
// trouble, not with traffic. Its size is bounded: a scan of many paths
// cannot grow it without end (new requests are then not followed).
type requestTracker struct {
	shards [16]requestShard
	// failing sketches the fingerprints with an entry.
	failing atomic.Uint64
}

type requestShard struct {
	mu sync.Mutex
	m  map[uint64]*requestEntry
}

// requestEntry is one request's failures in a row, all the same way.
type requestEntry struct {
	class  outcome.Class
	status int
	last   int64 // unix nanos of the latest failure
	// gaps counts the failures in a row that followed one on the same
	// host after which the host served others: the evidence.
	gaps   int
	hosts  [maxRequestHosts]requestHost
	nhosts int
}

// requestHost is a host the request failed on, with its counts at that
// failure, before the failure was recorded.
type requestHost struct {
	h         *hostState
	ok, unexp uint64
}

func newRequestTracker() *requestTracker {
	t := &requestTracker{}
	for i := range t.shards {
		t.shards[i].m = map[uint64]*requestEntry{}
	}
	return t
}

// fingerprint is r's key in the tracker, 0 when it has none (no Path: a
// request whose body is part of what it is).
func (r *Request) fingerprint() uint64 {
	if r.fp == 0 && r.Path != "" {
		r.fp = balance.HashStrings(r.Method, " ", r.Path, "?", r.Query) | 1
	}
	return r.fp
}

func (t *requestTracker) shard(fp uint64) *requestShard {
	return &t.shards[(fp>>8)%uint64(len(t.shards))]
}

// failedAgain records the failed attempts of request r (the body errors
// apart: its headers came) and reports whether the last one completes the
// evidence that the request fails wherever it goes: requestMinFailures of
// them in a row, the same way, the host serving others between each and
// the next. Call it before the attempts are counted on their hosts.
func (t *requestTracker) failedAgain(r *Request, fails []Failure, now time.Time, window time.Duration) bool {
	fp := r.fingerprint()
	if fp == 0 {
		return false
	}
	ns := now.UnixNano()
	s := t.shard(fp)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[fp]
	if e == nil {
		if len(s.m) >= maxRequestsPerShard {
			return false
		}
		e = &requestEntry{}
		s.m[fp] = e
		t.failing.Or(requestBit(fp))
	}
	named := false
	for _, f := range fails {
		if f.Class == outcome.BodyError {
			continue
		}
		named = e.failed(f, ns, int64(window))
	}
	return named
}

// failed adds one failure to the entry and reports whether the request
// is now known to fail the same way wherever it goes.
func (e *requestEntry) failed(f Failure, ns, window int64) bool {
	if e.nhosts > 0 && (f.Class != e.class || f.Status != e.status || ns-e.last > window) {
		// Failing another way, or after a window without failing, starts
		// the run afresh.
		*e = requestEntry{}
	}
	e.class, e.status, e.last = f.Class, f.Status, ns
	h := f.Host.hostState
	var slot *requestHost
	for i := range e.hosts[:e.nhosts] {
		if e.hosts[i].h == h {
			slot = &e.hosts[i]
			break
		}
	}
	ok, unexp := h.attempts[okClass].Load(), h.unexplained()
	if slot != nil {
		// Since the request's previous failure here: its own failure is
		// in the host's unexplained count, unless it was explained (the
		// keep-alive race), so one is not counted as someone else's.
		oks, others := since(ok, slot.ok), since(since(unexp, slot.unexp), 1)
		if oks >= 1 && oks > 2*others {
			e.gaps++
		} else {
			// The host failed for others as well in between: these
			// failures may be its own.
			e.gaps = 0
		}
	} else if e.nhosts < len(e.hosts) {
		slot = &e.hosts[e.nhosts]
		e.nhosts++
	}
	if slot != nil {
		*slot = requestHost{h: h, ok: ok, unexp: unexp}
	}
	return e.gaps >= requestMinFailures-1
}

// served notes a success of request r: a request that is served is not one
// that fails wherever it goes, and its run of failures ends. Requests
// whose sketch bit no failing request has pay one atomic load.
func (t *requestTracker) served(r *Request) {
	if t.failing.Load() == 0 || r.Path == "" {
		return
	}
	fp := r.fingerprint()
	if t.failing.Load()&requestBit(fp) == 0 {
		return
	}
	s := t.shard(fp)
	s.mu.Lock()
	delete(s.m, fp)
	s.mu.Unlock()
}

// sweep forgets the requests without a failure in the window. It holds
// every shard while it rebuilds the sketch, so that a request's failure
// meanwhile cannot lose its bit (its success would then not end its run).
func (t *requestTracker) sweep(now time.Time, window time.Duration) {
	if t.failing.Load() == 0 {
		return
	}
	cutoff := now.UnixNano() - int64(window)
	var bits uint64
	for i := range t.shards {
		t.shards[i].mu.Lock()
		for fp, e := range t.shards[i].m {
			if e.last <= cutoff {
				delete(t.shards[i].m, fp)
				continue
			}
			bits |= requestBit(fp)
		}
	}
	t.failing.Store(bits)
	for i := range t.shards {
		t.shards[i].mu.Unlock()
	}
}

func requestBit(fp uint64) uint64 { return 1 << (fp & 63) }
