// Package pool holds the backend hosts of each pool, their runtime state, and
// the balancing policies that turn a request into a try order.
//
// Everything a request touches here is lock-free: host state is atomics, and
// policies read immutable slices built when the config is loaded. Runtime
// state (in-flight count, health mode, passive window) lives in a State that
// survives reloads for hosts present in both configs.
package pool

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sturdyproxy/sturdy/internal/outcome"
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

// State is a host's runtime state, shared across config reloads.
type State struct {
	inflight atomic.Int64
	mode     atomic.Int32
	// slowStart spreads a returning host's share over a ramp: from is when
	// it returned (unix nanos), dur how long the ramp lasts; 0 means none.
	slowStartFrom atomic.Int64
	slowStartDur  atomic.Int64

	// Attempts counts every attempt by outcome class since start.
	Attempts [outcome.NumClasses]atomic.Uint64
	// Window is the passive evidence window.
	Window Window
	// ConnectFailures counts connection failures in a row.
	ConnectFailures atomic.Int32
	// LastFailure is when the last attempt failed (unix nanos), for
	// panic routing's least-recently-failed order.
	LastFailure atomic.Int64
	// Ejections counts passive ejections, for backoff and display.
	Ejections atomic.Uint64
	// EjectUntil is when a passive ejection ends (unix nanos).
	EjectUntil atomic.Int64
	// CheckOK and CheckFail count consecutive active check results.
	CheckOK, CheckFail atomic.Int32

	// Only transitions take mu; the request path never does.
	mu       sync.Mutex
	since    time.Time
	reason   string
	evidence string
	check    CheckResult
}

// CheckResult is the outcome of the last active check.
type CheckResult struct {
	Time   time.Time
	OK     bool
	Detail string
}

// Host is one backend of a pool.
type Host struct {
	Addr   string
	Weight int
	// Index is the host's position in its pool.
	Index int
	*State
}

// Mode returns the host's current mode.
func (s *State) Mode() Mode { return Mode(s.mode.Load()) }

// Available reports whether the host may receive new requests. A host in
// slow start is available with a probability that ramps up to 1.
func (s *State) Available() bool {
	if !Mode(s.mode.Load()).InRotation() {
		return false
	}
	if d := s.slowStartDur.Load(); d != 0 {
		elapsed := time.Now().UnixNano() - s.slowStartFrom.Load()
		if elapsed >= d {
			s.slowStartDur.Store(0)
			return true
		}
		// Never below 10%, so that the host gets some traffic to prove itself.
		share := max(float64(elapsed)/float64(d), 0.1)
		return rand.Float64() < share
	}
	return true
}

// Transition moves the host from mode from to mode to, recording why. It
// reports false (and changes nothing) when the host was not in mode from, so
// that each transition happens, and is announced, exactly once.
func (s *State) Transition(from, to Mode, reason, evidence string, now time.Time) bool {
	if !s.mode.CompareAndSwap(int32(from), int32(to)) {
		return false
	}
	s.mu.Lock()
	s.since, s.reason, s.evidence = now, reason, evidence
	s.mu.Unlock()
	return true
}

// SlowStart ramps the host's share from 10% to all over d, starting now.
func (s *State) SlowStart(now time.Time, d time.Duration) {
	if d <= 0 {
		s.slowStartDur.Store(0)
		return
	}
	s.slowStartFrom.Store(now.UnixNano())
	s.slowStartDur.Store(int64(d))
}

// Describe returns when the host entered its mode, why, and the evidence.
func (s *State) Describe() (since time.Time, reason, evidence string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.since, s.reason, s.evidence
}

// SetCheck records the last active check result.
func (s *State) SetCheck(r CheckResult) {
	s.mu.Lock()
	s.check = r
	s.mu.Unlock()
}

// LastCheck returns the last active check result.
func (s *State) LastCheck() CheckResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.check
}

// InFlight is the number of requests currently sent to the host.
func (s *State) InFlight() int64 { return s.inflight.Load() }

// Acquire counts a request as in flight on the host; call Release when its
// response body is done.
func (s *State) Acquire() { s.inflight.Add(1) }

// Release undoes Acquire.
func (s *State) Release() { s.inflight.Add(-1) }

// Pool is an immutable set of hosts with a balancing policy.
type Pool struct {
	Name  string
	Hosts []*Host
	// MaxInFlight caps requests in flight per host (a connection limit, for
	// HTTP/1.1 upstreams); a host at its cap is skipped. 0 means no cap.
	MaxInFlight int64
	// Scheme is how the hosts are spoken to: "http" (or "") or "https".
	Scheme string
	policy policy
}

// policy picks one host among those not yet tried. Policies skip
// unavailable hosts.
type policy interface {
	pick(p *Pool, key uint64, tried Tried) *Host
}

// Tried is the set of hosts a request has already been sent to. The zero
// value is empty; it does not allocate for pools of up to 64 hosts. It is
// passed by value to policies (two words), so that a request's set stays
// on its stack.
type Tried struct {
	bits uint64
	more map[int]bool
}

// Add marks h as tried.
func (t *Tried) Add(h *Host) {
	if h.Index < 64 {
		t.bits |= 1 << uint(h.Index)
		return
	}
	if t.more == nil {
		t.more = map[int]bool{}
	}
	t.more[h.Index] = true
}

// Has reports whether h was tried.
func (t Tried) Has(h *Host) bool {
	if h.Index < 64 {
		return t.bits&(1<<uint(h.Index)) != 0
	}
	return t.more[h.Index]
}

// Len is the number of hosts tried.
func (t Tried) Len() int {
	n := len(t.more)
	for b := t.bits; b != 0; b &= b - 1 {
		n++
	}
	return n
}

// Next returns the next host to try for a request: the policy's choice among
// available hosts not yet tried, or nil when none is left. key feeds hash
// balancing; other policies ignore it.
func (p *Pool) Next(key uint64, tried Tried) *Host {
	if h := p.policy.pick(p, key, tried); h != nil {
		return h
	}
	// Slow start only shifts load to peers; with no peer to take it, a
	// host in slow start takes the request.
	for _, h := range p.Hosts {
		if !tried.Has(h) && h.Mode().InRotation() && (p.MaxInFlight == 0 || h.InFlight() < p.MaxInFlight) {
			return h
		}
	}
	return nil
}

// Panic returns the host to try when no host is available but some are out
// on passive evidence only (ejected or suspect): the one that failed least
// recently, not yet tried. It returns nil when every host is out for a
// reason passive routing must respect (down by active checks, drained,
// maintenance).
func (p *Pool) Panic(tried Tried) *Host {
	var best *Host
	for _, h := range p.Hosts {
		if tried.Has(h) || h.Mode() != Ejected {
			continue
		}
		if best == nil || h.LastFailure.Load() < best.LastFailure.Load() {
			best = h
		}
	}
	return best
}

// usable reports whether h may be picked for a request that already tried
// the hosts in t.
func (p *Pool) usable(h *Host, t Tried) bool {
	return !t.Has(h) && (p.MaxInFlight == 0 || h.InFlight() < p.MaxInFlight) && h.Available()
}

// AvailableCount is the number of hosts in rotation.
func (p *Pool) AvailableCount() int {
	n := 0
	for _, h := range p.Hosts {
		if h.Mode().InRotation() {
			n++
		}
	}
	return n
}
