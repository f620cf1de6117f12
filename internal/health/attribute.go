package health

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/health/balance"
	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// Failure is one failed attempt of a request, after something was sent.
type Failure struct {
	Host   *Host
	Class  outcome.Class
	Status int // for outcome.Status5xx
	// Stale marks a failure on a reused connection before any of the
	// answer arrived: the keep-alive race as much as the host's fault. It
	// counts for "failed the same way on two hosts" but is never held
	// against the host alone.
	Stale bool
}

// Request is what attribution needs to know about a request.
type Request struct {
	// Route is the route's tracker and RouteBit its sketch bit in the
	// serving config (see window).
	Route    *RouteTracker
	RouteBit uint64
	// ClientKey identifies the client (see attribution.client_key) and
	// ClientBit is its sketch bit.
	ClientKey string
	ClientBit uint64
	// RequestID, when the route gives requests ids, goes into the events
	// this request's failures cause.
	RequestID string
}

// FailedElsewhere reports whether f, a failed attempt, failed the same
// way (class and status) as one of prev on a different host: the only
// evidence that the request, not the host, is the cause. The same host
// twice (a keep-alive resend, a config reload's copy of it) is one
// opinion, not two.
func FailedElsewhere(prev []Failure, f Failure) bool {
	for _, o := range prev {
		if o.Class == f.Class && o.Status == f.Status && o.Host.hostState != f.Host.hostState {
			return true
		}
	}
	return false
}

// Settle attributes the failed attempts of one request on this pool,
// records them, and returns the attribution of the last one. sameTwice
// reports that the request failed the same way on two hosts; it is
// believed only when fails shows two different hosts failing that way.
// Precedence: a client already known to cause its own failures, then a
// degraded route, then the request, and only then the host.
func (p *Pool) Settle(r *Request, fails []Failure, sameTwice bool, now time.Time) Attribution {
	m := p.m
	ns, span := now.UnixNano(), nowSpan(p.attr.Window)
	// The same failure on two hosts is the request's only while those
	// hosts still serve other requests; when they fail everything, the
	// request merely met a failure everyone has.
	byRequest := sameTwice && onTwoHosts(fails)
	for _, f := range fails {
		if f.Class == outcome.BodyError {
			continue
		}
		f.Host.sent.Add(1)
		if !f.Host.servesOthers(ns, span) {
			byRequest = false
		}
	}
	last := None
	for _, f := range fails {
		h := f.Host
		h.attempts[f.Class].Add(1)
		h.lastFailure.Store(ns)
		if f.Class == outcome.BodyError || f.Stale && !byRequest {
			// Headers came, the body broke; or a reused connection was
			// found closed: counted, not held against anyone.
			h.window.Attempt(now, r.ClientBit)
			continue
		}
		// The client first: one client failing on every host is its own
		// problem whatever its share of the route's traffic, and the
		// route never hears of failures a client explains.
		a := AttrHost
		switch {
		case m.clients.record(p, r, h, f.Class, now):
			a = AttrClient
		case r.Route.record(p, r, h, f.Class, now):
			a = AttrRoute
		case byRequest:
			a = AttrRequest
		}
		m.attributed[a].Add(1)
		charged := a == AttrHost && p.cfg.Passive.On()
		if charged {
			h.window.Failure(now, r.ClientBit, r.RouteBit, f.Class)
			p.hostFailed(h, r.ClientBit, r.RouteBit, f.Class, now)
		} else {
			h.window.Attempt(now, r.ClientBit)
		}
		if a != AttrClient {
			m.clients.charged(m, r.ClientKey, h, a, charged, now)
		}
		last = a
	}
	if last == AttrHost {
		p.failedNow()
	}
	return last
}

// onTwoHosts reports whether two of fails, on different hosts, failed
// the same way.
func onTwoHosts(fails []Failure) bool {
	for i := 1; i < len(fails); i++ {
		if fails[i].Class != outcome.BodyError && FailedElsewhere(fails[:i], fails[i]) {
			return true
		}
	}
	return false
}

// Attributed reports whether client key k is currently held responsible
// for its own failures. It costs one atomic load while no client is.
func (m *Monitor) Attributed(k string) bool {
	return m.clients.attributedNow.Load() > 0 && m.clients.isAttributed(k)
}

// clientTracker remembers recent failures per client key. Only failures
// touch it, so its cost grows with trouble, not with traffic; its size is
// bounded so that a scan from many addresses cannot grow it without end.
type clientTracker struct {
	shards        [32]clientShard
	attributedNow atomic.Int64
	// bits sketches the clients attributed now, so that a route's count
	// of failing clients leaves them out.
	bits atomic.Uint64
}

type clientShard struct {
	mu sync.Mutex
	m  map[string]*clientEntry
}

const (
	maxClientsPerShard = 4096
	clientRing         = 16
	maxHostsPerEntry   = 8
)

type clientEntry struct {
	bit        uint64
	times      [clientRing]int64 // recent failure times, a ring
	n          int               // failures recorded (ring holds the last clientRing)
	hosts      [maxHostsPerEntry]hostSlot
	nhosts     int
	attributed bool
	since      time.Time
	evidence   string
	last       int64
	// pending counts the client's failures attributed elsewhere (to a
	// host, the request or the route) before it was attributed itself;
	// those charged to a host's window are counted in its slot, and the
	// failed answers they made per route in answers. On attribution they
	// become the client's (see settleEarlier).
	pending [numAttributions]uint64
	answers [4]routeCount
}

type routeCount struct {
	rt *RouteTracker
	n  uint64
}

func newClientTracker() *clientTracker {
	t := &clientTracker{}
	for i := range t.shards {
		t.shards[i].m = map[string]*clientEntry{}
	}
	return t
}

func (t *clientTracker) shard(k string) *clientShard {
	return &t.shards[balance.HashString(k)%uint64(len(t.shards))]
}

func (t *clientTracker) isAttributed(k string) bool {
	s := t.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[k]
	return e != nil && e.attributed
}

// record adds a failure of client r.ClientKey on h and reports whether the
// client is (now) attributed: enough recent failures, on two or more hosts,
// while other clients succeed now on those hosts.
func (t *clientTracker) record(p *Pool, r *Request, h *Host, class outcome.Class, now time.Time) bool {
	cfg := p.attr
	if r.ClientKey == "" {
		return false
	}
	s := t.shard(r.ClientKey)
	s.mu.Lock()
	e := s.m[r.ClientKey]
	if e == nil {
		if len(s.m) >= maxClientsPerShard {
			s.mu.Unlock()
			return false
		}
		e = &clientEntry{bit: r.ClientBit}
		s.m[r.ClientKey] = e
	}
	ns, span := now.UnixNano(), nowSpan(cfg.Window)
	e.times[e.n%clientRing] = ns
	e.n++
	e.last = ns
	if slot := slotFor(&e.hosts, &e.nhosts, h); slot != nil {
		slot.note(ns, span)
	}
	if e.attributed {
		s.mu.Unlock()
		return true
	}
	recent := e.recent(ns - int64(cfg.Window))
	if recent < cfg.ClientMinFailures || !judgeSlots(e.hosts[:e.nhosts], ns, span, int64(cfg.Window), func(h *Host) bool {
		return h.window.SumRecent(now, 2).OKClients&^e.bit != 0
	}) || r.Route.othersFailing(now, cfg.Window, windowBuckets, e.bit) >= routeMinClients-1 {
		// Enough other clients failing on the same route make it the
		// route's problem in the making, not this client's.
		s.mu.Unlock()
		return false
	}
	hosts := e.nhosts
	e.attributed, e.since = true, now
	e.evidence = fmt.Sprintf("%d failures (last: %s) on %d hosts in %s while other clients succeeded on them at the same time", recent, class, hosts, cfg.Window)
	ev := e.evidence
	earlier := e.takeEarlier()
	s.mu.Unlock()
	t.attributedNow.Add(1)
	t.bits.Or(e.bit)
	p.m.settleEarlier(earlier, now)
	evidence := map[string]any{"evidence": ev, "shed": cfg.ShedClients}
	if r.RequestID != "" {
		evidence["request_id"] = r.RequestID // the request that tipped it, for the access log
	}
	p.m.emit(event.Event{
		Type: event.ClientAttributed, Severity: event.Warning, Client: r.ClientKey, Pool: p.Name,
		Message:  "client attributed: its failures are its own and count against no host",
		Evidence: evidence,
	})
	return true
}

// earlier is what a client was charged with before it was attributed.
type earlier struct {
	pending [numAttributions]uint64
	answers [4]routeCount
	hosts   [maxHostsPerEntry]struct {
		h *Host
		n uint64
	}
}

// takeEarlier hands over the entry's earlier charges and clears them;
// the shard's lock is held.
func (e *clientEntry) takeEarlier() earlier {
	var out earlier
	out.pending, e.pending = e.pending, [numAttributions]uint64{}
	out.answers, e.answers = e.answers, [4]routeCount{}
	for i := range e.hosts[:e.nhosts] {
		sl := &e.hosts[i]
		out.hosts[i].h, out.hosts[i].n = sl.h, sl.charged
		sl.charged = 0
	}
	return out
}

// settleEarlier makes a newly attributed client's earlier failures its
// own: until the evidence was in they were counted against a host, the
// request or the route, and they were the client's all along. The
// counters move, and the hosts' windows drop what they were charged (so
// that a host's failure rate is not the scanner's).
func (m *Monitor) settleEarlier(e earlier, now time.Time) {
	for a, n := range e.pending {
		if n > 0 {
			m.attributed[a].Add(^(n - 1))
			m.attributed[AttrClient].Add(n)
		}
	}
	for _, hs := range e.hosts {
		if hs.h != nil && hs.n > 0 {
			hs.h.window.Uncharge(now, hs.n)
		}
	}
	for _, rc := range e.answers {
		if rc.rt != nil {
			rc.rt.clientFaults.Add(rc.n)
		}
	}
}

// FailedAnswer notes a failed answer (a 5xx) to client k on route rt
// whose failures were not attributed to the client. If the client is
// attributed later, the route counts it as the client's own
// (RouteTracker.TakeClientFaults); if it already is, FailedAnswer
// reports true and the caller counts it so now.
func (m *Monitor) FailedAnswer(k string, rt *RouteTracker) bool {
	if k == "" || rt == nil {
		return false
	}
	s := m.clients.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[k]
	if e == nil {
		return false
	}
	if e.attributed {
		return true
	}
	for i := range e.answers {
		if rc := &e.answers[i]; rc.rt == nil || rc.rt == rt {
			rc.rt = rt
			rc.n++
			break
		}
	}
	return false
}

// charged notes a failure of client k on h that was attributed to a
// (not the client); charged says it went into h's window. A client
// attributed since is given it at once.
func (t *clientTracker) charged(m *Monitor, k string, h *Host, a Attribution, charged bool, now time.Time) {
	if k == "" {
		return
	}
	s := t.shard(k)
	s.mu.Lock()
	e := s.m[k]
	if e == nil {
		s.mu.Unlock()
		return
	}
	e.pending[a]++
	if charged {
		if slot := slotFor(&e.hosts, &e.nhosts, h); slot != nil {
			slot.charged++
		}
	}
	var give earlier
	if e.attributed {
		give = e.takeEarlier()
	}
	s.mu.Unlock()
	if e.attributed {
		m.settleEarlier(give, now)
	}
}

func (e *clientEntry) recent(after int64) int {
	n := 0
	for i := 0; i < min(e.n, clientRing); i++ {
		if e.times[i] > after {
			n++
		}
	}
	return n
}

// sweep forgets clients without a failure in the window and releases the
// attributed ones among them.
func (t *clientTracker) sweep(m *Monitor, now time.Time, window time.Duration) {
	cutoff := now.UnixNano() - int64(window)
	for i := range t.shards {
		s := &t.shards[i]
		var released []string
		var since []time.Time
		s.mu.Lock()
		for k, e := range s.m {
			if e.last > cutoff {
				continue
			}
			if e.attributed {
				released = append(released, k)
				since = append(since, e.since)
			}
			delete(s.m, k)
		}
		s.mu.Unlock()
		if len(released) > 0 {
			t.rebuildBits()
		}
		for j, k := range released {
			t.attributedNow.Add(-1)
			m.emit(event.Event{
				Type: event.ClientReleased, Client: k,
				Message:  "client released: no failures for a whole window",
				Evidence: map[string]any{"attributed_seconds": now.Sub(since[j]).Seconds()},
			})
		}
	}
}

// rebuildBits recomputes the sketch of attributed clients after some
// were released.
func (t *clientTracker) rebuildBits() {
	var b uint64
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for _, e := range s.m {
			if e.attributed {
				b |= e.bit
			}
		}
		s.mu.Unlock()
	}
	t.bits.Store(b)
}

// AttributedClient is a client whose failures are its own.
type AttributedClient struct {
	Key      string
	Since    time.Time
	Evidence string
}

// Clients lists the clients attributed now.
func (m *Monitor) Clients() []AttributedClient {
	if m.clients.attributedNow.Load() == 0 {
		return nil
	}
	var out []AttributedClient
	for i := range m.clients.shards {
		s := &m.clients.shards[i]
		s.mu.Lock()
		for k, e := range s.m {
			if e.attributed {
				out = append(out, AttributedClient{Key: k, Since: e.since, Evidence: e.evidence})
			}
		}
		s.mu.Unlock()
	}
	return out
}
