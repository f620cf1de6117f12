package health

import "time"

// SavedHost is a host's state as one process hands it to the next across
// a binary upgrade (or a restart), so that the new process does not send
// traffic to hosts the old one knew were out.
type SavedHost struct {
	Pool       string    `json:"pool"`
	Addr       string    `json:"addr"`
	Mode       string    `json:"mode"`
	Since      time.Time `json:"since"`
	Reason     string    `json:"reason,omitempty"`
	Evidence   string    `json:"evidence,omitempty"`
	Ejections  uint64    `json:"ejections,omitempty"`
	EjectUntil time.Time `json:"eject_until,omitzero"`
}

// Save returns the state of the pool's hosts.
func (p *Pool) Save() []SavedHost {
	out := make([]SavedHost, 0, len(p.Hosts))
	for _, h := range p.Hosts {
		since, reason, evidence := h.Describe()
		sh := SavedHost{Pool: p.Name, Addr: h.Addr, Mode: h.Mode().String(), Since: since, Reason: reason, Evidence: evidence, Ejections: h.ejections.Load()}
		if u := h.ejectUntil.Load(); u != 0 {
			sh.EjectUntil = time.Unix(0, u)
		}
		out = append(out, sh)
	}
	return out
}

// Restore applies saved states to the pool's hosts that are still in it
// and still in their first state (a host this process has already judged
// keeps its own). It returns how many hosts it changed.
func (p *Pool) Restore(saved []SavedHost, now time.Time) int {
	n := 0
	for _, s := range saved {
		h := p.Host(s.Addr)
		if s.Pool != p.Name || h == nil || h.Mode() != Healthy {
			continue
		}
		to, ok := modeByName[s.Mode]
		h.ejections.Store(s.Ejections)
		if !ok || to == Healthy {
			continue
		}
		if to == Ejected {
			if !s.EjectUntil.After(now) {
				continue // its eject time ran out during the handover
			}
			h.ejectUntil.Store(s.EjectUntil.UnixNano())
		}
		if h.transition(Healthy, to, s.Reason, s.Evidence, s.Since) {
			n++
		}
	}
	if n > 0 {
		p.trackEmpty(now)
	}
	return n
}

// modeByName reads Mode.String back.
var modeByName = map[string]Mode{
	"healthy": Healthy, "suspect": Suspect, "ejected": Ejected,
	"down": Down, "drained": Drained, "maintenance": Maintenance,
}
