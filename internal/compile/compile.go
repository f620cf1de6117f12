// Package compile turns a validated config into the runtime that serves it.
// It is the one place where config becomes runtime state: it reads every
// file the config names (certificates, CA bundles, deny lists, sorry
// pages), parses every string, builds the pools (carrying host state and
// warm upstream connections over from the previous runtime), the routes,
// the routing tables and the edge, and reports every problem with its file,
// line and key path.
//
// Compiling changes nothing live and starts no goroutine: `sturdy check`,
// `sturdy run`, reloads and `sturdy drill` all compile the same way, and the
// server publishes a result with one atomic swap. A refused reload leaves
// no trace.
package compile

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/textproto"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/access"
	"github.com/sturdyproxy/sturdy/internal/access/ratelimit"
	"github.com/sturdyproxy/sturdy/internal/cache"
	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/edge"
	"github.com/sturdyproxy/sturdy/internal/edge/acme"
	"github.com/sturdyproxy/sturdy/internal/edge/certs"
	"github.com/sturdyproxy/sturdy/internal/edge/forcehttps"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/ops/alert"
	"github.com/sturdyproxy/sturdy/internal/proxy"
	"github.com/sturdyproxy/sturdy/internal/proxy/accesslog"
	"github.com/sturdyproxy/sturdy/internal/proxy/spool"
	"github.com/sturdyproxy/sturdy/internal/route"
	"github.com/sturdyproxy/sturdy/internal/route/subst"
)

// Env is what a runtime is built on: the long-lived parts of a running
// sturdy that outlive any one config. Zero fields are fine for `check`
// and tests: a nil Monitor gets a private one, a nil Cache leaves cached
// routes uncached, a nil Dial dials directly.
type Env struct {
	Monitor *health.Monitor
	Cache   *cache.Cache
	Agg     proxy.Aggregator
	Access  *accesslog.Logger
	Edge    *edge.Counters
	// Dial makes the dial function of upstream clients (the background
	// DNS resolver's); probes get theirs from the monitor.
	Dial health.Dialer
	// Names has the addresses of the pools' host and SRV names; nil
	// compiles each host as written.
	Names Names
	// OnShared receives the shared rate-limit store's reachability
	// changes; nil drops them.
	OnShared func(ratelimit.SharedEvent)
	// Instance identifies the running sturdy in X-Sturdy-Hops (loop
	// detection); "" turns loop detection off.
	Instance string
	// Local hears of sturdy's own resource exhaustion on the request
	// path; nil drops it.
	Local proxy.LocalErrors
	// ACME supplies the certificates of listeners with tls.acme and
	// answers HTTP-01 challenges. nil: the compile makes one from the acme
	// section (Runtime.ACME), started by whoever runs it (check never
	// does); OnACME and ACMELog go into it.
	ACME *acme.Manager
	// OnACME receives what a manager made by the compile reports; nil
	// drops it.
	OnACME func(acme.Event)
	// ACMELog receives the ACME library's messages of a manager made by
	// the compile; nil discards them.
	ACMELog *slog.Logger
}

// Runtime is one compiled config. It must not change once published.
type Runtime struct {
	Config *config.Config
	// Hash identifies what serves: the config's bytes and the content of
	// every file it names (certificates, deny list, sorry pages, ...), so
	// that a reload that picked up a changed file shows a new hash. It is
	// the config_hash of status, metrics and logs.
	Hash string
	// Proxy is what the request path reads.
	Proxy *proxy.Snapshot
	// Health is what the health monitor watches.
	Health *health.Set
	// Pools and Routes are in config order.
	Pools  []*health.Pool
	Routes []*proxy.Route
	// Listeners are in config order.
	Listeners []Listener
	// Webhooks receive events.
	Webhooks []alert.Webhook
	// Access is every route's access controls and the zones they share.
	Access *access.Compiled
	// ACME is the manager of the listeners with tls.acme: Env.ACME, or the
	// one made from the config's acme section; nil when neither.
	ACME *acme.Manager
	// Warnings are problems that do not stop the config from serving
	// (certificates expiring soon, names no certificate covers, ...).
	Warnings []config.Error

	poolBy        map[string]*health.Pool
	serverNames   map[string]*serverNames // by pool name: TLS pools with hosts from names
	routeBy       map[string]*proxy.Route
	upstreams     map[upstreamKey]upstreamClient
	authTransport *http.Transport // forward auth to a URL (not a pool)
	mirrors       []*proxy.Mirror // own their copies in flight
	spool         *spool.Dir      // client_body_temp; nil when no route buffers bodies there
}

// spool opens client_body_temp when a route buffers bodies there: the
// previous runtime's when the settings are the same, so that the bound
// counts the bodies already waiting.
func (c *compiler) spool() *spool.Dir {
	used := false
	for _, r := range c.cfg.Routes {
		used = used || r.RequestBuffering && r.BufferRequestBody > 0
	}
	if !used {
		return nil
	}
	t := c.cfg.ClientBodyTemp
	if p := c.prev; p != nil && p.spool != nil && p.spool.Path() == t.Path && p.spool.Max() == int64(t.MaxSize) {
		return p.spool
	}
	d, err := spool.Open(t.Path, int64(t.MaxSize))
	if err != nil {
		c.errorf("client_body_temp.path", "%v", err)
		return nil
	}
	return d
}

// Listener is one listener's settings with its certificates loaded.
type Listener struct {
	config.Listener
	// TLS chooses certificates and settings per handshake; nil for plain
	// HTTP.
	TLS *certs.Listener
}

// Pool returns the pool named name, or nil.
func (rt *Runtime) Pool(name string) *health.Pool { return rt.poolBy[name] }

// Listener returns the listener named name, or nil.
func (rt *Runtime) Listener(name string) *Listener {
	for i := range rt.Listeners {
		if rt.Listeners[i].Name == name {
			return &rt.Listeners[i]
		}
	}
	return nil
}

// Route returns the route named name, or nil.
func (rt *Runtime) Route(name string) *proxy.Route { return rt.routeBy[name] }

// Compile builds the runtime for cfg, a config that config.Load accepted.
// prev (nil on first load) lends host state, route state and upstream
// clients for what the two configs share; prev itself is not changed. On
// failure the error is a config.ErrorList.
func Compile(cfg *config.Config, prev *Runtime, env Env) (*Runtime, error) {
	return compileFrom(cfg, prev, env, os.ReadFile)
}

// compileFrom is Compile reading the files the config names through
// readFS (tests count the reads).
func compileFrom(cfg *config.Config, prev *Runtime, env Env, readFS func(string) ([]byte, error)) (*Runtime, error) {
	c := &compiler{cfg: cfg, prev: prev, env: env, readFS: readFS, poolTLS: map[string]poolTLS{}, cutters: map[string]*cutter{}}
	if c.env.Monitor == nil {
		c.env.Monitor = health.NewMonitor(health.Options{})
	}
	rt := &Runtime{
		Config:      cfg,
		poolBy:      map[string]*health.Pool{},
		routeBy:     map[string]*proxy.Route{},
		upstreams:   map[upstreamKey]upstreamClient{},
		serverNames: map[string]*serverNames{},
	}
	c.rt = rt
	attr := c.attributing()
	for i := range cfg.Pools {
		if p := c.pool(i, attr); p != nil {
			rt.Pools = append(rt.Pools, p)
			rt.poolBy[p.Name] = p
		}
	}
	rt.Health = &health.Set{Pools: rt.Pools, Attributing: attr}
	c.poolHosts()
	trusted := c.prefixes("trusted_proxies", cfg.TrustedProxies)
	if ao, err := acme.Compile(cfg, c.read); err != nil {
		c.errs = append(c.errs, err.(config.ErrorList)...)
	} else if ao != nil && c.env.ACME == nil {
		ao.OnEvent, ao.Log = env.OnACME, env.ACMELog
		c.env.ACME = acme.New(*ao)
	}
	rt.ACME = c.env.ACME
	rt.Listeners = c.listeners()
	rt.Webhooks = webhooks(cfg)
	rt.spool = c.spool()
	for i := range cfg.Routes {
		r := c.route(i)
		rt.Routes = append(rt.Routes, r)
		rt.routeBy[r.Name] = r
		rt.Health.Routes = append(rt.Health.Routes, r.Tracker)
	}
	c.access()
	deny := c.denyList()
	c.built = c.tables()
	format, err := accesslog.ParseFormat(cfg.Log.Access.Format, cfg.Log.Access.Fields)
	if err != nil {
		c.errorf("log.access."+strings.SplitN(err.Error(), ":", 2)[0], "%s", strings.TrimSpace(strings.SplitN(err.Error(), ":", 2)[1]))
	}
	if len(c.errs) > 0 {
		rt.Discard(prev)
		slices.SortStableFunc(c.errs, func(a, b config.Error) int { return a.Line - b.Line })
		return nil, c.errs
	}
	clientHeader := ""
	if kind, name, _ := config.ParseClientKey(cfg.Attribution.ClientKey); kind == "header" {
		clientHeader = textproto.CanonicalMIMEHeaderKey(name)
	}
	// After the warnings of the routes (static files, hidden routes).
	rt.Warnings = append(rt.Warnings, certs.Warnings(cfg, rt.tlsListeners(), time.Now())...)
	rt.Warnings = append(rt.Warnings, acme.Warnings(cfg)...)
	rt.Hash = c.contentHash()
	rt.Proxy = &proxy.Snapshot{
		Listeners:    c.proxyListeners(),
		Trusted:      trusted,
		ClientHeader: clientHeader,
		Edge:         edge.New(cfg.Edge.NonASCII == config.NonASCIIReject, deny, trusted, env.Edge),
		Access:       env.Access,
		AccessFormat: format,
		Untrusted:    headerSet(cfg.Edge.UntrustedHeaders),
		Instance:     env.Instance,
		Local:        env.Local,
	}
	return rt, nil
}

// headerSet is the set of names, in canonical form.
func headerSet(names []string) map[string]struct{} {
	out := make(map[string]struct{}, len(names))
	for _, n := range names {
		out[textproto.CanonicalMIMEHeaderKey(n)] = struct{}{}
	}
	return out
}

// Close releases the upstream clients of a runtime that will not serve
// (or no longer does): idle connections close, requests in flight finish.
func (rt *Runtime) Close() {
	for _, u := range rt.upstreams {
		u.Close()
	}
	if rt.authTransport != nil {
		rt.authTransport.CloseIdleConnections()
	}
	for _, m := range rt.mirrors {
		m.Close()
	}
}

// Discard releases what rt, a runtime that will never serve (a refused
// reload), holds of its own: what it shares with prev, the runtime that
// serves on, is prev's and stays open. Closing a shared upstream client
// would break every request of the running config to its pool (the
// HTTP/2 client refuses all requests once closed).
func (rt *Runtime) Discard(prev *Runtime) {
	if prev == nil {
		rt.Close()
		if rt.Access != nil && rt.Access.Shared != nil {
			rt.Access.Shared.Close()
		}
		return
	}
	lent := make(map[upstreamClient]bool, len(prev.upstreams))
	for _, u := range prev.upstreams {
		lent[u] = true
	}
	for _, u := range rt.upstreams {
		if !lent[u] {
			u.Close()
		}
	}
	if rt.authTransport != nil && rt.authTransport != prev.authTransport {
		rt.authTransport.CloseIdleConnections()
	}
	for _, m := range rt.mirrors {
		m.Close() // never shared: each runtime makes its own
	}
	if rt.Access != nil && rt.Access.Shared != nil && (prev.Access == nil || prev.Access.Shared != rt.Access.Shared) {
		rt.Access.Shared.Close()
	}
}

// Retire closes what rt has and next, which replaces it, does not share,
// and stops the upstream clients they share from reusing connections to
// addresses next's pools no longer have (a DNS name that moved).
func (rt *Runtime) Retire(next *Runtime) {
	for k, u := range rt.upstreams {
		if next.upstreams[k] != u {
			u.Close()
			continue
		}
		old, cur := rt.poolBy[k.pool], next.poolBy[k.pool]
		if old == nil || cur == nil {
			continue
		}
		f, ok := u.(addrForgetter)
		if !ok {
			continue
		}
		for _, h := range old.Hosts {
			if cur.Host(h.Addr) == nil {
				f.Forget(h.Addr)
			}
		}
	}
	if rt.authTransport != nil && rt.authTransport != next.authTransport {
		rt.authTransport.CloseIdleConnections()
	}
	// Copies of a replaced config's requests are cancelled: they are
	// fire and forget, and the new config has mirrors of its own.
	for _, m := range rt.mirrors {
		m.Close()
	}
}

// addrForgetter is an upstream client that can stop reusing connections
// to one address (the HTTP/1.1 client).
type addrForgetter interface{ Forget(addr string) }

// compiler collects the errors of one compile.
type compiler struct {
	cfg  *config.Config
	prev *Runtime
	env  Env
	rt   *Runtime
	errs config.ErrorList

	poolTLS  map[string]poolTLS // by pool name
	matches  []route.Match      // by route index
	poolHost []*subst.Template  // by pool index: host_header
	built    map[string]*route.Table[*proxy.Route]
	cutters  map[string]*cutter           // by pool name
	readFS   func(string) ([]byte, error) // os.ReadFile but in tests
	files    map[string]file              // by name: what read returned
	read1    []string                     // the names in files, in the order first read
}

func (c *compiler) errorf(path, format string, args ...any) {
	c.errs = append(c.errs, c.cfg.Errorf(path, format, args...))
}

// read returns the content of a file the config names, reading it on the
// first call only: the compile reads each file once and hashes the bytes it
// compiled (hash.go).
func (c *compiler) read(name string) ([]byte, error) {
	if f, ok := c.files[name]; ok {
		return f.b, f.err
	}
	b, err := c.readFS(name)
	if c.files == nil {
		c.files = map[string]file{}
	}
	c.files[name] = file{b, err}
	c.read1 = append(c.read1, name)
	return b, err
}

// file is a file's content as the compile read it, or why it could not.
type file struct {
	b   []byte
	err error
}

// readFile reads a file the config names at key path p; a failure is an
// error positioned there.
func (c *compiler) readFile(p, what, name string) ([]byte, bool) {
	b, err := c.read(name)
	if err != nil {
		c.errorf(p, "cannot read %s: %v", what, err)
		return nil, false
	}
	return b, true
}

func (c *compiler) attributing() *health.Attributing {
	a := c.cfg.Attribution
	if _, _, err := config.ParseClientKey(a.ClientKey); err != nil {
		c.errorf("attribution.client_key", "%v", err)
	}
	return &health.Attributing{
		Window:            a.Window.D(),
		ClientMinFailures: a.ClientMinFailures,
		RouteMinFailures:  a.RouteMinFailures,
		ShedClients:       a.ShedClients,
	}
}

func (c *compiler) prefixes(p string, list []string) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(list))
	for i, s := range list {
		pf, err := config.ParsePrefix(s)
		if err != nil {
			c.errorf(p+"["+strconv.Itoa(i)+"]", "%v", err)
			continue
		}
		out = append(out, pf)
	}
	return out
}

// denyList merges the inline deny list and the deny file (re-read on every
// reload).
func (c *compiler) denyList() []netip.Prefix {
	e := c.cfg.Edge
	deny := c.prefixes("edge.deny", e.Deny)
	if e.DenyFile == "" {
		return deny
	}
	b, ok := c.readFile("edge.deny_file", "the deny list", e.DenyFile)
	if !ok {
		return deny
	}
	more, err := config.ParseDenyList(b, e.DenyFile)
	if err != nil {
		c.errorf("edge.deny_file", "%v", err)
		return deny
	}
	for _, s := range more {
		pf, _ := config.ParsePrefix(s) // ParseDenyList checked each line
		deny = append(deny, pf)
	}
	return deny
}

func (c *compiler) listeners() []Listener {
	out := make([]Listener, len(c.cfg.Listeners))
	for i, lc := range c.cfg.Listeners {
		out[i].Listener = lc
		if lc.TLS == nil {
			continue
		}
		var src certs.Source
		if lc.TLS.ACME {
			src = c.acmeManager()
		}
		// A listener that could never complete a handshake is a config
		// error rather than a latent outage (incident 001).
		tl, err := certs.CompileListener(c.cfg, i, src, c.read)
		if err != nil {
			c.errs = append(c.errs, err.(config.ErrorList)...)
			continue
		}
		out[i].TLS = tl
	}
	return out
}

// acmeManager is the manager certificates from the CA come from.
func (c *compiler) acmeManager() *acme.Manager {
	if c.env.ACME == nil {
		c.env.ACME = acme.New(acme.Options{}) // never run: only to point handshakes at
	}
	return c.env.ACME
}

// tlsListeners are the compiled TLS listeners by name.
func (rt *Runtime) tlsListeners() map[string]*certs.Listener {
	out := map[string]*certs.Listener{}
	for _, l := range rt.Listeners {
		if l.TLS != nil {
			out[l.Name] = l.TLS
		}
	}
	return out
}

// ACMENames are the host names whose certificates the ACME manager must
// obtain for this runtime.
func (rt *Runtime) ACMENames() []string { return acme.NamesFor(rt.Config, rt.tlsListeners()) }

// ACMENamesOn are the ACME host names listener serves.
func (rt *Runtime) ACMENamesOn(listener string) []string {
	return acme.NamesOn(rt.Config, rt.tlsListeners(), listener)
}

// proxyListeners builds what the request path needs per listener: its
// routing table and what it answers before any route.
func (c *compiler) proxyListeners() map[string]*proxy.Listener {
	tables := c.built
	out := make(map[string]*proxy.Listener, len(c.cfg.Listeners))
	for i, lc := range c.cfg.Listeners {
		pl := &proxy.Listener{Table: tables[lc.Name], MergeSlashes: lc.MergesSlashes(), AllowUnderscores: lc.AllowUnderscoresInHeaders}
		if lc.RedirectHTTPS != nil {
			pl.Redirect = forcehttps.NewRedirector(lc.RedirectHTTPS)
		}
		if tl := c.rt.Listeners[i].TLS; tl != nil && tl.HSTS != "" {
			pl.HSTS = []string{tl.HSTS}
		}
		if lc.TLS == nil && c.cfg.ACME != nil && c.env.ACME != nil {
			pl.Challenge = c.env.ACME.HandleHTTPChallenge
		}
		out[lc.Name] = pl
	}
	return out
}

// tables builds each listener's routing table.
func (c *compiler) tables() map[string]*route.Table[*proxy.Route] {
	per := map[string][]*route.Entry[*proxy.Route]{}
	for i, rc := range c.cfg.Routes {
		for _, ln := range listenersOf(c.cfg, rc) {
			// An entry of its own per table: the table keeps its order.
			e := &route.Entry[*proxy.Route]{Hosts: rc.Hosts, Path: rc.Path, Match: c.matches[i], Default: rc.Default, Value: c.rt.Routes[i],
				SlashRedirect: rc.TrailingSlashRedirect == nil || *rc.TrailingSlashRedirect}
			per[ln] = append(per[ln], e)
		}
	}
	out := make(map[string]*route.Table[*proxy.Route], len(c.cfg.Listeners))
	for _, l := range c.cfg.Listeners {
		out[l.Name] = route.New(per[l.Name])
	}
	c.unreachable(out)
	return out
}

// unreachable reports routes that can never be chosen: an error when a
// route is hidden for every host it names on every listener it is on (the
// same match as a route above it, or one that implies it), a warning when
// only some of them.
func (c *compiler) unreachable(tables map[string]*route.Table[*proxy.Route]) {
	index := make(map[*proxy.Route]int, len(c.rt.Routes))
	for i, r := range c.rt.Routes {
		index[r] = i
	}
	type at struct{ listener, host string }
	hidden := make([]map[at]int, len(c.rt.Routes)) // route -> where -> by
	for _, l := range c.cfg.Listeners {
		for _, s := range tables[l.Name].Shadows() {
			i := index[s.Entry.Value]
			if hidden[i] == nil {
				hidden[i] = map[at]int{}
			}
			hidden[i][at{l.Name, s.Host}] = index[s.By.Value]
		}
	}
	for i, h := range hidden {
		if len(h) == 0 {
			continue
		}
		rc := c.cfg.Routes[i]
		p := "routes[" + strconv.Itoa(i) + "]"
		hosts := max(len(rc.Hosts), 1)
		var by int
		var where []string
		for a, j := range h {
			by = j
			where = append(where, strings.TrimSpace(a.host+" on "+a.listener))
		}
		slices.Sort(where)
		why := fmt.Sprintf("routes[%d] (%s) ranks above it and matches every request it matches (the same path and conditions, or ones that imply them); remove one, or tell them apart by host, path or conditions", by, c.cfg.Routes[by].Name)
		switch {
		case rc.Default:
			// Still the answer for hosts no route names.
		case len(h) == hosts*len(listenersOf(c.cfg, rc)):
			c.errorf(p, "can never be chosen: %s", why)
		default:
			c.rt.Warnings = append(c.rt.Warnings, c.cfg.Errorf(p, "never chosen for %s: %s", strings.Join(where, ", "), why))
		}
	}
}

// listenersOf names the listeners a route is served on.
func listenersOf(cfg *config.Config, rc config.Route) []string {
	if len(rc.Listeners) > 0 {
		return rc.Listeners
	}
	names := make([]string, len(cfg.Listeners))
	for i, l := range cfg.Listeners {
		names[i] = l.Name
	}
	return names
}

// sorry is a route's sorry page, read from its file when it has one.
func (c *compiler) sorry(i int, rc config.Route) proxy.Sorry {
	s := rc.Sorry
	var body []byte
	switch {
	case s.BodyFile != "":
		b, ok := c.readFile("routes["+strconv.Itoa(i)+"].sorry.body_file", "the sorry page", s.BodyFile)
		if !ok {
			return proxy.Sorry{}
		}
		body = b
	case s.Body != "":
		body = []byte(s.Body)
	default:
		body = config.DefaultSorryBody(rc.Name)
	}
	ct := s.ContentType
	if ct == "" {
		ct = "text/plain; charset=utf-8"
		if strings.HasPrefix(strings.TrimSpace(string(body)), "<") {
			ct = "text/html; charset=utf-8"
		}
	}
	return proxy.Sorry{
		Status:      s.Status,
		RetryAfter:  strconv.Itoa(int(max(s.RetryAfter.D().Seconds(), 1))),
		ContentType: ct,
		Body:        body,
	}
}

// off maps a stale cap to the cache's policy: in the config 0s turns a
// stale kind off, in the policy that is a negative cap.
func off(d config.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d.D()
}

// webhooks are the config's webhooks for the alert dispatcher.
func webhooks(cfg *config.Config) []alert.Webhook {
	out := make([]alert.Webhook, len(cfg.Webhooks))
	for i, w := range cfg.Webhooks {
		out[i] = alert.Webhook{Name: w.Name, URL: w.URL, Format: w.Format, Events: w.Events, Timeout: w.Timeout.D()}
	}
	return out
}
