package health

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sturdyproxy/sturdy/internal/outcome"
)

const (
	okClass       = outcome.OK
	overloadClass = outcome.Status5xx
)

// Mode is a host's place in rotation.
type Mode int32

// Modes. Healthy and Suspect hosts take traffic; the others do not.
const (
	Healthy     Mode = iota
	Suspect          // passive evidence against it; a probe is on its way
	Ejected          // out on passive evidence; returns after a backoff
	Down             // failed active checks
	Drained          // operator: in-flight requests finish, no new ones
	Maintenance      // operator: out, checks paused
)

var modeNames = [...]string{"healthy", "suspect", "ejected", "down", "drained", "maintenance"}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return "unknown"
}

// InRotation reports whether a host in this mode takes new requests.
func (m Mode) InRotation() bool { return m == Healthy || m == Suspect }

// Host is one backend of one compiled pool. Its state lives in hostState,
// which a reload carries over to the next config's Host of the same pool and
// address. Only this package changes that state; the proxy reads it and
// counts its own requests in flight.
type Host struct {
	// Addr is host:port or unix:/path, as configured.
	Addr string
	// Target is the URL host requests are sent to: Addr, or for a unix
	// socket the name the dialer maps back to it.
	Target string
	// Name is the DNS name and port the address came from, "" when the
	// host was configured by address: each address of a name is a host of
	// its own.
	Name string
	// Weight is the host's share relative to its peers (at least 1).
	Weight int
	// Backup hosts take requests only while no other host is healthy.
	Backup bool
	index  int // position in its pool, for balance.Tried
	*hostState
}

// hostState is a host's runtime state, shared across config reloads. The
// request path touches only atomics; transitions take mu.
type hostState struct {
	pool *poolShared // the pool it belongs to: transitions bump its version

	inflight atomic.Int64
	mode     atomic.Int32
	// slowStart spreads a returning host's share over a ramp: from is when
	// it returned (unix nanos), dur how long the ramp lasts; 0 means none.
	slowStartFrom atomic.Int64
	slowStartDur  atomic.Int64

	attempts [outcome.NumClasses]atomic.Uint64
	sent     atomic.Uint64 // failed attempts that reached the host, whoever was blamed
	// explained counts those of them that say nothing about whether the
	// host serves others: an attributed client's, a degraded route's, a
	// client's that fails on every host and succeeds on none (see
	// failingWholly), and the keep-alive race's. Attribution asks whether the host fails for anyone
	// else with the rest (hostState.unexplained).
	explained atomic.Uint64
	// routeLike counts the unexplained failed attempts that failed while
	// their route's other clients' attempts failed the same way, none of
	// its requests served since (RouteTracker.othersFailing): a route
	// failing as a whole. They may be the host's, but they say nothing
	// about whether it serves the other routes (hostSlot.route).
	routeLike atomic.Uint64
	window    window
	// runAt and runOK: when the current run of failures on the host began
	// (unix nanos) and its success count then (see servesOthers).
	runAt         atomic.Int64
	runOK, runBad atomic.Uint64
	lastFailOK    atomic.Uint64 // successes at the last sent failure
	// streak counts host-attributed failures in a row, and streakClients
	// sketches whose they were; a success ends the streak.
	streak        atomic.Int32
	streakClients atomic.Uint64
	streakRoutes  atomic.Uint64
	suspectOK     atomic.Uint64 // successes when it became suspect
	// tickOK and quietSince: the success count at the last tick that saw
	// it change, and when (unix nanos); trialAt: when a failing pool may
	// next send this host a trial request.
	tickOK          atomic.Uint64
	quietSince      atomic.Int64
	trialAt         atomic.Int64
	connectFailures atomic.Int32 // in a row
	lastFailure     atomic.Int64 // unix nanos, for panic routing's order
	ejections       atomic.Uint64
	ejectUntil      atomic.Int64 // unix nanos
	checkOK         atomic.Int32 // consecutive passing probes
	checkFail       atomic.Int32 // consecutive failing probes
	// probeAsked: its traffic asked for a probe now (Pool.askProbe); the
	// next result answers it.
	probeAsked atomic.Bool
	traffic    traffic // header times, bytes, the last minute (traffic.go)
	// sheds counts 503s with Retry-After; shedCap and shedUntil hold a
	// host that shed load to what it had in flight then (overload.go).
	sheds     atomic.Uint64
	shedCap   atomic.Int64
	shedUntil atomic.Int64 // unix nanos

	mu       sync.Mutex // guards since, reason, evidence, check, disagreed, grayHeld
	since    time.Time
	reason   string
	evidence string
	check    CheckResult
	// disagreed holds when a passing probe last cleared the host of what
	// its traffic said (unix nanos, a ring), for gray failure detection.
	disagreed [8]int64
	ndisagree int
	grayHeld  bool // suspect, kept in rotation by max_ejected after disagreements
}

// CheckResult is the outcome of the last active check.
type CheckResult struct {
	Time   time.Time
	OK     bool
	Detail string
}

// Index is the host's position in its pool.
func (h *Host) Index() int { return h.index }

// Mode returns the host's current mode.
func (s *hostState) Mode() Mode { return Mode(s.mode.Load()) }

// InFlight is the number of requests currently sent to the host.
func (s *hostState) InFlight() int64 { return s.inflight.Load() }

// Acquire counts a request as in flight on the host; call Release when its
// response body is done.
func (s *hostState) Acquire() { s.inflight.Add(1) }

// Release undoes Acquire.
func (s *hostState) Release() { s.inflight.Add(-1) }

// Attempts is the number of attempts on the host that ended in class c,
// since start.
func (s *hostState) Attempts(c outcome.Class) uint64 { return s.attempts[c].Load() }

// Ejections is how many times passive evidence took the host out.
func (s *hostState) Ejections() uint64 { return s.ejections.Load() }

// Window sums the host's passive window at now.
func (s *hostState) Window(now time.Time) Totals { return s.window.Sum(now) }

// Describe returns when the host entered its mode, why, and the evidence.
func (s *hostState) Describe() (since time.Time, reason, evidence string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.since, s.reason, s.evidence
}

// LastCheck returns the last active check result.
func (s *hostState) LastCheck() CheckResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.check
}

// slowStartAllows reports whether slow start lets the host take this
// request: always when it is not ramping, otherwise with a probability that
// grows from 10% to 1 over the ramp.
func (s *hostState) slowStartAllows(now int64) bool {
	d := s.slowStartDur.Load()
	if d == 0 {
		return true
	}
	elapsed := now - s.slowStartFrom.Load()
	if elapsed >= d {
		s.slowStartDur.Store(0)
		return true
	}
	// Never below 10%, so that the host gets some traffic to prove itself.
	share := max(float64(elapsed)/float64(d), 0.1)
	return rand.Float64() < share
}

// transition moves the host from mode from to mode to, recording why. It
// reports false (and changes nothing) when the host was not in mode from, so
// that each transition happens, and is announced, exactly once.
func (s *hostState) transition(from, to Mode, reason, evidence string, now time.Time) bool {
	if !s.mode.CompareAndSwap(int32(from), int32(to)) {
		return false
	}
	s.mu.Lock()
	s.since, s.reason, s.evidence = now, reason, evidence
	s.mu.Unlock()
	// Every transition may move the host between tiers of the rotation.
	s.pool.rotationChanged()
	return true
}

// slowStart ramps the host's share from 10% to all over d, starting now.
func (s *hostState) slowStart(now time.Time, d time.Duration) {
	if d <= 0 {
		s.slowStartDur.Store(0)
		return
	}
	s.slowStartFrom.Store(now.UnixNano())
	s.slowStartDur.Store(int64(d))
}

func (s *hostState) setCheck(r CheckResult) {
	s.mu.Lock()
	s.check = r
	s.mu.Unlock()
}
