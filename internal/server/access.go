package server

import (
	"context"

	"github.com/sturdyproxy/sturdy/internal/access/ratelimit"
	"github.com/sturdyproxy/sturdy/internal/compile"
	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// sharedLimitsEvent announces the shared rate-limit store going away
// (limits fall back to each instance's own buckets) and coming back.
func (s *Server) sharedLimitsEvent(e ratelimit.SharedEvent) {
	ev := event.Event{Host: e.Addr, Evidence: map[string]any{}}
	if e.Up {
		ev.Type, ev.Message = event.SharedLimitsUp, "shared rate-limit store answers again; zones use shared buckets"
	} else {
		ev.Type, ev.Severity = event.SharedLimitsDown, event.Warning
		ev.Message = "shared rate-limit store unreachable; zones fall back to this instance's own buckets"
		if e.Err != nil {
			ev.Evidence["error"] = e.Err.Error()
		}
	}
	s.bus.Emit(ev)
}

// accessView reads the access controls' counters.
func (s *Server) accessView() view.Access {
	var v view.Access
	rt := s.cur.Load()
	acc := rt.Access
	if acc == nil {
		return v
	}
	if acc.Rate != nil {
		stats, zones := acc.Rate.Stats()
		for _, st := range stats {
			v.RateLimits = append(v.RateLimits, view.RateLimit{Route: st.Route, Zone: st.Zone, Key: st.KeyKind, Decisions: map[string]uint64{
				"allowed": st.Allowed, "delayed": st.Delayed, "rejected": st.Rejected, "strict": st.Strict,
				"no_key": st.NoKey, "untracked": st.Untracked, "fallback": st.Fallback,
			}})
		}
		for _, z := range zones {
			v.Zones = append(v.Zones, view.RateZone{Zone: z.Zone, Key: z.KeyKind, Keys: z.Keys, Size: z.Size, Evicted: z.Evicted, Shared: z.Shared, SharedUp: z.SharedUp})
		}
	}
	if acc.Conn != nil {
		for _, st := range acc.Conn.Stats() {
			v.ConnLimits = append(v.ConnLimits, view.ConnLimit{Route: st.Route, Zone: st.Zone, Key: st.KeyKind, Passed: st.Passed, Rejected: st.Rejected})
		}
	}
	for _, r := range rt.Routes {
		if r.Access == nil {
			continue
		}
		if b := r.Access.BasicAuth(); b != nil {
			v.Auth = append(v.Auth, view.Auth{Route: r.Name, Kind: "basic", Results: map[string]uint64{
				"ok": b.C.OK.Load(), "failed": b.C.Failed.Load(), "blocked": b.C.Blocked.Load()}})
		}
		if f := r.Access.ForwardAuth(); f != nil {
			v.Auth = append(v.Auth, view.Auth{Route: r.Name, Kind: "forward", Results: map[string]uint64{
				"allowed": f.C.Allowed.Load(), "denied": f.C.Denied.Load(), "redirected": f.C.Redirected.Load(),
				"failed": f.C.Failed.Load(), "timeout": f.C.Timeouts.Load()}})
		}
	}
	return v
}

// runShared keeps the shared rate-limit store of rt probed (under the
// group) and stops the previous runtime's when the store changed. Callers
// hold s.mu.
func (s *Server) runSharedLocked(rt *compile.Runtime) {
	var shared *ratelimit.Shared
	if rt.Access != nil {
		shared = rt.Access.Shared
	}
	if shared == s.shared {
		return
	}
	if s.stopShared != nil {
		s.stopShared()
		s.stopShared = nil
	}
	s.shared = shared
	if shared == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stopShared = cancel
	s.group.Go("shared rate limits", func(group context.Context) error {
		stop := context.AfterFunc(group, cancel)
		defer stop()
		return shared.Run(ctx)
	})
}
