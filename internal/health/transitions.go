package health

import (
	"fmt"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
)

// suspect marks a healthy host suspect on host-attributed evidence. With
// active checks the host stays in rotation and is probed at once; the
// probe decides. Without them it is ejected, if the pool's passive share
// allows.
func (p *Pool) suspect(h *Host, reason, evidence string, now time.Time) {
	if !h.transition(Healthy, Suspect, reason, evidence, now) {
		return
	}
	h.suspectOK.Store(h.attempts[okClass].Load())
	p.m.emit(event.Event{
		Type: event.HostSuspect, Severity: event.Warning, Pool: p.Name, Host: h.Addr,
		Message:  "host suspect: " + reason,
		Evidence: map[string]any{"evidence": evidence, "active_checks": p.HasActiveChecks()},
	})
	if p.HasActiveChecks() {
		p.m.expedite(p.Name, h.Addr)
		return
	}
	p.eject(h, reason, evidence, now)
}

// eject takes a suspect host out of rotation on passive evidence, unless
// that would take more than the pool's max_ejected share out. The eject
// time doubles with each repeat, up to max_eject_time.
func (p *Pool) eject(h *Host, reason, evidence string, now time.Time) {
	ps := p.cfg.Passive
	// Counting the hosts out and taking one more out must be one step, or
	// two request goroutines could both see room for one (ejections are
	// rare: a lock is fine).
	p.shared.ejectMu.Lock()
	defer p.shared.ejectMu.Unlock()
	out := 0
	for _, o := range p.Hosts {
		if o.Mode() == Ejected {
			out++
		}
	}
	n := h.ejections.Load() + 1
	d := ps.EjectTime
	for i := uint64(1); i < n && d < ps.MaxEjectTime; i++ {
		d *= 2
	}
	d = min(d, ps.MaxEjectTime)
	h.ejectUntil.Store(now.Add(d).UnixNano())
	allowed := int(float64(ps.MaxEjected)*float64(len(p.Hosts)) + 1e-9)
	if out+1 > allowed {
		// Keep it in rotation as suspect, tried only when the healthy
		// hosts cannot take a request, for as long as the ejection would
		// have lasted; the evidence is shown, and each tick looks again.
		return
	}
	if !h.transition(Suspect, Ejected, reason, evidence, now) {
		return
	}
	h.ejections.Add(1)
	p.m.emit(event.Event{
		Type: event.HostEjected, Severity: event.Warning, Pool: p.Name, Host: h.Addr,
		Message: fmt.Sprintf("host ejected for %s: %s", d, reason),
		Evidence: map[string]any{
			"evidence": evidence, "eject_seconds": d.Seconds(), "ejections": n,
			"ejected_in_pool": out + 1, "pool_size": len(p.Hosts),
		},
	})
	p.trackEmpty(now)
}

// restore returns an ejected or suspect host to rotation with slow start.
func (p *Pool) restore(h *Host, why string, now time.Time) {
	from := h.Mode()
	if from != Ejected && from != Suspect {
		return
	}
	if !h.transition(from, Healthy, why, "", now) {
		return
	}
	h.window.Reset()
	h.connectFailures.Store(0)
	h.mu.Lock()
	h.grayHeld = false
	h.mu.Unlock()
	if from == Ejected {
		h.slowStart(now, p.cfg.Passive.SlowStart)
	}
	p.m.emit(event.Event{
		Type: event.HostRestored, Pool: p.Name, Host: h.Addr,
		Message:  "host back in rotation: " + why,
		Evidence: map[string]any{"was": from.String()},
	})
	p.trackEmpty(now)
}

// tick is the pool's periodic work: eject expiry, outlier detection, and
// the empty-pool and panic episodes.
func (p *Pool) tick(now time.Time) {
	for _, h := range p.Hosts {
		if h.Mode() == Ejected && now.UnixNano() >= h.ejectUntil.Load() {
			p.restore(h, "eject time over", now)
		}
	}
	if p.cfg.Passive.On() {
		p.detectOutliers(now)
		p.trackFailing(now)
	}
	p.trackEmpty(now)
}

func (p *Pool) trackEmpty(now time.Time) {
	if p.cfg.Unresolved {
		return
	}
	sh := p.shared
	// Probes, requests and the monitor's tick call this concurrently; the
	// count and the episode's start and end must be one step, or a count
	// taken before a transition could end the episode it started.
	sh.trackMu.Lock()
	defer sh.trackMu.Unlock()
	if t := sh.lastTrack; now.Before(t) {
		now = t // a caller holding an older time: episodes never run backwards
	}
	sh.lastTrack = now
	avail := p.AvailableCount()
	if avail == 0 && sh.empty.CompareAndSwap(false, true) {
		sh.mu.Lock()
		sh.emptySince = now
		sh.mu.Unlock()
		for i := range sh.episode {
			sh.episode[i].Store(0)
		}
		p.m.emit(event.Event{
			Type: event.PoolEmpty, Severity: event.Critical, Pool: p.Name,
			Message:  "pool has no host in rotation",
			Evidence: map[string]any{"hosts": describeModes(p)},
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
			Type: event.PoolRestored, Pool: p.Name,
			Message:  fmt.Sprintf("pool has hosts in rotation again after %s", d.Round(time.Millisecond)),
			Evidence: ev,
		})
	}
	if avail > 0 && sh.panic.CompareAndSwap(true, false) {
		p.m.emit(event.Event{
			Type: event.PanicLeft, Pool: p.Name,
			Message:  "panic routing over: hosts are back in rotation",
			Evidence: map[string]any{"available": avail, "panic_answers": sh.panicAnswers.Load()},
		})
	}
}

func describeModes(p *Pool) map[string]string {
	m := make(map[string]string, len(p.Hosts))
	for _, h := range p.Hosts {
		m[h.Addr] = h.Mode().String()
	}
	return m
}

// SetMode is an operator's drain, maintenance or ready for the host at
// addr. It returns false when the pool has no such host.
func (p *Pool) SetMode(addr string, to Mode, now time.Time) bool {
	h := p.Host(addr)
	if h == nil {
		return false
	}
	typ, msg := event.HostReady, "host returned to service by an operator"
	switch to {
	case Drained:
		typ, msg = event.HostDrained, "host drained by an operator: in-flight requests finish, no new ones"
	case Maintenance:
		typ, msg = event.HostMaintenance, "host put in maintenance by an operator"
	}
	for {
		from := h.Mode()
		if from == to {
			return true
		}
		if h.transition(from, to, "operator: "+operatorWord[to], "", now) {
			p.m.emit(event.Event{Type: typ, Pool: p.Name, Host: addr, Message: msg, Evidence: map[string]any{"was": from.String(), "in_flight": h.InFlight()}})
			p.trackEmpty(now)
			return true
		}
	}
}

var operatorWord = map[Mode]string{Healthy: "ready", Drained: "drain", Maintenance: "maintenance"}
