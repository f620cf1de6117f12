// Package server runs one sturdy instance: it compiles the config (through
// internal/compile), serves each listener and the admin listener, publishes
// a reloaded config with one atomic swap without dropping a request, owns
// every background component under one supervisor, and drains on shutdown.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sturdyproxy/sturdy/internal/access/ratelimit"
	"github.com/sturdyproxy/sturdy/internal/cache"
	"github.com/sturdyproxy/sturdy/internal/compile"
	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/edge"
	"github.com/sturdyproxy/sturdy/internal/edge/acme"
	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/health/resolve"
	"github.com/sturdyproxy/sturdy/internal/ops/alert"
	"github.com/sturdyproxy/sturdy/internal/ops/exhaust"
	"github.com/sturdyproxy/sturdy/internal/ops/logagg"
	"github.com/sturdyproxy/sturdy/internal/proxy"
	"github.com/sturdyproxy/sturdy/internal/proxy/accesslog"
	"github.com/sturdyproxy/sturdy/internal/server/sdnotify"
	"github.com/sturdyproxy/sturdy/internal/server/supervise"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// Server runs one sturdy instance.
type Server struct {
	log *slog.Logger
	// cur is the serving runtime: the request path, the health monitor,
	// the listeners' certificates and the status all read it, and a reload
	// replaces it in one store.
	cur     atomic.Pointer[compile.Runtime]
	bus     *event.Bus
	monitor *health.Monitor
	cache   *cache.Cache // shared by every route that opts in
	edge    *edge.Counters
	agg     *logagg.Aggregator
	alerts  *alert.Dispatcher
	access  *accesslog.Logger // nil when off
	dns     *resolve.Resolver
	acme    *acme.Manager // nil without an acme section
	group   *supervise.Group
	// upgrades tracks WebSockets and other upgraded connections, which
	// net/http's Shutdown does not wait for.
	upgrades *proxy.Upgrades
	// sockets, when set, opens listening sockets (inherited from the
	// previous process across a binary upgrade).
	sockets socketSource
	notify  *sdnotify.Notifier // nil outside systemd
	// shared is the shared rate-limit store being probed, stopShared ends
	// that; guarded by mu.
	shared     *ratelimit.Shared
	stopShared context.CancelFunc
	started    time.Time
	dial       health.Dialer // how pool hosts are dialled
	opts       options

	// draining is set once shutdown begins; /readyz reports it.
	draining atomic.Bool
	// handedOver is set when a new process took over the listeners: the
	// shutdown needs no delay, the new process serves already.
	handedOver atomic.Bool

	// local counts sturdy's own resource exhaustion; instance marks the
	// requests that pass through this process (loops); fileLimit is the
	// soft file-descriptor limit once raised.
	local     *exhaust.Tracker
	instance  string
	fileLimit atomic.Uint64

	// mu guards the fields below. Start, Reload and Shutdown take it,
	// never the request path.
	mu        sync.Mutex
	load      func() (*config.Config, error)
	listeners map[string]*listener
	admin     *http.Server
	adminAddr string
	running   bool
	reloads   view.Reloads
	demo      http.Handler // the demo's controls on the admin listener; nil but in sturdy demo

	// adminReserve holds the admin listener's spare descriptors (admin.go).
	adminReserve *exhaust.Reserve
}

// Option adjusts a Server at construction.
type Option func(*options)

type options struct {
	lookup     resolve.Lookup
	notify     *sdnotify.Notifier
	sockets    socketSource
	demo       http.Handler
	dial       health.Dialer
	ready      func() (bool, string)
	components []component
	collectors []prometheus.Collector
	version    string
	now        func() time.Time
}

type component struct {
	name string
	run  func(context.Context) error
}

// WithDialer replaces how upstream clients and health probes dial pool
// hosts (the DNS resolver's dialer by default). Tests use it to reach
// loopback listeners behind the documentation addresses (192.0.2.0/24)
// that Kubernetes EndpointSlices carry, since the API server refuses
// loopback endpoint addresses.
func WithDialer(d health.Dialer) Option { return func(o *options) { o.dial = d } }

// WithReadiness adds a condition to /readyz: while ready reports false,
// the server is not ready and says why (the Kubernetes source before its
// first sync).
func WithReadiness(ready func() (bool, string)) Option {
	return func(o *options) { o.ready = ready }
}

// WithComponent runs run as a member of the server's supervised group,
// from Start until shutdown (the Kubernetes source).
func WithComponent(name string, run func(context.Context) error) Option {
	return func(o *options) { o.components = append(o.components, component{name, run}) }
}

// WithCollector adds c's metrics to what /metrics serves (the
// Kubernetes source's own).
func WithCollector(c prometheus.Collector) Option {
	return func(o *options) { o.collectors = append(o.collectors, c) }
}

// WithLookup replaces the system resolver for pool host names (tests).
func WithLookup(l resolve.Lookup) Option { return func(o *options) { o.lookup = l } }

// WithNotifier tells the service manager (systemd) when sturdy is ready,
// reloading and stopping, and feeds its watchdog.
func WithNotifier(n *sdnotify.Notifier) Option { return func(o *options) { o.notify = n } }

// WithSockets opens listening sockets through src (inherited from the
// previous process across a binary upgrade) instead of the system's.
func WithSockets(src socketSource) Option { return func(o *options) { o.sockets = src } }

// WithClock sets the clock of the cache (freshness, stale bounds) and of
// the log aggregator (its windows); time.Now without it. Tests move it to
// cross those bounds without waiting for them.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithVersion sets the version the status reports; "dev" without it.
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// WithDemo serves the demo's controls on the admin listener under
// /api/demo (see admin.Options.Demo): sturdy demo only.
func WithDemo(h http.Handler) Option { return func(o *options) { o.demo = h } }

// New compiles cfg. Nothing listens and nothing runs until Start.
func New(cfg *config.Config, log *slog.Logger, opts ...Option) (*Server, error) {
	o := options{version: "dev"}
	for _, opt := range opts {
		opt(&o)
	}
	access, err := openAccessLog(cfg.Log.Access, log)
	if err != nil {
		return nil, err
	}
	bus := event.NewBus(log, 200, nil)
	s := &Server{
		log: log, listeners: map[string]*listener{}, bus: bus,
		cache:    newCache(cfg.Cache, bus, o.now),
		edge:     new(edge.Counters),
		instance: newInstance(),
		agg:      logagg.New(log, logagg.Options{Interval: cfg.Log.AggregateInterval.D(), Now: o.now}),
		access:   access,
		group:    supervise.New(log),
		upgrades: new(proxy.Upgrades),
		sockets:  o.sockets,
		notify:   o.notify,
		started:  time.Now(),
		demo:     o.demo,
		opts:     o,
	}
	s.local = exhaust.New(exhaust.Options{Agg: s.agg, Bus: bus})
	s.dns = resolve.New(resolve.Options{
		Lookup: o.lookup, Servers: cfg.DNS.Servers,
		Refresh: cfg.DNS.Refresh.D(), Timeout: cfg.DNS.Timeout.D(), Hold: cfg.DNS.Hold.D(),
		Bus: bus, OnChange: s.followDNS,
	})
	s.dial = s.dns.DialContext
	if o.dial != nil {
		s.dial = o.dial
	}
	s.monitor = health.NewMonitor(health.Options{
		Bus:      bus,
		Dial:     s.dial,
		Current:  s.healthSet,
		Panicked: s.group.Recovered,
	})
	// Names are looked up before the compile, so that each address of a
	// name is a host of its own from the first request on.
	s.dns.Prepare(hostAddrs(cfg))
	rt, err := compile.Compile(cfg, nil, s.env())
	if err != nil {
		return nil, err
	}
	s.acme = rt.ACME // made from the acme section; reloads share it
	for _, w := range rt.Warnings {
		log.Warn("config", "warning", w.Error())
	}
	s.resolveNames(cfg)
	s.cur.Store(rt)
	return s, nil
}

// env is what every compile of this server builds on.
func (s *Server) env() compile.Env {
	return compile.Env{Monitor: s.monitor, Cache: s.cache, Agg: s.agg, Access: s.access, Edge: s.edge, Dial: s.dial, Names: s.dns, ACME: s.acme, OnACME: s.certEvent, ACMELog: s.log, OnShared: s.sharedLimitsEvent,
		Instance: s.instance, Local: s.local}
}

func (s *Server) snapshot() *proxy.Snapshot { return s.cur.Load().Proxy }

func (s *Server) healthSet() *health.Set { return s.cur.Load().Health }

// SetLoader sets how ReloadFile (SIGHUP, the runtime API) reads the config.
func (s *Server) SetLoader(load func() (*config.Config, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.load = load
}

func openAccessLog(a config.AccessLog, log *slog.Logger) (*accesslog.Logger, error) {
	if !a.Enabled {
		return nil, nil
	}
	l, err := accesslog.Open(a.Path, accesslog.Options{Log: log})
	if err != nil {
		return nil, fmt.Errorf("access log: %w", err)
	}
	return l, nil
}

// newCache makes the shared cache; its stale-masking episodes become events.
// Its size is fixed for the process: a reload that changes cache.max_bytes
// takes effect on restart.
func newCache(c config.Cache, bus *event.Bus, now func() time.Time) *cache.Cache {
	return cache.New(cache.Options{
		Now:            now,
		MaxBytes:       int64(c.MaxBytes),
		MaxObjectBytes: int64(c.MaxObjectBytes),
		OnEvent: func(e cache.Event) {
			ev := event.Event{Route: e.Route, Time: e.At, Evidence: map[string]any{
				"stale_answers": e.StaleAnswers, "origin_errors": e.OriginErrors, "evidence": e.Evidence,
			}}
			if e.Kind == cache.EventMaskingStarted {
				ev.Type, ev.Severity = event.StaleStarted, event.Warning
				ev.Message = "route answers with stale copies because its origin fails"
			} else {
				ev.Type = event.StaleEnded
				ev.Message = "route stopped answering with stale copies"
				ev.Evidence["stale_seconds"] = e.Duration.Seconds()
			}
			bus.Emit(ev)
		},
	})
}

// Events is the server's event bus.
func (s *Server) Events() *event.Bus { return s.bus }

// Monitor is the server's health monitor.
func (s *Server) Monitor() *health.Monitor { return s.monitor }

// Start binds every listener and the admin address and starts the
// background components. On error nothing is left listening or running.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt := s.cur.Load()
	cfg := rt.Config
	s.raiseFileLimit()
	s.group.Start(context.Background())
	for _, lc := range rt.Listeners {
		l, err := s.bind(lc.Listener)
		if err != nil {
			s.abortLocked()
			return err
		}
		s.listeners[lc.Name] = l
	}
	if cfg.Admin.Listen != "off" {
		if err := s.startAdmin(cfg.Admin); err != nil {
			s.abortLocked()
			return err
		}
	}
	s.alerts = alert.New(rt.Webhooks, alert.Options{Log: s.log, StatusURL: statusURL(s.adminAddr)})
	s.bus.Subscribe(s.alerts.Notify)
	s.group.Go("health monitor", s.monitor.Run)
	s.group.Go("dns refresh", s.dns.Run)
	s.group.Go("cache", s.cache.Run)
	s.group.Go("log aggregator", s.agg.Run)
	s.group.Go("webhooks", s.alerts.Run)
	s.group.Go("access log", s.access.Run)
	s.group.Go("resource exhaustion", s.local.Run)
	s.group.Go("certificate expiry", s.watchCertificates)
	if s.acme != nil {
		s.acme.SetNames(rt.ACMENames())
		s.group.Go("acme", s.acme.Run)
	}
	for _, c := range s.opts.components {
		s.group.Go(c.name, c.run)
	}
	for _, l := range s.listeners {
		s.serve(l)
	}
	s.runSharedLocked(rt)
	if iv := sdnotify.WatchdogInterval(); iv > 0 && s.notify != nil {
		s.group.Go("watchdog", func(ctx context.Context) error {
			return s.notify.RunWatchdog(ctx, iv, func() bool { return s.cur.Load() != nil })
		})
	}
	s.running = true
	s.notify.Ready(fmt.Sprintf("serving %d listeners, config %s", len(s.listeners), rt.Hash))
	s.log.Info("sturdy started", "listeners", len(s.listeners), "admin", s.adminAddr, "config", cfg.File, "config_hash", rt.Hash)
	return nil
}

// abortLocked undoes a Start that failed half way.
func (s *Server) abortLocked() {
	for _, l := range s.listeners {
		l.sock.Close()
		if l.h3 != nil {
			l.h3.pc.Close()
		}
	}
	if s.admin != nil {
		s.admin.Close()
	}
	s.group.Stop()
	s.cur.Load().Close()
}

// Addr returns the bound address of a listener (useful with port 0).
func (s *Server) Addr(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.listeners[name]; l != nil {
		return l.sock.Addr().String()
	}
	return ""
}

// HTTP3Addr returns the bound UDP address of a listener's HTTP/3, or ""
// when it has none.
func (s *Server) HTTP3Addr(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.listeners[name]; l != nil && l.h3 != nil {
		return l.h3.pc.LocalAddr().String()
	}
	return ""
}

// AdminAddr returns the bound admin address, or "" when it is off.
func (s *Server) AdminAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.adminAddr
}

// Reload applies a new, already validated config. Requests in flight finish
// on the config they started with; new requests see the new one as soon as
// it is swapped in. Hosts present in both configs keep their runtime state.
func (s *Server) Reload(cfg *config.Config) error {
	// New host names are looked up before the lock: /status and the admin
	// API must not wait on a slow resolver.
	s.notify.Reloading()
	s.dns.Prepare(hostAddrs(cfg))
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() { s.notify.Ready(s.reloadStatusLocked()) }()
	if s.draining.Load() {
		return errors.New("shutting down: reload refused")
	}
	old := s.cur.Load()
	// Everything that can fail happens before anything live changes: a
	// refused reload leaves the running config exactly as it was.
	rt, err := compile.Compile(cfg, old, s.env())
	if err != nil {
		s.reloadFailedLocked(err)
		return err
	}
	// Bind new sockets before swapping, so that a port conflict leaves the
	// old config serving. A listener keeps its socket while its address
	// stays (under any name); its settings may change.
	next := map[string]*listener{}
	kept := map[*listener]bool{}
	var bound []*listener
	for _, lc := range cfg.Listeners {
		if l := s.keepable(lc, kept); l != nil {
			next[lc.Name] = l
			kept[l] = true
			continue
		}
		l, err := s.bind(lc)
		if err != nil {
			for _, b := range bound {
				b.sock.Close()
				if b.h3 != nil {
					b.h3.pc.Close()
				}
			}
			rt.Discard(old)
			s.reloadFailedLocked(err)
			return err
		}
		bound = append(bound, l)
		next[lc.Name] = l
	}
	s.cur.Store(rt) // the one step that publishes the new config
	s.monitor.Wake()
	if s.running {
		s.runSharedLocked(rt)
	}
	for _, w := range rt.Warnings {
		s.log.Warn("config", "warning", w.Error())
	}
	if s.acme != nil {
		s.acme.SetNames(rt.ACMENames())
	}
	if !reflect.DeepEqual(old.Config.ACME, cfg.ACME) {
		s.log.Warn("the acme section changed; it takes effect when sturdy restarts (the listeners' other settings and names apply now)")
	}
	s.resolveNames(cfg)
	if s.running {
		for _, l := range bound {
			s.serve(l)
		}
	}
	grace := cfg.ShutdownGrace.D()
	for _, l := range s.listeners {
		if !kept[l] {
			s.retire(l, grace)
		}
	}
	for _, lc := range cfg.Listeners {
		if l := next[lc.Name]; kept[l] {
			s.reconfigure(l, lc, grace)
		}
	}
	old.Retire(rt)
	s.listeners = next
	if s.alerts != nil {
		s.alerts.Reconfigure(rt.Webhooks)
	}
	if err := s.access.Reopen(); err != nil {
		s.log.Warn("access log could not be reopened", "err", err)
	}
	s.reloads.OK++
	s.reloads.Last, s.reloads.LastErr = time.Now(), ""
	s.bus.Emit(event.Event{
		Type: event.ReloadApplied, Message: "config reloaded",
		Evidence: map[string]any{"config": cfg.File, "config_hash": rt.Hash, "previous_hash": old.Hash},
	})
	return nil
}

// reloadStatusLocked is the status line after a reload.
func (s *Server) reloadStatusLocked() string {
	hash := s.cur.Load().Hash
	if s.reloads.LastErr != "" {
		return "reload refused, config " + hash + " keeps serving: " + s.reloads.LastErr
	}
	return fmt.Sprintf("serving %d listeners, config %s", len(s.listeners), hash)
}

func (s *Server) reloadFailed(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reloadFailedLocked(err)
}

// reloadFailedLocked counts and announces a refused reload.
func (s *Server) reloadFailedLocked(err error) {
	s.reloads.Failed++
	s.reloads.Last, s.reloads.LastErr = time.Now(), err.Error()
	s.bus.Emit(event.Event{
		Type: event.ReloadRefused, Severity: event.Warning,
		Message:  "reload refused; the previous config keeps serving",
		Evidence: map[string]any{"error": err.Error(), "serving_hash": s.cur.Load().Hash},
	})
}

// ReopenLogs reopens the access log file (SIGUSR1, after logrotate
// renamed it); sturdy's own log is standard error.
func (s *Server) ReopenLogs() error { return s.access.Reopen() }

// Shutdown stops accepting, lets in-flight requests finish until ctx ends,
// then closes what is left and stops every background component. It
// returns once all of them have stopped.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	s.notify.Stopping("draining in-flight requests")
	s.mu.Lock()
	ls := make([]*listener, 0, len(s.listeners))
	for _, l := range s.listeners {
		ls = append(ls, l)
	}
	admin := s.admin
	s.mu.Unlock()

	for _, l := range ls {
		l.sock.Close() // no new connections from here on
	}
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for _, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The connection the loop accepted as the socket closed
			// still goes to the server, which stops after it.
			awaitClosed(ctx, l.accepting)
			if err := l.cur.Load().shutdown(ctx); err != nil {
				firstErr.CompareAndSwap(nil, err)
			}
		}()
		if l.h3 != nil {
			wg.Go(func() {
				if err := l.h3.shutdown(ctx); err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
			})
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if n := s.upgrades.Shutdown(ctx); n > 0 {
			s.log.Info("closed upgraded connections still open at the end of the grace period", "connections", n)
		}
	}()
	wg.Wait()
	if admin != nil {
		shutCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		admin.Shutdown(shutCtx)
		cancel()
	}
	if err := s.group.Stop(); err != nil {
		s.log.Error("a component failed", "err", err)
	}
	s.cur.Load().Close()
	if err, _ := firstErr.Load().(error); err != nil {
		return fmt.Errorf("shutdown grace ended with requests still in flight: %w", err)
	}
	return nil
}

// drainDelay is shutdown_delay: /readyz fails at once while the listeners
// keep accepting and serving, so that load balancers take sturdy out of
// rotation before it stops listening.
func (s *Server) drainDelay() {
	s.draining.Store(true)
	if s.handedOver.Load() {
		return
	}
	s.notify.Stopping("not ready; serving for shutdown_delay")
	d := s.cur.Load().Config.ShutdownDelay.D()
	if d <= 0 {
		return
	}
	s.log.Info("shutting down: readiness fails now; still serving for shutdown_delay", "delay", d.String())
	time.Sleep(d)
}

// HandOver says a new process took over the listening sockets (binary
// upgrade): the shutdown that follows skips shutdown_delay.
func (s *Server) HandOver() { s.handedOver.Store(true) }

// Run starts the server (unless Start was called), serves until ctx ends,
// then shuts down within the configured grace. Each receive on reload
// re-reads the config (SIGHUP).
func (s *Server) Run(ctx context.Context, reload <-chan struct{}) error {
	s.mu.Lock()
	started := s.running
	s.mu.Unlock()
	if !started {
		if err := s.Start(); err != nil {
			return err
		}
	}
	for {
		select {
		case <-reload:
			s.ReloadFile() // a refusal is logged and announced as an event
		case <-ctx.Done():
			s.drainDelay()
			grace := s.cur.Load().Config.ShutdownGrace.D()
			s.log.Info("shutting down", "grace", grace.String())
			sctx, cancel := context.WithTimeout(context.Background(), grace)
			defer cancel()
			err := s.Shutdown(sctx)
			s.log.Info("stopped")
			return err
		}
	}
}
