package health

import "time"

// Overload is not failure. A host that answers 503 with Retry-After is
// full, not broken: ejecting it (as the gray-failure rule did, its probe
// passing while its traffic "failed") removes capacity exactly when it is
// short. So the answer is counted and held against nobody, and the host
// is sent less: for the Retry-After (bounded), it takes no more requests
// at once than it had in flight when it shed, less the one it refused.
// When every host is at such a cap, the proxy answers the excess at once
// with its own 503 and Retry-After, instead of sending it to be refused.

// Bounds of how long a shedding host's learned cap holds: a Retry-After
// of 0 or one that cannot be read means a moment, and one of an hour
// must not keep a host at a fraction of its capacity for that long.
const (
	minShedHold = 100 * time.Millisecond
	maxShedHold = 5 * time.Second
)

// Overloaded records that h shed a request with 503 and Retry-After
// retry (0: none readable) at now, while inflight requests (this one
// included) were in flight to it: h takes at most inflight-1 at once
// (at least one) until the Retry-After has passed. A host that sheds
// again while capped is capped lower. Nothing is charged to it.
func (p *Pool) Overloaded(h *Host, retry time.Duration, inflight int64, now time.Time) {
	h.attempts[overloadClass].Add(1)
	h.sheds.Add(1)
	hold := min(max(retry, minShedHold), maxShedHold)
	limit := max(inflight-1, 1)
	ns := now.UnixNano()
	if h.shedUntil.Load() > ns {
		limit = min(limit, h.shedCap.Load())
	}
	h.shedCap.Store(limit)
	h.shedUntil.Store(ns + int64(hold))
}

// shedSucceeded raises the cap of a host held after shedding by one on
// each success: what sturdy counts in flight includes answers still on
// their way to the client, so the cap it learned may leave the host
// idle; it finds the host's real limit again from above, and the next
// shed sets it back.
func (s *hostState) shedSucceeded(ns int64) {
	if ns < s.shedUntil.Load() {
		s.shedCap.Add(1)
	}
}

// shedAllows reports whether a host that shed load lately may take one
// more request now: below the cap it learned, or the cap's time is over.
func (s *hostState) shedAllows(ns int64) bool {
	u := s.shedUntil.Load()
	return u == 0 || ns >= u || s.inflight.Load() < s.shedCap.Load()
}

// shedHeld reports whether the host shed load lately and its Retry-After
// has not passed: it is chosen only when no peer can take the request.
func (s *hostState) shedHeld(ns int64) bool {
	u := s.shedUntil.Load()
	return u != 0 && ns < u
}

// Sheds is how many requests the host refused with 503 and Retry-After
// since start (overload, not failure).
func (s *hostState) Sheds() uint64 { return s.sheds.Load() }

// Shedding returns the cap a host that shed load lately is held to, and
// until when; zero when it is not held.
func (s *hostState) Shedding(now time.Time) (limit int64, until time.Time) {
	u := s.shedUntil.Load()
	if u == 0 || now.UnixNano() >= u {
		return 0, time.Time{}
	}
	return s.shedCap.Load(), time.Unix(0, u)
}
