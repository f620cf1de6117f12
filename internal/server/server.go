// Package server wires a config into running listeners: it compiles the
// config, serves each listener and the admin listener, swaps configs on
// reload without dropping a request, and drains on shutdown.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sturdyproxy/sturdy/internal/accesslog"
	"github.com/sturdyproxy/sturdy/internal/alert"
	"github.com/sturdyproxy/sturdy/internal/cache"
	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/edge"
	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/logagg"
	"github.com/sturdyproxy/sturdy/internal/proxy"
	"github.com/sturdyproxy/sturdy/internal/resolve"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// Server runs one sturdy instance.
type Server struct {
	log     *slog.Logger
	snap    atomic.Pointer[proxy.Snapshot]
	bus     *event.Bus
	monitor *health.Monitor
	cache   *cache.Cache // shared by every route that opts in
	edge    *edge.Counters
	agg     *logagg.Aggregator
	alerts  *alert.Dispatcher
	access  *accesslog.Logger // nil when off
	dns     *resolve.Resolver
	load    func() (*config.Config, error)
	started time.Time

	// draining is set once shutdown begins; /readyz reports it.
	draining atomic.Bool

	// mu guards the fields below. Only Start, Reload and Shutdown take it,
	// never the request path.
	mu        sync.Mutex
	cfg       *config.Config
	rt        *runtime
	listeners map[string]*listener
	admin     *http.Server
	adminAddr string
	wg        sync.WaitGroup // one per serving goroutine
	reloads   view.Reloads
}

type listener struct {
	cfg  config.Listener
	srv  *http.Server
	ln   net.Listener
	cert atomic.Pointer[tls.Certificate]
}

// Option adjusts a Server at construction.
type Option func(*options)

type options struct {
	lookup resolve.Lookup
}

// WithLookup replaces the system resolver for pool host names (tests).
func WithLookup(l resolve.Lookup) Option { return func(o *options) { o.lookup = l } }

// New compiles cfg. Nothing listens until Start; the health monitor runs
// from here until Shutdown.
func New(cfg *config.Config, log *slog.Logger, opts ...Option) (*Server, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	access, err := openAccessLog(cfg.Log.Access, log)
	if err != nil {
		return nil, err
	}
	bus := event.NewBus(log, 200, nil)
	s := &Server{
		log: log, cfg: cfg, listeners: map[string]*listener{}, bus: bus,
		monitor: health.NewMonitor(cfg.Attribution, bus, 0),
		cache:   newCache(cfg.Cache, bus),
		edge:    new(edge.Counters),
		agg:     logagg.New(log, logagg.Options{Interval: cfg.Log.AggregateInterval.D()}),
		access:  access,
		dns:     resolve.New(o.lookup, cfg.DNS.Refresh.D(), cfg.DNS.Timeout.D(), bus),
		started: time.Now(),
	}
	s.monitor.SetDialer(s.dns.DialContext)
	rt, err := s.build(cfg, nil)
	if err != nil {
		s.monitor.Close()
		s.cache.Close()
		s.access.Close()
		return nil, err
	}
	s.rt = rt
	s.resolveNames(cfg)
	s.monitor.Apply(rt.health)
	rt.applyRouteBits()
	s.snap.Store(rt.snap)
	return s, nil
}

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
func newCache(c config.Cache, bus *event.Bus) *cache.Cache {
	return cache.New(cache.Options{
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

// Start binds every listener and the admin address. On error nothing is
// left listening.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, lc := range s.cfg.Listeners {
		l, err := s.startListener(lc)
		if err != nil {
			s.closeAllLocked()
			return err
		}
		s.listeners[lc.Name] = l
	}
	if s.cfg.Admin.Listen != "off" {
		if err := s.startAdmin(s.cfg.Admin); err != nil {
			s.closeAllLocked()
			return err
		}
	}
	s.alerts = alert.New(s.cfg.Webhooks, alert.Options{Log: s.log, StatusURL: statusURL(s.adminAddr)})
	s.bus.Subscribe(s.alerts.Notify)
	s.agg.Start()
	s.dns.Start()
	s.log.Info("sturdy started", "listeners", len(s.listeners), "admin", s.adminAddr, "config", s.cfg.File, "config_hash", s.cfg.Hash)
	return nil
}

// Addr returns the bound address of a listener (useful with port 0).
func (s *Server) Addr(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.listeners[name]; l != nil {
		return l.ln.Addr().String()
	}
	return ""
}

// AdminAddr returns the bound admin address, or "" when it is off.
func (s *Server) AdminAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.adminAddr
}

func (s *Server) startListener(lc config.Listener) (*listener, error) {
	ln, err := net.Listen("tcp", lc.Listen)
	if err != nil {
		return nil, fmt.Errorf("listener %s: cannot listen on %s: %w", lc.Name, lc.Listen, err)
	}
	l := &listener{cfg: lc, ln: ln}
	l.srv = &http.Server{
		Handler:           &proxy.Handler{Listener: lc.Name, TLS: lc.TLS != nil, Snapshot: &s.snap},
		ReadHeaderTimeout: lc.ReadHeaderTimeout.D(),
		IdleTimeout:       lc.IdleTimeout.D(),
		MaxHeaderBytes:    int(lc.MaxHeaderBytes),
		// Per-connection errors (TLS handshakes from scanners and the like)
		// are noise at info level.
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	if lc.TLS != nil {
		if err := l.loadCert(); err != nil {
			ln.Close()
			return nil, fmt.Errorf("listener %s: %w", lc.Name, err)
		}
		l.srv.TLSConfig = &tls.Config{
			MinVersion:     tls.VersionTLS12,
			NextProtos:     []string{"h2", "http/1.1"},
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return l.cert.Load(), nil },
		}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var err error
		if lc.TLS != nil {
			err = l.srv.ServeTLS(ln, "", "")
		} else {
			err = l.srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("listener stopped", "listener", lc.Name, "err", err)
		}
	}()
	s.log.Info("listening", "listener", lc.Name, "addr", ln.Addr().String(), "tls", lc.TLS != nil)
	return l, nil
}

func (l *listener) loadCert() error {
	c, err := tls.LoadX509KeyPair(l.cfg.TLS.Cert, l.cfg.TLS.Key)
	if err != nil {
		return fmt.Errorf("cannot load certificate: %w", err)
	}
	l.cert.Store(&c)
	return nil
}

// sameSocket reports whether a listener can keep its socket across a reload.
func sameSocket(a, b config.Listener) bool {
	return a.Listen == b.Listen && (a.TLS == nil) == (b.TLS == nil) &&
		a.ReadHeaderTimeout == b.ReadHeaderTimeout && a.IdleTimeout == b.IdleTimeout &&
		a.MaxHeaderBytes == b.MaxHeaderBytes
}

// Reload applies a new, already validated config. Requests in flight finish
// on the config they started with; new requests see the new one as soon as
// it is swapped in. Hosts present in both configs keep their runtime state.
func (s *Server) Reload(cfg *config.Config) error {
	// New host names are looked up before the lock: /status and the admin
	// API must not wait on a slow resolver.
	s.dns.Prepare(hostAddrs(cfg))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining.Load() {
		return errors.New("shutting down: reload refused")
	}
	// Everything that can fail happens before anything live changes: a
	// refused reload leaves the running config exactly as it was.
	rt, err := s.build(cfg, s.rt)
	if err != nil {
		s.reloadFailedLocked(err)
		return err
	}
	certs := map[string]*tls.Certificate{}
	for _, lc := range cfg.Listeners {
		if old := s.listeners[lc.Name]; old != nil && sameSocket(old.cfg, lc) && lc.TLS != nil {
			c, err := tls.LoadX509KeyPair(lc.TLS.Cert, lc.TLS.Key)
			if err != nil {
				err = fmt.Errorf("listener %s: cannot load certificate: %w", lc.Name, err)
				s.reloadFailedLocked(err)
				return err
			}
			certs[lc.Name] = &c
		}
	}
	// Bind new sockets before swapping, so that a port conflict leaves the
	// old config serving.
	next := map[string]*listener{}
	var started []*listener
	for _, lc := range cfg.Listeners {
		if old := s.listeners[lc.Name]; old != nil && sameSocket(old.cfg, lc) {
			next[lc.Name] = old
			continue
		}
		l, err := s.startListener(lc)
		if err != nil {
			closeListeners(started)
			s.reloadFailedLocked(err)
			return err
		}
		started = append(started, l)
		next[lc.Name] = l
	}
	for _, lc := range cfg.Listeners {
		if l := next[lc.Name]; l == s.listeners[lc.Name] {
			l.cfg = lc
			if c := certs[lc.Name]; c != nil {
				l.cert.Store(c)
			}
		}
	}
	// Publish the routes first so that a reused listener never sees a
	// snapshot without its table, then retire what is gone.
	s.resolveNames(cfg)
	s.monitor.Configure(cfg.Attribution)
	s.monitor.Apply(rt.health)
	rt.applyRouteBits()
	s.snap.Store(rt.snap)
	grace := cfg.ShutdownGrace.D()
	for name, old := range s.listeners {
		if next[name] != old {
			s.wg.Add(1)
			go s.retire(old, grace)
		}
	}
	closeUnused(s.rt, rt)
	old := s.cfg
	s.listeners, s.rt, s.cfg = next, rt, cfg
	if s.alerts != nil {
		s.alerts.Reconfigure(cfg.Webhooks)
	}
	if err := s.access.Reopen(); err != nil {
		s.log.Warn("access log could not be reopened", "err", err)
	}
	s.reloads.OK++
	s.reloads.Last, s.reloads.LastErr = time.Now(), ""
	s.bus.Emit(event.Event{
		Type: event.ReloadApplied, Message: "config reloaded",
		Evidence: map[string]any{"config": cfg.File, "config_hash": cfg.Hash, "previous_hash": old.Hash},
	})
	return nil
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
		Evidence: map[string]any{"error": err.Error(), "serving_hash": s.cfg.Hash},
	})
}

// retire stops a listener the new config no longer has, letting its
// in-flight requests finish within grace. The caller did s.wg.Add(1).
func (s *Server) retire(l *listener, grace time.Duration) {
	defer s.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := l.srv.Shutdown(ctx); err != nil {
		l.srv.Close()
	}
}

func closeListeners(ls []*listener) {
	for _, l := range ls {
		l.srv.Close()
	}
}

func (s *Server) closeAllLocked() {
	for _, l := range s.listeners {
		l.srv.Close()
	}
	if s.admin != nil {
		s.admin.Close()
	}
}

// Shutdown stops accepting, lets in-flight requests finish until ctx ends,
// then closes what is left. It returns once every listener has stopped.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	s.mu.Lock()
	ls := make([]*listener, 0, len(s.listeners))
	for _, l := range s.listeners {
		ls = append(ls, l)
	}
	admin := s.admin
	s.mu.Unlock()

	var wg sync.WaitGroup
	var firstErr atomic.Value
	for _, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.srv.Shutdown(ctx); err != nil {
				firstErr.CompareAndSwap(nil, err)
				l.srv.Close()
			}
		}()
	}
	wg.Wait()
	s.monitor.Close()
	s.dns.Close()
	s.cache.Close()
	s.agg.Stop()
	if s.alerts != nil {
		s.alerts.Stop(ctx)
	}
	s.access.Close()
	s.mu.Lock()
	for _, tr := range s.rt.transports {
		tr.Close()
	}
	s.mu.Unlock()
	if admin != nil {
		shutCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		admin.Shutdown(shutCtx)
		cancel()
	}
	s.wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return fmt.Errorf("shutdown grace ended with requests still in flight: %w", err)
	}
	return nil
}

// Run starts the server, serves until ctx ends, then shuts down within the
// configured grace. Each receive on reload re-reads the config (SIGHUP).
func (s *Server) Run(ctx context.Context, reload <-chan struct{}) error {
	if err := s.Start(); err != nil {
		s.monitor.Close()
		s.dns.Close()
		s.cache.Close()
		s.access.Close()
		return err
	}
	for {
		select {
		case <-reload:
			s.ReloadFile() // a refusal is logged and announced as an event
		case <-ctx.Done():
			s.mu.Lock()
			grace := s.cfg.ShutdownGrace.D()
			s.mu.Unlock()
			s.log.Info("shutting down", "grace", grace.String())
			sctx, cancel := context.WithTimeout(context.Background(), grace)
			defer cancel()
			err := s.Shutdown(sctx)
			s.log.Info("stopped")
			return err
		}
	}
}
