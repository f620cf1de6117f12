package drill

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/server"
)

// Builtin is sturdy in-process, with each scenario's built-in config: the
// defaults design.md promises, plus what the incident needs (a route
// timeout for 002, a cached route for 004, a sorry page for 001).
func Builtin() Target { return builtin{} }

type builtin struct{}

func (builtin) Name() string { return "sturdy (built-in configs)" }

func (builtin) layout(st *stage) (layout, error) { return layout{hosts: st.hosts}, nil }

func (builtin) start(ctx context.Context, st *stage) (proxy, error) {
	yaml := st.sturdy(vars{Listen: st.net.proxy() + ":0", Pools: st.pools})
	cfg, err := config.Parse([]byte(yaml), "(built-in config of "+st.scenario+")")
	if err != nil {
		return nil, fmt.Errorf("built-in config: %w", err)
	}
	p := &sturdyProxy{cfg: cfg, eps: map[string]endpoint{}, routes: map[string]int{}}
	for _, need := range st.routes {
		i := routeIndex(cfg, need.role)
		if i < 0 {
			return nil, fmt.Errorf("built-in config of %s has no route %q", st.scenario, need.role)
		}
		p.routes[need.role] = i
		host := need.host
		if need.unmatched {
			host = unmatchedHost
		}
		p.eps[need.role] = endpoint{Host: host, Path: need.path}
		p.listeners = append(p.listeners, cfg.Listeners[0].Name)
	}
	if err := p.run(st); err != nil {
		return nil, err
	}
	return p, nil
}

// unmatchedHost is a Host no config names (".invalid" is reserved, RFC
// 2606), so that the default route answers it.
const unmatchedHost = "unmatched-site.drill.invalid"

func routeIndex(cfg *config.Config, name string) int {
	for i, r := range cfg.Routes {
		if r.Name == name {
			return i
		}
	}
	return -1
}

// sturdyProxy is sturdy in-process for one scenario run.
type sturdyProxy struct {
	cfg       *config.Config
	eps       map[string]endpoint // by role; Addr filled once listening
	routes    map[string]int      // role -> index in cfg.Routes
	listeners []string            // listener of each endpoint, in st.routes order
	owned     []func()            // fakes the target started itself, to close after the server
	counted   string              // role whose route and pool the counters are read for

	srv  *server.Server
	logs *logSink
	rec  *recorder
}

// run starts the server with a counting logger and resolves endpoint
// addresses.
func (p *sturdyProxy) run(st *stage) error {
	p.logs = &logSink{}
	srv, err := server.New(p.cfg, newLogger(p.cfg.Log, p.logs))
	if err != nil {
		p.closeOwned()
		return err
	}
	p.rec = newRecorder(srv)
	if err := srv.Start(); err != nil {
		srv.Shutdown(context.Background())
		p.closeOwned()
		return err
	}
	p.srv = srv
	for i, need := range st.routes {
		ep, ok := p.eps[need.role]
		if !ok {
			continue
		}
		ep.Addr = srv.Addr(p.listeners[i])
		p.eps[need.role] = ep
		if p.counted == "" || need.cached {
			p.counted = need.role
		}
	}
	return nil
}

// newLogger logs like `sturdy run` would with the config's log settings,
// into the counting sink.
func newLogger(c config.Log, w *logSink) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func (p *sturdyProxy) endpoint(role string) (endpoint, bool) {
	ep, ok := p.eps[role]
	return ep, ok
}

func (p *sturdyProxy) expect(role string) expectation {
	i, ok := p.routes[role]
	if !ok {
		return expectation{}
	}
	r := p.cfg.Routes[i]
	e := expectation{
		responseTimeout: r.Timeouts.ResponseHeader.D(),
		tries:           r.Retry.Tries,
		sorry:           &sorryPage{status: r.Sorry.Status, body: string(p.srv.Runtime().Route(r.Name).Sorry.Body)},
	}
	if r.Cache.Enabled {
		e.staleCap, e.hasStaleCap = r.Cache.StaleIfErrorMax.D(), true
		// An empty list means the cache's own defaults, /healthz first.
		e.bypass = "/healthz"
		if len(r.Cache.BypassPaths) > 0 {
			e.bypass = r.Cache.BypassPaths[0]
		}
	}
	return e
}

func (p *sturdyProxy) arm() { p.logs.arm(true) }

func (p *sturdyProxy) observe() observation {
	p.logs.arm(false)
	var o observation
	p.rec.fill(&o, time.Now())
	o.logLines, o.lines = p.logs.count()
	if i, ok := p.routes[p.counted]; ok {
		r := p.cfg.Routes[i]
		o.counters = countersOf(p.srv, r.Name, r.Pool)
	}
	if o.counters == nil {
		o.noCounters = "this sturdy has no status snapshot (Server.Status) to read them from"
		o.countersPending = true
	}
	return o
}

func (p *sturdyProxy) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p.srv.Shutdown(ctx)
	p.closeOwned()
}

func (p *sturdyProxy) closeOwned() {
	for i := len(p.owned) - 1; i >= 0; i-- {
		p.owned[i]()
	}
	p.owned = nil
}
