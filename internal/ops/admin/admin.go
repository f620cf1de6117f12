// Package admin is the handler of the operators' listener: health endpoints
// for orchestrators (/livez, /readyz), Prometheus metrics, the status page
// and its JSON, and the runtime API that drains hosts and reloads the
// config. Reads are open to whoever can reach the listener; changes need
// the admin token and are refused from cross-origin browser pages, so that
// a web page open on an operator's laptop cannot drain production.
package admin

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sturdyproxy/sturdy/internal/ops/status"
	"github.com/sturdyproxy/sturdy/internal/ops/telemetry"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// Host modes an operator can set.
const (
	ModeDrain       = "drain"       // finish in-flight requests, take no new ones
	ModeMaintenance = "maintenance" // out of rotation, active checks paused
	ModeReady       = "ready"       // back to service (health checks decide from here)
)

// ErrUnknownHost is what Backend.SetHostMode wraps when the pool or host
// does not exist; the API answers 404 for it.
var ErrUnknownHost = errors.New("unknown pool or host")

// Backend is what the admin handler needs from the running server.
type Backend interface {
	// Status returns one consistent snapshot. It is called once per
	// request of /readyz, /api/status and /metrics.
	Status() view.Status
	// SetHostMode sets a host to one of the Mode constants. The error says
	// why it could not (wrap ErrUnknownHost for an unknown pool or host).
	SetHostMode(pool, addr, mode string) error
	// Reload re-reads, validates and applies the config file. When the new
	// config is invalid it returns the config.ErrorList and changes nothing.
	Reload() error
}

// Options configure the handler. The zero value is usable.
type Options struct {
	// Token guards the runtime API (Authorization: Bearer TOKEN). Empty
	// leaves the runtime API refused: there is no way to change state
	// without one.
	Token string
	// Gatherer is what /metrics serves. Default:
	// telemetry.NewRegistry(backend.Status).
	Gatherer prometheus.Gatherer
	// Loopback tells that the listener is on a loopback address. Then
	// requests must name the host by IP or as localhost, which keeps a web
	// page from reading the admin API through DNS rebinding.
	Loopback bool
	// Log receives one line per runtime API change (an audit trail).
	Log *slog.Logger
	// Demo, when set, is the demo's controls (sturdy demo only): GET
	// /api/demo is open like the other reads, POST /api/demo/... is
	// guarded like the runtime API (token, same origin).
	Demo http.Handler
}

// New returns the admin handler.
func New(b Backend, o Options) http.Handler {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Gatherer == nil {
		o.Gatherer = telemetry.NewRegistry(b.Status)
	}
	a := &api{b: b, token: o.Token, log: o.Log, csrf: http.NewCrossOriginProtection()}
	a.csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusForbidden, errorBody{Error: "cross-origin request refused: the runtime API does not take requests from other web pages"})
	}))

	mux := http.NewServeMux()
	mux.HandleFunc("GET /livez", livez)
	mux.HandleFunc("GET /readyz", a.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		ErrorLog:            slog.NewLogLogger(o.Log.Handler(), slog.LevelWarn),
		MaxRequestsInFlight: 4,
	}))
	page := status.New(b.Status)
	mux.Handle("GET "+status.PagePath, page)
	mux.Handle("GET "+status.PagePath+"/", page)
	mux.Handle("GET "+status.JSONPath, page)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		status.RelativeRedirect(w, "status", http.StatusFound)
	})
	mux.Handle("POST /api/hosts/{pool}/{addr}/{mode}", a.guard(a.setHostMode))
	mux.Handle("POST /api/reload", a.guard(a.reload))
	// Profiles cost CPU while they run and reveal internals, so they
	// take the token like the runtime API.
	mux.Handle("GET /debug/pprof/", a.guard(pprof.Index))
	mux.Handle("GET /debug/pprof/cmdline", a.guard(pprof.Cmdline))
	mux.Handle("GET /debug/pprof/profile", a.guard(pprof.Profile))
	mux.Handle("GET /debug/pprof/symbol", a.guard(pprof.Symbol))
	mux.Handle("GET /debug/pprof/trace", a.guard(pprof.Trace))
	if o.Demo != nil {
		mux.Handle("GET /api/demo", o.Demo)
		mux.Handle("POST /api/demo/", a.guard(func(w http.ResponseWriter, r *http.Request) {
			a.log.Info("admin: demo control", "path", r.URL.Path, "remote", r.RemoteAddr)
			o.Demo.ServeHTTP(w, r)
		}))
	}

	var h http.Handler = mux
	if o.Loopback {
		h = loopbackHost(h)
	}
	return noStore(h)
}

// noStore keeps every admin answer out of caches: a cached /readyz or
// status is a lie (incident 004).
func noStore(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

func livez(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("ok\n"))
}
