package health

import (
	"fmt"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/pool"
)

// suspect marks a healthy host suspect on host-attributed evidence. With
// active checks the host stays in rotation and is probed at once; the
// probe decides. Without them it is ejected, if the pool's passive share
// allows.
func (p *Pool) suspect(h *pool.Host, reason, evidence string, now time.Time) {
	if !h.Transition(pool.Healthy, pool.Suspect, reason, evidence, now) {
		return
	}
	p.m.emit(event.Event{
		Type: event.HostSuspect, Severity: event.Warning, Pool: p.Pool.Name, Host: h.Addr,
		Message:  "host suspect: " + reason,
		Evidence: map[string]any{"evidence": evidence, "active_checks": p.HasActiveChecks()},
	})
	if p.HasActiveChecks() {
		p.m.expedite(p.Pool.Name, h)
		return
	}
	p.eject(h, reason, evidence, now)
}

// eject takes a suspect host out of rotation on passive evidence, unless
// that would take more than the pool's max_ejected share out. The eject
// time doubles with each repeat, up to max_eject_time.
func (p *Pool) eject(h *pool.Host, reason, evidence string, now time.Time) {
	ps := p.cfg.Passive
	// Counting the hosts out and taking one more out must be one step, or
	// two request goroutines could both see room for one (ejections are
	// rare: a lock is fine).
	p.shared.ejectMu.Lock()
	defer p.shared.ejectMu.Unlock()
	out := 0
	for _, o := range p.Pool.Hosts {
		if o.Mode() == pool.Ejected {
			out++
		}
	}
	allowed := int(float64(ps.MaxEjected)*float64(len(p.Pool.Hosts)) + 1e-9)
	if out+1 > allowed {
		// Keep it in rotation as suspect; the evidence is shown, and the
		// next tick looks again.
		return
	}
	n := h.Ejections.Load() + 1
	d := ps.EjectTime.D()
	for i := uint64(1); i < n && d < ps.MaxEjectTime.D(); i++ {
		d *= 2
	}
	d = min(d, ps.MaxEjectTime.D())
	h.EjectUntil.Store(now.Add(d).UnixNano())
	if !h.Transition(pool.Suspect, pool.Ejected, reason, evidence, now) {
		return
	}
	h.Ejections.Add(1)
	p.m.emit(event.Event{
		Type: event.HostEjected, Severity: event.Warning, Pool: p.Pool.Name, Host: h.Addr,
		Message: fmt.Sprintf("host ejected for %s: %s", d, reason),
		Evidence: map[string]any{
			"evidence": evidence, "eject_seconds": d.Seconds(), "ejections": n,
			"ejected_in_pool": out + 1, "pool_size": len(p.Pool.Hosts),
		},
	})
	p.trackEmpty(now)
}

// restore returns an ejected or suspect host to rotation with slow start.
func (p *Pool) restore(h *pool.Host, why string, now time.Time) {
	from := h.Mode()
	if from != pool.Ejected && from != pool.Suspect {
		return
	}
	if !h.Transition(from, pool.Healthy, why, "", now) {
		return
	}
	h.Window.Reset()
	h.ConnectFailures.Store(0)
	if from == pool.Ejected {
		h.SlowStart(now, p.cfg.Passive.SlowStart.D())
	}
	p.m.emit(event.Event{
		Type: event.HostRestored, Pool: p.Pool.Name, Host: h.Addr,
		Message:  "host back in rotation: " + why,
		Evidence: map[string]any{"was": from.String()},
	})
	p.trackEmpty(now)
}

// tick is the pool's periodic work: eject expiry, outlier detection, and
// the empty-pool and panic episodes.
func (p *Pool) tick(now time.Time) {
	for _, h := range p.Pool.Hosts {
		if h.Mode() == pool.Ejected && now.UnixNano() >= h.EjectUntil.Load() {
			p.restore(h, "eject time over", now)
		}
	}
	if p.cfg.Passive.On() {
		p.detectOutliers(now)
	}
	p.trackEmpty(now)
}

func (p *Pool) trackEmpty(now time.Time) {
	avail := p.Pool.AvailableCount()
	sh := p.shared
	if avail == 0 && sh.empty.CompareAndSwap(false, true) {
		sh.mu.Lock()
		sh.emptySince = now
		sh.mu.Unlock()
		for i := range sh.episode {
			sh.episode[i].Store(0)
		}
		p.m.emit(event.Event{
			Type: event.PoolEmpty, Severity: event.Critical, Pool: p.Pool.Name,
			Message:  "pool has no host in rotation",
			Evidence: map[string]any{"hosts": describeModes(p.Pool)},
		})
	}
	if avail > 0 && sh.empty.CompareAndSwap(true, false) {
		sh.mu.Lock()
		d := now.Sub(sh.emptySince)
		sh.emptyTotal += d
		sh.mu.Unlock()
		ev := map[string]any{"empty_seconds": d.Seconds(), "available": avail, "panic_answers": sh.panicAnswers.Load()}
		for i, n := range byNames {
			ev["answered_by_"+n] = sh.episode[i].Load()
		}
		p.m.emit(event.Event{
			Type: event.PoolRestored, Pool: p.Pool.Name,
			Message:  fmt.Sprintf("pool has hosts in rotation again after %s", d.Round(time.Millisecond)),
			Evidence: ev,
		})
	}
	if avail > 0 && sh.panic.CompareAndSwap(true, false) {
		p.m.emit(event.Event{
			Type: event.PanicLeft, Pool: p.Pool.Name,
			Message:  "panic routing over: hosts are back in rotation",
			Evidence: map[string]any{"available": avail, "panic_answers": sh.panicAnswers.Load()},
		})
	}
}

func describeModes(p *pool.Pool) map[string]string {
	m := make(map[string]string, len(p.Hosts))
	for _, h := range p.Hosts {
		m[h.Addr] = h.Mode().String()
	}
	return m
}
