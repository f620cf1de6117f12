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
	// Method, Path and Query are the request as sent to the backends: what
	// makes two requests the same one (see requestTracker). Path is ""
	// for a request with a body, which is part of what it is and is not
	// remembered.
	Method, Path, Query string
	fp                  uint64 // the fingerprint, once computed
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
// Without a second host, the same request failing the same way time
// after time on a host that serves others in between is the request's
// too (requestTracker). Precedence: a client already known to cause its
// own failures, then a degraded route, then the request, and only then
// the host.
func (p *Pool) Settle(r *Request, fails []Failure, sameTwice bool, now time.Time) Attribution {
	m := p.m
	ns, span := now.UnixNano(), nowSpan(p.attr.Window)
	// The same failure on two hosts is the request's only while those
	// hosts still serve other requests; when they fail everything, the
	// request merely met a failure everyone has.
	byRequest := sameTwice && onTwoHosts(fails)
	// Or, one host at a time, the same request failing that way each time
	// it came lately.
	again := !byRequest && m.requests.failedAgain(r, fails, now, p.attr.Window)
	byRequest = byRequest || again
	for _, f := range fails {
		if f.Class == outcome.BodyError {
			continue
		}
		// A host held after shedding load is sent only what its peers
		// cannot take: that nothing succeeded there since its last
		// failure says it is full, not that it fails everything (a
		// killing request's second failure on it was charged to it, and
		// it was ejected as gray: simulator seed 788).
		if !f.Host.servesOthers(ns, span) && !f.Host.shedHeld(ns) {
			byRequest = false
		}
	}
	// Nor is it the request's when the route's other requests are failing
	// the same way meanwhile and none was served since: a route whose
	// requests all time out (or all fail) is the route's, in the making
	// until it is degraded. Charged to no host either: the two hosts serve
	// others. For the route, serving others is also asked of the other
	// routes: hosts that fail most of what they get for reasons not theirs
	// (another slow route's timeouts, an attributed scanner's failures)
	// serve the other routes all along, and the slow route's timeouts were
	// charged to them until a host was ejected (simulator seeds 79, 267).
	byRoute := r.Route.othersFailing(fails[len(fails)-1].Class, r.ClientBit) &&
		(byRequest || sameTwice && onTwoHosts(fails) && otherRoutesServed(fails, r.RouteBit, now))
	r.Route.settled()
	last := None
	for _, f := range fails {
		h := f.Host
		h.attempts[f.Class].Add(1)
		h.lastFailure.Store(ns)
		if f.Class != outcome.BodyError {
			// Counted as it is recorded, not before: the request's next
			// failure, on another host, is not yet "someone else's" there
			// while this one is judged.
			h.sent.Add(1)
		}
		if f.Class == outcome.BodyError || f.Stale && !byRequest {
			// Headers came, the body broke; or a reused connection was
			// found closed: counted, not held against anyone.
			if f.Class != outcome.BodyError {
				h.explained.Add(1)
			}
			h.window.Attempt(now, r.ClientBit)
			continue
		}
		// The client first: one client failing on every host is its own
		// problem whatever its share of the route's traffic, and the
		// route never hears of failures a client explains, nor of those
		// of a client that fails everywhere while the route serves
		// others (they say nothing about the route). Nor does it hear of
		// a request known by its own history to fail wherever it goes
		// while the route's other requests do not fail that way, unless
		// the route is degraded already (and decides whether the failure
		// is its way): the visitors who each sent it, one host left to
		// serve them, are not the route's failing clients (seeds 194,
		// 442 of the simulator: the route was degraded instead).
		a, making := AttrHost, false
		// A failure of a route failing as a whole is counted as such
		// before it is judged, so that the route's own slot sees it so.
		routeLike := r.Route.othersFailing(f.Class, r.ClientBit)
		if routeLike {
			h.routeLike.Add(1)
		}
		attributed, wholly, served := m.clients.record(p, r, h, f.Class, byRequest, now)
		switch {
		case attributed:
			a = AttrClient
		case !wholly && (!again || byRoute || r.Route.Degraded()) && r.Route.record(p, r, h, f.Class, routeLike, now):
			a = AttrRoute
		case byRoute && !wholly:
			a, making = AttrRoute, true
		case byRequest:
			a = AttrRequest
		}
		if a == AttrClient || a == AttrRoute && !making || wholly {
			// A request failing on two hosts is not explained here, nor
			// is a route's failure before it is degraded: that others
			// fail too, the route's way, is what keeps innocents unjudged
			// while a route starts failing.
			if routeLike {
				h.routeLike.Add(^uint64(0)) // explained instead
			}
			h.explained.Add(1)
		}
		m.attributed[a].Add(1)
		charged := a == AttrHost && p.cfg.Passive.On()
		if charged {
			h.window.Failure(now, r.ClientBit, r.RouteBit, f.Class)
			p.hostFailed(h, r.ClientBit, r.RouteBit, r.Route, f.Class, now)
		} else {
			h.window.Attempt(now, r.ClientBit)
		}
		if a != AttrClient {
			m.clients.charged(m, r.ClientKey, h, a, charged, served, making, now)
		}
		last = a
	}
	if last == AttrHost {
		p.failedNow()
	}
	return last
}

// otherRoutesServed reports whether other routes than the one of route
// bit r succeeded lately (the last two slices of the passive window) on
// every host of fails.
func otherRoutesServed(fails []Failure, r uint64, now time.Time) bool {
	for _, f := range fails {
		if f.Class != outcome.BodyError && f.Host.window.SumRecent(now, 2).OKRoutes&^r == 0 {
			return false
		}
	}
	return true
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
	// failing sketches the clients with an entry (a failure in the
	// window): a success of one of them is noted (served), and any other
	// success pays one atomic load.
	failing atomic.Uint64
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
	served     int64 // unix nanos: the client's latest success on any route, once it has an entry
	// onRoutes holds, for the routes it failed on lately (a few), when
	// it last failed there and has not succeeded there since (0: it has).
	onRoutes [4]struct {
		rt     *RouteTracker
		failed int64
	}
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
// while other clients succeed now on those hosts. wholly reports that,
// attributed or not yet, the client fails on every host it reaches and
// succeeds on none while the route serves others (failingWholly). own
// says the failure is the request's own (Settle's byRequest): a client
// served lately is not judged on it (see charged, which then forgets it).
func (t *clientTracker) record(p *Pool, r *Request, h *Host, class outcome.Class, own bool, now time.Time) (attributed, wholly, served bool) {
	cfg := p.attr
	if r.ClientKey == "" {
		return false, false, false
	}
	s := t.shard(r.ClientKey)
	s.mu.Lock()
	e := s.m[r.ClientKey]
	if e == nil {
		if len(s.m) >= maxClientsPerShard {
			s.mu.Unlock()
			return false, false, false
		}
		e = &clientEntry{bit: r.ClientBit}
		s.m[r.ClientKey] = e
		t.failing.Or(r.ClientBit)
	}
	ns, span := now.UnixNano(), nowSpan(cfg.Window)
	e.times[e.n%clientRing] = ns
	e.n++
	e.last = ns
	for i := range e.onRoutes {
		if o := &e.onRoutes[i]; o.rt == r.Route || o.rt == nil {
			o.rt, o.failed = r.Route, ns
			break
		}
	}
	slot := slotFor(&e.hosts, &e.nhosts, h)
	if e.attributed {
		if slot != nil {
			slot.note(ns, span, true, false)
		}
		s.mu.Unlock()
		return true, true, false
	}
	recent := e.recent(ns - int64(cfg.Window))
	served = ns-e.served <= 2*span
	wholly = recent >= cfg.ClientMinFailures && !served && p.failingWholly(e, r, ns, now)
	if slot != nil {
		slot.note(ns, span, wholly, false)
	}
	if own && served {
		// A visitor who sent the killing request a few times in a row
		// (its failures, two hosts each, not yet forgotten, since it
		// had not been served in between) was attributed on the next
		// one, though served meanwhile (simulator seeds 288, 637).
		s.mu.Unlock()
		return false, wholly, served
	}
	if recent < cfg.ClientMinFailures || !judgeSlots(e.hosts[:e.nhosts], ns, span, int64(cfg.Window), p.hostsToJudgeOn(served), func(h *Host) bool {
		return h.window.SumRecent(now, 2).OKClients&^e.bit != 0
	}) || r.Route.inTheMaking(p, r, class, now, e.bit) {
		// Enough other clients failing on the same route, across its
		// hosts, make it the route's problem in the making, not this
		// client's.
		s.mu.Unlock()
		return false, wholly, served
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
	return true, true, false
}

// hostsToJudgeOn is on how many hosts others must be served where a
// client fails for its failures to be its own: two, or one when the pool
// has one host in rotation and the client was not served lately. A
// client served now and then on the one host left may be meeting a host
// that fails a share of everyone's requests; one never served, while
// others are, is not.
func (p *Pool) hostsToJudgeOn(served bool) int {
	if !served && p.AvailableCount() == 1 {
		return 1
	}
	return 2
}

// served notes a success of client r.ClientKey, if it failed lately: a
// client whose other requests succeed is not one whose requests all fail,
// and one served again on a route it failed on is not failing on that
// route (RouteTracker.record). Clients that have not failed pay one
// atomic load.
func (t *clientTracker) served(r *Request, window time.Duration, now time.Time) {
	if r.ClientKey == "" || t.failing.Load()&r.ClientBit == 0 {
		return
	}
	s := t.shard(r.ClientKey)
	s.mu.Lock()
	if e := s.m[r.ClientKey]; e != nil {
		e.served = now.UnixNano()
		for i := range e.onRoutes {
			if o := &e.onRoutes[i]; o.rt == r.Route && o.rt != nil && o.failed != 0 {
				o.failed = 0
				o.rt.clients.addBack(now, window, r.ClientBit)
			}
		}
	}
	s.mu.Unlock()
}

// failingWholly reports whether client entry e, with enough recent
// failures and not served lately (no success in the last two spans), fails
// on two hosts or more while other clients succeed on r's route: a scanner, not yet
// judged, whose failures say nothing about the hosts or the route. They
// are left out when another client is judged, so that two scanners at
// once, each failing on every host, do not each make the hosts look
// failing to the other (one would never be attributed, however long it
// scanned), and are not counted as the route's failing clients. A client
// of the route alone, failing while nobody succeeds on it, is the route's
// evidence, not this. The client's shard lock is held.
func (p *Pool) failingWholly(e *clientEntry, r *Request, ns int64, now time.Time) bool {
	if r.Route == nil {
		return false
	}
	hosts := 0
	for i := range e.hosts[:e.nhosts] {
		if ns-e.hosts[i].last <= int64(p.attr.Window) {
			hosts++
		}
	}
	if hosts < 2 {
		return false
	}
	ok, _ := r.Route.clients.sum(now, p.attr.Window, 2)
	return ok&^e.bit&^p.m.clients.bits.Load() != 0
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
// (not the client); charged says it went into h's window, served that the
// client's other requests succeed lately (servedLately). A client
// attributed since is given it at once.
//
// A degraded route's failure is no evidence against the client: an
// innocent failing on such a route, and once on a broken host, is not a
// client failing on every host. Nor is a request's own, failing the same
// way on two hosts, from a client whose other requests succeed: the
// killing request that innocents send now and then made them "clients
// failing on two hosts" after five of them. A scanner's requests also
// fail on two hosts each, and none of its requests succeed: from a client
// not served, they stay its evidence. Nor, on the same terms, is a
// failure of a route in the making (making: not yet degraded, its other
// clients failing the same way).
func (t *clientTracker) charged(m *Monitor, k string, h *Host, a Attribution, charged, served, making bool, now time.Time) {
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
	forget := a == AttrRoute && !making || (a == AttrRequest || making) && served
	if forget {
		e.forget(now.UnixNano())
	}
	if charged || forget {
		if slot := slotFor(&e.hosts, &e.nhosts, h); slot != nil {
			if charged {
				slot.charged++
			}
			if a == AttrRoute && slot.ownBad > 0 {
				// Noted as unexplained; the route explained it.
				slot.ownBad--
			}
			if forget {
				slot.forget(now.UnixNano())
			}
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

// forget takes the failure recorded at ns out of the entry's recent ones.
func (e *clientEntry) forget(ns int64) {
	for i := 0; i < min(e.n, clientRing); i++ {
		if e.times[i] == ns {
			e.times[i] = 0
			return
		}
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
	forgot := false
	defer func() {
		if forgot {
			t.rebuildBits()
		}
	}()
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
			forgot = true
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

// rebuildBits recomputes the sketches of attributed and failing clients
// after some were forgotten.
func (t *clientTracker) rebuildBits() {
	var b, f uint64
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for _, e := range s.m {
			if e.attributed {
				b |= e.bit
			}
			f |= e.bit
		}
		s.mu.Unlock()
	}
	t.bits.Store(b)
	t.failing.Store(f)
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
