package server

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/edge"
	"github.com/sturdyproxy/sturdy/internal/ops/exhaust"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// newInstance is this process's mark in X-Sturdy-Hops: random, so that
// two sturdys in a chain never take each other's requests for a loop.
func newInstance() string {
	var b [6]byte
	rand.Read(b[:])
	return "s-" + hex.EncodeToString(b[:])
}

// raiseFileLimit raises the soft file-descriptor limit to the hard one
// (the Go runtime has normally done so already) and says what sturdy runs
// with; `sturdy check` and the start warn when that is low for the
// config (internal/ops/lint).
func (s *Server) raiseFileLimit() {
	soft, hard, raised, err := exhaust.RaiseFileLimit()
	switch {
	case err != nil && soft == 0:
		return // no such limit here
	case err != nil:
		s.log.Warn("could not raise the file descriptor limit to the hard limit", "soft", soft, "hard", hard, "err", err)
	case raised:
		s.log.Info("raised the file descriptor limit", "limit", soft)
	}
	s.fileLimit.Store(soft)
}

// edgeView fills what the edge decided, since start.
func edgeView(c *edge.Counters) view.Edge {
	v := view.Edge{Requests: c.Answers(), Decisions: map[string]map[string]uint64{}}
	for _, r := range edge.AllReasons() {
		m := v.Decisions[r.Kind()]
		if m == nil {
			m = map[string]uint64{}
			v.Decisions[r.Kind()] = m
		}
		m[r.String()] = c.Count(r)
	}
	// The status page's totals.
	v.Denied = c.Count(edge.Denied)
	v.Reencoded = c.Count(edge.Reencoded)
	v.Normalized = c.Count(edge.Normalized)
	for _, r := range []edge.Reason{edge.RejectControl, edge.RejectNonASCII, edge.RejectEscape, edge.RejectNUL, edge.RejectSlash} {
		v.Rejected += c.Count(r)
	}
	return v
}

// localView fills sturdy's own exhaustion, and returns the readiness
// reason while it lasts ("" otherwise).
func (s *Server) localView(now time.Time) (view.Local, string) {
	v := view.Local{Failures: s.local.Counts(), AcceptErrors: map[string]uint64{}, Handoffs: map[string]uint64{}, FileLimit: s.fileLimit.Load()}
	v.Exhausted, v.Since = s.local.Active()
	s.mu.Lock()
	for name, l := range s.listeners {
		v.AcceptErrors[name] = l.acceptErrors.Load()
		if l.cfg.Frontend == config.FrontendNative || l.handoffs.Load() > 0 {
			v.Handoffs[name] = l.handoffs.Load()
		}
	}
	s.mu.Unlock()
	return v, s.local.NotReady(now)
}
