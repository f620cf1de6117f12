package health

// What the request path tells a pool about attempts that need no
// attribution; failures after the request was sent go to Settle
// (attribute.go).

import (
	"fmt"
	"time"

	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// Record counts an attempt on h that needs no attribution: a success, a
// failure before anything was sent, a client that went away, or a body that
// broke after its headers (counted, held against nobody). Failures after
// the request was sent go to Settle.
func (p *Pool) Record(h *Host, c outcome.Class, r *Request, now time.Time) {
	switch {
	case c == outcome.OK:
		p.success(h, r, now)
	case c.NotHosts():
		// The client's doing or sturdy's own: counted, never evidence.
		h.attempts[c].Add(1)
	case !c.Sent():
		p.connectFailed(h, c, r, now)
	default:
		h.attempts[c].Add(1)
	}
}

func (p *Pool) success(h *Host, r *Request, now time.Time) {
	h.attempts[outcome.OK].Add(1)
	if h.connectFailures.Load() != 0 {
		h.connectFailures.Store(0)
	}
	if h.streak.Load() != 0 {
		h.streak.Store(0)
		h.streakClients.Store(0)
		h.streakRoutes.Store(0)
	}
	if h.shedUntil.Load() != 0 {
		h.shedSucceeded(now.UnixNano())
	}
	if p.cfg.Passive.On() {
		h.window.Success(now, r.ClientBit, r.RouteBit)
	}
	r.Route.success(now, p.attr.Window, r.ClientBit)
	p.m.clients.served(r, p.attr.Window, now)
	p.m.requests.served(r)
	if p.shared.failing.Load() {
		p.recovered(h, now)
	}
	if h.Mode() == Ejected && p.shared.panic.Load() {
		// A panic-routed request got through: the host is back, whatever
		// its eject timer says.
		p.restore(h, "a request routed in panic mode succeeded", now)
	}
}

// connectFailed records an attempt that failed before anything was sent.
// That is evidence against the host alone; enough of them in a row make it
// suspect at once.
func (p *Pool) connectFailed(h *Host, class outcome.Class, r *Request, now time.Time) {
	h.attempts[class].Add(1)
	h.lastFailure.Store(now.UnixNano())
	p.m.attributed[AttrHost].Add(1)
	if !p.cfg.Passive.On() {
		return
	}
	var c uint64
	if r != nil {
		c = r.ClientBit
	}
	h.window.Failure(now, c, 0, class)
	n := h.connectFailures.Add(1)
	if int(n) >= p.cfg.Passive.ConsecutiveConnectFailures && h.Mode() == Healthy {
		p.suspect(h, "connection failures in a row",
			fmt.Sprintf("%d consecutive %s", n, class), now)
		return
	}
	p.hostFailed(h, c, 0, nil, class, now)
}
