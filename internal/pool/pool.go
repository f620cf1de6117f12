// Package pool holds the backend hosts of each pool, their runtime state, and
// the balancing policies that turn a request into a try order.
//
// Everything a request touches here is lock-free: host state is atomics, and
// policies read immutable slices built when the config is loaded. Runtime
// state (in-flight count, health) lives in a State that survives reloads for
// hosts present in both configs.
package pool

import (
	"sync/atomic"
)

// State is a host's runtime state, shared across config reloads.
type State struct {
	inflight atomic.Int64
	// down is set by whatever owns health decisions (the health model, an
	// operator's drain). A down host is skipped unless every host is down.
	down atomic.Bool
}

// Host is one backend of a pool.
type Host struct {
	Addr   string
	Weight int
	// Index is the host's position in its pool.
	Index int
	*State
}

// Available reports whether the host may receive new requests.
func (h *Host) Available() bool { return !h.down.Load() }

// SetAvailable changes availability and reports whether it changed, so that
// a transition is announced exactly once.
func (h *Host) SetAvailable(ok bool) bool { return h.down.CompareAndSwap(ok, !ok) }

// InFlight is the number of requests currently sent to the host.
func (h *Host) InFlight() int64 { return h.inflight.Load() }

// Acquire counts a request as in flight on the host; call Release when its
// response body is done.
func (h *Host) Acquire() { h.inflight.Add(1) }

// Release undoes Acquire.
func (h *Host) Release() { h.inflight.Add(-1) }

// Pool is an immutable set of hosts with a balancing policy.
type Pool struct {
	Name   string
	Hosts  []*Host
	policy policy
}

// policy picks one host among those not yet tried; ok reports whether any
// host qualified. Policies skip unavailable hosts.
type policy interface {
	pick(p *Pool, key uint64, tried *Tried) *Host
}

// Tried is the set of hosts a request has already been sent to. The zero
// value is empty; it does not allocate for pools of up to 64 hosts.
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
func (t *Tried) Has(h *Host) bool {
	if h.Index < 64 {
		return t.bits&(1<<uint(h.Index)) != 0
	}
	return t.more[h.Index]
}

// Len is the number of hosts tried.
func (t *Tried) Len() int {
	n := len(t.more)
	for b := t.bits; b != 0; b &= b - 1 {
		n++
	}
	return n
}

// Next returns the next host to try for a request: the policy's choice among
// available hosts not yet tried, or nil when none is left. key feeds hash
// balancing (see Key); other policies ignore it.
func (p *Pool) Next(key uint64, tried *Tried) *Host {
	return p.policy.pick(p, key, tried)
}

// usable reports whether h may be picked for a request that already tried
// the hosts in t.
func usable(h *Host, t *Tried) bool { return h.Available() && !t.Has(h) }

// AvailableCount is the number of hosts currently available.
func (p *Pool) AvailableCount() int {
	n := 0
	for _, h := range p.Hosts {
		if h.Available() {
			n++
		}
	}
	return n
}
