package server

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/sturdyproxy/sturdy/internal/compile"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/ops/admin"
	"github.com/sturdyproxy/sturdy/internal/outcome"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// Status takes one snapshot of everything operators see. It reads atomics
// and takes the server's lock briefly; the request path never waits on it.
func (s *Server) Status() view.Status {
	rt := s.cur.Load()
	cfg := rt.Config
	s.mu.Lock()
	reloads := s.reloads
	s.mu.Unlock()
	now := time.Now()
	st := view.Status{
		Time: now, Started: s.started, Version: s.opts.version,
		ConfigFile: cfg.File, ConfigHash: rt.Hash,
		Draining: s.draining.Load(),
		Events:   s.bus.Recent(50),
		Reloads:  reloads,
		Attributed: view.Attribution{
			"host":    s.monitor.AttributedCount(health.AttrHost),
			"client":  s.monitor.AttributedCount(health.AttrClient),
			"request": s.monitor.AttributedCount(health.AttrRequest),
			"route":   s.monitor.AttributedCount(health.AttrRoute),
		},
		Retries: view.Retries{Made: map[string]uint64{}, Refused: map[string]uint64{}},
		Pools:   make([]view.Pool, 0, len(rt.Pools)), // a config may have none: [] in JSON, not null
	}
	for _, hp := range rt.Pools {
		st.Pools = append(st.Pools, poolView(hp, now, now.Sub(s.started)))
		st.Retries.Made[hp.Name] = hp.Budget().Made.Load()
		st.Retries.Refused[hp.Name] = hp.Budget().Refused.Load()
	}
	for i, rc := range cfg.Routes {
		pr := rt.Routes[i]
		r := view.Route{Name: rc.Name, Pool: rc.Pool, Default: rc.Default, Serving: view.ServingNormal}
		if r.Pool == "" && pr.Pool != nil {
			r.Pool = pr.Pool.Name // a split route: its first weighted pool
		}
		pr.Stats.View(&r)
		if pr.Routing != nil && pr.Routing.Mirror != nil {
			r.Mirror = pr.Stats.Mirror.View()
		}
		r.Recent = pr.Stats.Recent(now, now.Sub(s.started))
		if tr := pr.Tracker; tr.Degraded() {
			r.Degraded = true
			r.DegradedSince, r.DegradedReason = tr.Describe()
		}
		if rc.Cache.Enabled {
			cs := s.cache.RouteStats(rc.Name)
			r.Cache = map[string]uint64{"hit": cs.Hits, "miss": cs.Misses, "stale": cs.Stale, "bypass": cs.Bypasses, "revalidated": cs.Revalidated}
			r.OriginErrors, r.HiddenErrors, r.OriginRequests = cs.OriginErrors, cs.ErrorsHidden, cs.OriginRequests
			if cs.Masking {
				r.Serving, r.ServingSince = view.ServingStale, cs.MaskingSince
			}
		}
		if r.Serving == view.ServingNormal { // stale answers from the cache come first
			r.Serving, r.ServingSince = pr.Serving()
		}
		st.Routes = append(st.Routes, r)
	}
	for _, c := range s.monitor.Clients() {
		st.Clients = append(st.Clients, view.Client{Key: c.Key, Since: c.Since, Evidence: c.Evidence, Shed: cfg.Attribution.ShedClients})
	}
	sort.Slice(st.Clients, func(i, j int) bool { return st.Clients[i].Since.Before(st.Clients[j].Since) })
	if s.alerts != nil {
		st.Webhooks = s.alerts.Stats()
	}
	st.AccessLog = s.access.Stats()
	st.Panics = s.group.Panics()
	st.Certificates = s.certificates()
	st.Access = s.accessView()
	for _, n := range s.dns.Names() {
		st.DNS = append(st.DNS, view.DNSName{Name: n.Name, SRV: n.SRV, Addresses: n.Addresses, Failing: n.Failing, Expired: n.Expired, Failures: n.Failures, LastOK: n.LastOK, LastError: n.LastError})
	}
	st.Edge = edgeView(s.edge)
	view.Judge(&st)
	counted, routes := cfg.Admin.ReadyRoutes, st.Routes
	if k := cfg.Kubernetes; k != nil && len(counted) == 0 {
		// The routes of Kubernetes objects do not count: an application
		// scaled to zero answers 503 on its own routes, it must not take
		// every sturdy replica out of its Service.
		routes = routes[:min(k.FileRoutes, len(routes))]
	}
	st.NotReady = notReady(counted, routes, st.Pools)
	var localReason string
	st.Local, localReason = s.localView(now)
	if localReason != "" {
		st.NotReady = append(st.NotReady, localReason)
	}
	if cfg.Admin.ExpiredCertificateNotReady {
		for _, c := range st.Certificates {
			if c.State == view.CertExpired {
				st.NotReady = append(st.NotReady, view.NotReadyCertificate(c))
			}
		}
	}
	if ready := s.opts.ready; ready != nil {
		if ok, why := ready(); !ok {
			st.NotReady = append([]string{why}, st.NotReady...)
		}
	}
	if st.Draining {
		st.NotReady = append([]string{view.NotReadyDraining}, st.NotReady...)
	}
	st.Ready = len(st.NotReady) == 0
	return st
}

func poolView(p *health.Pool, now time.Time, up time.Duration) view.Pool {
	hp := p
	empty, since, total := hp.Empty()
	v := view.Pool{
		Name: p.Name, Balance: p.Balance(), Available: p.AvailableCount(),
		Empty: empty, EmptySecs: total.Seconds(), Panic: hp.InPanic(), ActiveCheck: hp.ActiveCheck(),
	}
	v.FailingSince, v.Failing = hp.FailingSince()
	if empty {
		v.EmptySince = since
	}
	for _, h := range p.Hosts {
		v.Hosts = append(v.Hosts, hostView(h, now, up))
	}
	return v
}

func hostView(h *health.Host, now time.Time, up time.Duration) view.Host {
	since, reason, evidence := h.Describe()
	t := h.Window(now)
	v := view.Host{
		Addr: h.Addr, Name: h.Name, Weight: h.Weight, State: h.Mode().String(), Since: since,
		Reason: reason, Evidence: evidence, InFlight: h.InFlight(),
		WindowRequests: t.Requests, WindowFailures: t.Failures, Ejections: h.Ejections(),
		Attempts: make(map[string]uint64, outcome.NumClasses),
	}
	for _, c := range outcome.All() {
		v.Attempts[c.String()] = h.Attempts(c)
	}
	attempts, failures, span := h.Recent(now)
	v.Recent = view.HostRecent{Seconds: min(span, max(up, 0)).Seconds(), Attempts: attempts, Failures: failures}
	counts, count, sum := h.HeaderTime()
	v.HeaderTime = view.Histogram{Bounds: health.HeaderTimeBounds, Counts: counts, Count: count, Sum: sum.Seconds()}
	v.BytesReceived, v.BytesSent = h.Bytes()
	if c := h.LastCheck(); !c.Time.IsZero() {
		v.LastCheck, v.LastCheckOK, v.CheckDetail = c.Time, c.OK, c.Detail
	}
	return v
}

// notReady lists the counted routes that can answer with nothing but the
// sorry page. A route on its fallback pool, in panic or on stale copies
// still answers, and counts as ready.
func notReady(counted []string, routes []view.Route, pools []view.Pool) []string {
	count := map[string]bool{}
	for _, n := range counted {
		count[n] = true
	}
	var out []string
	for _, r := range routes {
		if (len(counted) == 0 || count[r.Name]) && r.Serving == "sorry" {
			out = append(out, view.NotReadyRoute(r, pools))
		}
	}
	return out
}

// SetHostMode is the runtime API's drain / maintenance / ready.
func (s *Server) SetHostMode(poolName, addr, mode string) error {
	p := s.cur.Load().Pool(poolName)
	if p == nil {
		return fmt.Errorf("pool %q: %w", poolName, admin.ErrUnknownHost)
	}
	to := health.Healthy
	switch mode {
	case admin.ModeDrain:
		to = health.Drained
	case admin.ModeMaintenance:
		to = health.Maintenance
	case admin.ModeReady:
	default:
		return fmt.Errorf("unknown mode %q; expected drain, maintenance or ready", mode)
	}
	if !p.SetMode(addr, to, time.Now()) {
		return fmt.Errorf("host %q in pool %q: %w", addr, poolName, admin.ErrUnknownHost)
	}
	return nil
}

// ReloadFile re-reads the config through the server's loader and applies
// it; an invalid config changes nothing.
func (s *Server) ReloadFile() error {
	s.mu.Lock()
	load := s.load
	s.mu.Unlock()
	if load == nil {
		return errors.New("this server has no config file to reload")
	}
	cfg, err := load()
	if err != nil {
		s.reloadFailed(err)
		return err
	}
	return s.Reload(cfg)
}

// adminBackend adapts the server to the admin handler.
type adminBackend struct{ s *Server }

func (b adminBackend) Status() view.Status { return b.s.Status() }
func (b adminBackend) SetHostMode(pool, addr, mode string) error {
	return b.s.SetHostMode(pool, addr, mode)
}
func (b adminBackend) Reload() error { return b.s.ReloadFile() }

// Runtime is the serving runtime (the compiled config).
func (s *Server) Runtime() *compile.Runtime { return s.cur.Load() }
