package health

import (
	"fmt"
	"sort"
	"time"
)

// detectOutliers compares each host's host-attributed failure rate in the
// window with its peers'. A host is an outlier only when it saw enough
// traffic, failed for several distinct clients (one client cannot take a
// host down, incident 000), and is clearly worse than its peers (a problem
// every host shares is not any one host's fault). A host alone in its pool
// has no peers: it needs failures on two routes, when it serves several,
// and an active check to confirm.
func (p *Pool) detectOutliers(now time.Time) {
	ps := p.cfg.Passive
	type stat struct {
		h    *Host
		t    Totals
		rate float64
	}
	stats := make([]stat, 0, len(p.Hosts))
	for _, h := range p.Hosts {
		if !h.Mode().InRotation() {
			continue
		}
		t := h.window.Sum(now)
		s := stat{h: h, t: t}
		if t.Requests > 0 {
			s.rate = float64(t.Failures) / float64(t.Requests)
		}
		stats = append(stats, s)
	}
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
			outlier = s.rate >= 2*median && s.rate-median >= 0.2
		}
		if outlier && !hasPeers {
			servesMany := Count(s.t.OKRoutes|s.t.FailRoutes) >= 2
			outlier = p.HasActiveChecks() && (!servesMany || Count(s.t.FailRoutes) >= 2)
		}
		evidence := fmt.Sprintf("%d of %d requests failed", s.t.Failures, s.t.Requests)
		if s.t.FailClasses != 0 {
			evidence += " (" + Classes(s.t.FailClasses) + ")"
		}
		evidence += fmt.Sprintf(" from %d clients in %s", Count(s.t.FailClients), ps.Window)
		if hasPeers {
			evidence += fmt.Sprintf("; peers %.0f%%", median*100)
		}
		switch {
		case outlier && s.h.Mode() == Healthy:
			p.suspect(s.h, "failure rate clearly above its peers'", evidence, now)
		case outlier && s.h.Mode() == Suspect && !p.HasActiveChecks():
			p.eject(s.h, "failure rate clearly above its peers'", evidence, now)
		case !outlier && s.h.Mode() == Suspect && !p.HasActiveChecks() && s.h.connectFailures.Load() == 0:
			p.restore(s.h, "the evidence against it has cleared", now)
		}
	}
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
