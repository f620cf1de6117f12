package health

import (
	"fmt"
	"sort"
	"time"

	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// detectOutliers compares each host's host-attributed failure rate in the
// window with its peers'. A host is an outlier only when it saw enough
// traffic, failed for several distinct clients (one client cannot take a
// host down, incident 000), and either is clearly worse than its peers (a
// problem every host shares is not any one host's fault) or fails at the
// failure rate while some peer does not (whatever the others do): in a
// majority failure each failing host has peers failing as badly, and that
// must not keep every one of them in rotation; nor must the last healthy
// host, overloaded by their share, shield them by failing a little too.
// Only when every host fails at the rate is the problem shared: ejecting
// some would move their load onto the others and fix nothing (a pool that
// fails everything is the failing-pool case, failing.go). A host alone in its pool has
// no peers: it needs failures on two routes, when it serves several, and an
// active check to confirm.
func (p *Pool) detectOutliers(now time.Time) {
	ps := p.cfg.Passive
	stats := make([]hostStat, 0, len(p.Hosts))
	for _, h := range p.Hosts {
		if !h.Mode().InRotation() {
			continue
		}
		s := hostStat{h: h, t: h.window.Sum(now), span: ps.Window}
		s.rate = s.t.rate()
		// A host that began failing lately is judged on its recent
		// buckets too, when they alone hold enough requests: an outage
		// that starts now should not have to outweigh the window's
		// successes from before it. A host resetting 73 % of its
		// requests took 12 s to reach half of its 30 s window (simulator
		// seed 913).
		if r := h.window.SumRecent(now, recentBuckets); r.Requests >= uint64(ps.MinRequests) && r.rate() > s.rate {
			s.t, s.rate, s.span = r, r.rate(), ps.Window*recentBuckets/windowBuckets
		}
		stats = append(stats, s)
	}
	okRoutes := routesSucceeding(p.Hosts, now)
	for i, s := range stats {
		var peers []float64
		for j, o := range stats {
			if j != i && o.t.Requests >= uint64(ps.MinRequests) {
				peers = append(peers, o.rate)
			}
		}
		median, hasPeers := medianOf(peers)
		outlier := s.t.Requests >= uint64(ps.MinRequests) &&
			Count(s.t.FailClients) >= ps.MinClients &&
			s.rate >= float64(ps.FailureRate)
		if outlier && hasPeers {
			outlier = s.rate >= 2*median && s.rate-median >= 0.2 || healthyPeer(stats, i, ps.MinRequests, float64(ps.FailureRate))
		}
		if outlier && hasPeers && routesOwnTimeouts(s.t, okRoutes) {
			// Without peers the host's own rule below already asks for
			// two failing routes, or an active check to decide.
			outlier = false
		}
		if outlier && !hasPeers {
			servesMany := Count(s.t.OKRoutes|s.t.FailRoutes) >= 2
			outlier = p.HasActiveChecks() && (!servesMany || Count(s.t.FailRoutes) >= 2)
		}
		evidence := fmt.Sprintf("%d of %d requests failed", s.t.Failures, s.t.Requests)
		if s.t.FailClasses != 0 {
			evidence += " (" + Classes(s.t.FailClasses) + ")"
		}
		evidence += fmt.Sprintf(" from %d clients in %s", Count(s.t.FailClients), s.span)
		if hasPeers {
			evidence += fmt.Sprintf("; peers %.0f%%", median*100)
		}
		switch {
		case outlier && s.h.Mode() == Healthy:
			p.suspect(s.h, "host-attributed failure rate at or above failure_rate, or clearly above its peers'", evidence, now)
		case outlier && s.h.Mode() == Suspect && !p.HasActiveChecks():
			p.eject(s.h, "host-attributed failure rate at or above failure_rate, or clearly above its peers'", evidence, now)
		case !outlier && s.h.Mode() == Suspect && !p.HasActiveChecks() && s.h.connectFailures.Load() == 0 &&
			s.h.attempts[okClass].Load() > s.h.suspectOK.Load():
			// Held in rotation by max_ejected, it got only what the
			// healthy hosts could not take, and that succeeded.
			p.restore(s.h, "requests to it succeed again", now)
		case !outlier && s.h.Mode() == Suspect && !p.HasActiveChecks() && now.UnixNano() >= s.h.ejectUntil.Load():
			// Its ejection would have ended by now. It may have had no
			// request since (the healthy hosts took them all), so no
			// success could reset its connection failures in a row: the
			// evidence is as old as an ejected host's, and it returns as
			// one would (issue 36: it stayed suspect for good).
			p.restore(s.h, "the evidence against it is older than its eject time", now)
		case s.h.Mode() == Suspect && p.HasActiveChecks() && s.h.isGrayHeld() && now.UnixNano() >= s.h.ejectUntil.Load():
			p.restore(s.h, "held after its probe and traffic disagreed; that time is over", now)
		}
	}
}

// routesOwnTimeouts reports whether a host's window t holds the route's
// problem rather than the host's: every host-attributed failure in it is
// a response timeout of one route, and that route succeeded on no host of
// the pool in the window (okRoutes). A slow route times out wherever its
// requests go, and under hash balancing, which hashes clients and not
// routes, they can all go to one host that then serves nothing else
// (incident 002): until the route is known degraded, its timeouts there
// say nothing against the host. What does is the route succeeding
// elsewhere (a retry on a peer, say), the host failing another route, or
// failing some other way (a refused connection, a reset, a 5xx): then it
// is judged like any host, since a host slow or broken for real must not
// stay in rotation behind a route's excuse.
func routesOwnTimeouts(t Totals, okRoutes uint64) bool {
	return t.FailClasses == 1<<outcome.ResponseTimeout && Count(t.FailRoutes) == 1 && t.FailRoutes&okRoutes == 0
}

// routesSucceeding sketches the routes that succeeded on any host of the
// pool in the window, in rotation or not: a success anywhere shows the
// route can succeed.
func routesSucceeding(hosts []*Host, now time.Time) uint64 {
	var ok uint64
	for _, h := range hosts {
		ok |= h.window.Sum(now).OKRoutes
	}
	return ok
}

func (s *hostState) isGrayHeld() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.grayHeld
}

// hostStat is one host's window at a tick.
type hostStat struct {
	h    *Host
	t    Totals
	rate float64
	span time.Duration // what t covers: the window, or its recent buckets
}

// recentBuckets is how many of a window's latest buckets a host's recent
// failure rate is read from (6 s of the default 30 s).
const recentBuckets = 2

func (t Totals) rate() float64 {
	if t.Requests == 0 {
		return 0
	}
	return float64(t.Failures) / float64(t.Requests)
}

// healthyPeer reports whether a host other than stats[i], with enough
// traffic, fails less than rate.
func healthyPeer(stats []hostStat, i, minRequests int, rate float64) bool {
	for j, o := range stats {
		if j != i && o.t.Requests >= uint64(minRequests) && o.rate < rate {
			return true
		}
	}
	return false
}

// hostFailed follows a host-attributed failure on h by the client with
// sketch bit c on the route with bit r (0: not known). Failures in a row
// from several clients, while another host of the pool succeeds, make the
// host suspect at once: an outage that starts now should not have to
// outweigh the window's successes from before it, request by request,
// while clients see the errors. A host that serves several routes needs
// them from two routes: concurrent requests of one slow route fail
// together, and that is the route's problem until proven otherwise
// (incident 002). Unless the route is served meanwhile: when it served a
// request since its attempts last failed this way (rt, the failure's
// route; nil when not known), on a peer most likely (a GET that timed out
// here and was answered there), it is not failing as a route, and the
// failures in a row are the host's: a host that hangs every route's
// requests was left to its probes (3 failed, 10 s or more) while its
// peers answered.
func (p *Pool) hostFailed(h *Host, c, r uint64, rt *RouteTracker, class outcome.Class, now time.Time) {
	n := h.streak.Add(1)
	clients := Count(h.streakClients.Or(c) | c)
	routes := Count(h.streakRoutes.Or(r) | r)
	ps := p.cfg.Passive
	routeServed := rt != nil && !rt.failingSince(class)
	if routeServed && h.Mode() == Healthy && p.HasActiveChecks() {
		// A failure of a route served elsewhere meanwhile (a GET answered
		// by its retry on a peer): the probe is asked now rather than at
		// its interval, and its failure takes the host down at once
		// (checkResult); its passing changes nothing. Waiting for failures
		// in a row from min_clients clients left a hanging host to its
		// probes, three of them at 5 s, where few clients reached it (a
		// slow route beside it holding them up: simulator seeds 51, 783).
		p.askProbe(h)
	}
	if int(n) < max(ps.ConsecutiveConnectFailures, ps.MinClients) || clients < ps.MinClients || h.Mode() != Healthy {
		return
	}
	if t := h.window.Sum(now); Count(t.OKRoutes|t.FailRoutes) >= 2 && routes < 2 && !routeServed {
		return
	}
	if routes < 2 && class == outcome.ResponseTimeout && r != 0 && !routeServed {
		// Timeouts of one route are that route's slow requests until
		// another route's fail too, even before the window has seen the
		// host's other routes (incident 002's first second); the
		// window's outlier rule still judges the host.
		return
	}
	if !p.peerSucceeds(h) {
		return
	}
	p.suspect(h, "failed requests in a row from several clients while its peers succeed",
		fmt.Sprintf("%d failed attempts in a row (last: %s) from %d clients", n, class, clients), now)
}

// askProbe has the host probed now, once until the probe's result.
func (p *Pool) askProbe(h *Host) {
	if !h.probeAsked.Load() && h.probeAsked.CompareAndSwap(false, true) {
		p.m.expedite(p.Name, h.Addr)
	}
}

// peerSucceeds reports whether another healthy host of the pool had no
// host-attributed failure since its last success.
func (p *Pool) peerSucceeds(h *Host) bool {
	for _, o := range p.Hosts {
		if o.hostState != h.hostState && o.Mode() == Healthy && o.streak.Load() == 0 && o.attempts[okClass].Load() > 0 {
			return true
		}
	}
	return false
}

func medianOf(v []float64) (float64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2], true
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2, true
}
