package health

import (
	"fmt"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/health/balance"
)

// A pool whose every host fails everything is known to be failing, active
// checks or not. Passive evidence never ejects more than max_ejected, so
// without this a blackholed pool (hosts that accept and never answer) gave
// every request the full response timeout and a 504, for as long as it
// lasted. Known to be failing, the pool answers from the empty-pool chain
// at once (fallback pool, stale copy, sorry page with Retry-After), lets
// one trial request per host through every trial_interval, and is back on
// its first success: a circuit breaker.

// failingSlices is how long no host may have succeeded: a fifth of the
// passive window (6s of the default 30s), in slices of it.
const failingSlices = 2

// trackFailing is the tick's look at whether the pool is failing: every
// host in rotation has failed (lately, or within the window when it has
// had no traffic lately) and none has succeeded for failingSlices of the
// window, with at least min_requests failures from min_clients clients
// among them.
func (p *Pool) trackFailing(now time.Time) {
	ps := p.cfg.Passive
	if !ps.On() || p.shared.failing.Load() {
		return
	}
	p.shared.failMu.Lock()
	defer p.shared.failMu.Unlock()
	p.lookFailing(now)
}

// failedNow is trackFailing on the request path, after a failure that
// was sent: the failure that completes the evidence finds the pool
// failing at once, not at the next tick, so that the requests still
// waiting on it are cut now rather than left to reach their timeout in
// between. A look already under way (a tick's, another request's) is
// enough. It looks at the clock, not at the request's start, which
// Settle is given: a request that waited its timeout started long ago.
func (p *Pool) failedNow() {
	if !p.cfg.Passive.On() || p.shared.failing.Load() || !p.shared.failMu.TryLock() {
		return
	}
	defer p.shared.failMu.Unlock()
	p.lookFailing(time.Now())
}

func (p *Pool) lookFailing(now time.Time) {
	ps := p.cfg.Passive
	if p.shared.failing.Load() {
		return
	}
	ns := now.UnixNano()
	quiet := int64(failingSlices) * int64(ps.Window) / windowBuckets
	for _, h := range p.Hosts {
		// When a host last succeeded is read from its running success
		// count, at ticks: the request path pays nothing for it.
		ok := h.attempts[okClass].Load()
		if ok != h.tickOK.Load() || h.quietSince.Load() == 0 {
			h.tickOK.Store(ok)
			h.quietSince.Store(ns)
		}
	}
	var bad, clients uint64
	hosts := 0
	for _, h := range p.Hosts {
		if !h.Mode().InRotation() {
			continue
		}
		hosts++
		// Every failure since the host's last success is evidence, not
		// only those of the last failingSlices: few requests, each
		// waiting its timeout (a loaded machine, few clients), put fewer
		// than min_requests in any fifth of the window.
		t := h.window.SumRecent(now, slicesSince(ns, h.quietSince.Load(), ps.Window))
		if t.Bad == 0 {
			// No failure lately may mean no traffic lately: a suspect host
			// gets requests only when no healthy one is left, so while one
			// host still takes them the others' failures age. A host that
			// failed within the window and has not succeeded since (below)
			// has not come back.
			t = h.window.Sum(now)
		}
		if ns-h.quietSince.Load() < quiet || t.Bad == 0 {
			return
		}
		bad += t.Bad
		clients |= t.BadClients
	}
	if hosts == 0 || bad < uint64(ps.MinRequests) || Count(clients) < ps.MinClients {
		return
	}
	if !p.shared.failing.CompareAndSwap(false, true) {
		return
	}
	for i := range p.shared.episode {
		p.shared.episode[i].Store(0)
	}
	p.shared.failingSince.Store(ns)
	d := time.Duration(quiet)
	p.m.emit(event.Event{
		Type: event.PoolFailing, Severity: event.Critical, Pool: p.Name,
		Message: fmt.Sprintf("every host of the pool fails everything: no success for %s; answering from the empty-pool chain, one trial request per host every %s", d, ps.TrialInterval),
		Evidence: map[string]any{
			"failures": bad, "clients": Count(clients), "hosts": describeModes(p),
			"quiet_seconds": d.Seconds(), "trial_seconds": ps.TrialInterval.Seconds(),
		},
	})
	// Requests already waiting on these hosts are not left to time out.
	for _, h := range p.Hosts {
		p.cut(h)
	}
}

// slicesSince is how many of the window's slices, back from now's, lie
// wholly after since (and at least failingSlices, at most the window).
func slicesSince(ns, since int64, window time.Duration) int {
	width := int64(window) / windowBuckets
	k := failingSlices
	if width > 0 && since > 0 {
		k = max(k, min(windowBuckets, int((ns-since)/width)))
	}
	return k
}

// Failing reports whether the pool is known to be failing: the request
// path answers from the empty-pool chain, bar the trials Next hands out.
func (p *Pool) Failing() bool { return p.shared.failing.Load() }

// FailingSince is when the pool's failing episode began, when it is
// failing now.
func (p *Pool) FailingSince() (time.Time, bool) {
	if !p.shared.failing.Load() {
		return time.Time{}, false
	}
	return time.Unix(0, p.shared.failingSince.Load()), true
}

// trial returns a host of a failing pool whose trial is due, claiming it,
// or nil: one trial per host per trial_interval.
func (p *Pool) trial(tried *balance.Tried, ns int64) *Host {
	every := int64(p.cfg.Passive.TrialInterval)
	for _, h := range p.Hosts {
		if tried.Has(h.index) || !h.Mode().InRotation() {
			continue
		}
		at := h.trialAt.Load()
		if ns >= at && h.trialAt.CompareAndSwap(at, ns+every) {
			return h
		}
	}
	return nil
}

// recovered ends a failing episode after a success.
func (p *Pool) recovered(h *Host, now time.Time) {
	sh := p.shared
	if !sh.failing.CompareAndSwap(true, false) {
		return
	}
	d := time.Duration(now.UnixNano() - sh.failingSince.Load())
	ev := map[string]any{"failing_seconds": d.Seconds(), "by": h.Addr}
	for i, n := range byNames {
		ev["answered_by_"+n] = sh.episode[i].Load()
	}
	p.m.emit(event.Event{
		Type: event.PoolRecovered, Pool: p.Name, Host: h.Addr,
		Message:  fmt.Sprintf("a request to the failing pool succeeded after %s: back to normal", d.Round(time.Millisecond)),
		Evidence: ev,
	})
}

// cut ends the requests waiting on h for a response (see PoolConfig.Cut).
func (p *Pool) cut(h *Host) {
	if p.cfg.Cut != nil {
		p.cfg.Cut(h.Addr)
	}
}
