package translate

import (
	"fmt"

	"github.com/sturdyproxy/sturdy/internal/config"
	"slices"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
)

// route is a sturdy route made from one nginx location.
type route struct {
	name      string
	listeners []string
	hosts     []string
	path      string
	// match is the route's match.path, nil for a plain path prefix.
	match    *config.PathMatch
	def      bool
	pool     *pool
	connect  time.Duration // 0: sturdy's default
	response time.Duration
	maxBody  string // "" : sturdy's default
	// maxBodyDefault reports that maxBody is nginx's default, not written.
	maxBodyDefault bool
	// streamBody is nginx's proxy_request_buffering off.
	streamBody bool
	// noUpgrade: nginx sent the backend no Upgrade header here, so it
	// never switched protocols (upgrades: []).
	noUpgrade bool
	tries     int // 0: sturdy's default
	comments  []string
	// sorryFile is the error_page file for 502/503/504, "" for sturdy's default page.
	sorryFile string
	// sorryBody is the refusal page of a refusal route.
	sorryBody string
	// cache is set when the location used proxy_cache.
	cache *routeCache
	// static and compress are the route's files and compression, nil when none.
	static   *staticPlan
	compress *compressPlan
	// hsts is the add_header Strict-Transport-Security in effect, nil when none.
	hsts *nginx.Directive
	// guard holds its access rules (access.go), rateLimit and connLimit
	// its limits (limits.go).
	guard      guard
	clientCert bool // a verified client certificate is required (tls.go)
	rateLimit  []config.RateLimit
	connLimit  []config.ConnLimit
	// Request and response rules (headers.go, response.go).
	hostHeader string // "" : the client's Host
	reqSet     []headerRule
	reqRemove  []string
	// forwarding is forwarding_headers: nil for all of sturdy's.
	forwarding []string
	respAdd    []headerRule
	hide       []string
	requestID  *config.RequestID
	rewrite    *config.Rewrite  // the path the backend gets (rewrite.go)
	redirect   *config.Redirect // the route answers with a redirect (answer.go)
	respond    *config.Respond  // the route answers itself (fixed.go)
	methods    []string         // match.methods (methodif.go)
	// encodedSlashes: nginx forwarded paths with %2F as sent (a
	// proxy_pass without a URI part).
	encodedSlashes bool
	errorPages     []config.ErrorPage
	backends       []backendPlan // several pools (maps.go); pool is then the first
	// block is the nginx block the route was made from (nil for a server's catch-all).
	block *Block
	// keepNoSlash is set for a route of a location that does not pass its
	// requests on (files, a return): nginx redirects /x to /x/ only for
	// one that does, so the route turns sturdy's redirect off.
	keepNoSlash bool
}

// passers are the directives that make nginx redirect a prefix location's
// path without its trailing slash to the path with it.
var passers = []string{"proxy_pass", "fastcgi_pass", "uwsgi_pass", "scgi_pass", "memcached_pass", "grpc_pass"}

// passes reports whether location l passes its requests on itself.
func passes(l *nginx.Location) bool {
	return slices.ContainsFunc(passers, func(n string) bool { return len(l.Local(n)) > 0 })
}

// routeCache is what proxy_cache and proxy_cache_use_stale become.
type routeCache struct {
	staleOnError bool // proxy_cache_use_stale listed error, timeout or http_5xx
	comment      string
}

// routes plans every server block and location and makes the routes.
func (t *translator) routes() {
	t.routeNames = map[string]bool{}
	t.routeKeys = map[string]string{}
	for _, srv := range t.site.Servers {
		sp := t.planServer(srv)
		if rd := t.redirected[srv]; rd.serverWide() {
			// nginx answered every request before choosing a location.
			for _, l := range srv.Locations {
				t.use(l.Dir)
				t.useTree(l.Dir)
				t.blocks = append(t.blocks, &Block{File: l.Dir.File, Line: l.Dir.Line, Server: sp.label, Location: locationLabel(l), Status: Translated,
					Reasons: []string{"never reached in nginx: " + rd.note()}})
			}
			t.finishServer(sp, 0)
			continue
		}
		// The hosts an allow-list refuses get their own answer first:
		// nginx gave it before anything else of the server ran.
		allowed := 0
		if c := t.splitAllowedHosts(sp); c != nil {
			allowed = t.emit(c)
		}
		if c, ok := t.serverReturn(sp); ok {
			for _, l := range srv.Locations {
				t.use(l.Dir)
				t.useTree(l.Dir)
				t.blocks = append(t.blocks, &Block{File: l.Dir.File, Line: l.Dir.Line, Server: sp.label, Location: locationLabel(l), Status: Translated,
					Reasons: []string{"never reached in nginx: the server's return answered first"}})
			}
			sp.methodGuard(c, last(srv.Local("return")))
			t.finishServer(sp, allowed+t.emit(c))
			continue
		}
		redirected := allowed
		for _, c := range sp.rewrites {
			sp.methodGuard(c, nil)
			redirected += t.emit(c)
		}
		if sp.rewriteAll {
			for _, l := range srv.Locations {
				t.use(l.Dir)
				t.useTree(l.Dir)
				t.blocks = append(t.blocks, &Block{File: l.Dir.File, Line: l.Dir.Line, Server: sp.label, Location: locationLabel(l), Status: Translated,
					Reasons: []string{"never reached in nginx: the server's rewrite redirected every request first"}})
			}
			t.finishServer(sp, redirected)
			continue
		}
		if c := t.splitScheme(sp); c != nil {
			sp.methodGuard(c, sp.schemeIf)
			redirected += t.emit(c)
		}
		for _, c := range t.splitHosts(sp) {
			redirected += t.emit(c)
		}
		var plans []*locCtx
		for _, l := range srv.Locations {
			if !l.Named {
				plans = append(plans, t.planLocation(sp, l))
			}
		}
		if sp.catchAll {
			c := t.planCatchAll(sp)
			if (c.static != nil || c.r.respond != nil) && len(c.blockers) == 0 {
				plans = append(plans, c)
			} else {
				sp.own.merge(c.blockers)
			}
		}
		// A protected location sturdy cannot route (a regex, a path it
		// cannot express) would be opened by whatever route its requests
		// reach: refuse the whole server instead.
		var wide notes
		for _, c := range plans {
			if (len(c.protect) > 0 || c.guard.any()) && len(c.paths) == 0 {
				why := c.refusalNotes()[0]
				wide.add(why.need, "location %s (%s) is protected (%s) and sturdy cannot route it, so every route of this server refuses rather than open it", locationLabel(c.loc), c.loc.Dir.Pos(), why.reason)
				if c.loc.Modifier == "~" || c.loc.Modifier == "~*" {
					wide.add(NeedRegexLocations, "a regex location can only be kept closed once sturdy routes by regex")
				}
			}
		}
		if len(wide) > 0 {
			sp.protect = append(sp.protect, wide...)
			for _, c := range plans {
				for _, n := range wide {
					c.protect.add(n.need, "%s", n.reason)
				}
			}
			if !slices.ContainsFunc(plans, func(c *locCtx) bool { return slices.Contains(c.paths, "/") }) {
				plans = append(plans, &locCtx{sp: sp, paths: []string{"/"}, protect: wide})
			}
		}
		made := 0
		for _, c := range plans {
			// Every route of the server carries its method allow-list, so
			// a location sturdy cannot route is not opened by it.
			sp.methodGuard(c, nil)
			if n := t.emit(c); n > 0 && !c.refused() {
				made += n
			}
		}
		t.finishServer(sp, made+redirected)
		for _, l := range srv.Locations {
			if l.Named {
				t.namedBlock(sp, l)
			}
		}
	}
}

// emit makes the routes of one planned location and records its block.
func (t *translator) emit(c *locCtx) int {
	sp := c.sp
	var b *Block
	if c.loc != nil {
		b = &Block{File: c.loc.Dir.File, Line: c.loc.Dir.Line, Server: sp.label, Location: locationLabel(c.loc)}
		t.blocks = append(t.blocks, b)
	}
	var routes []*route
	switch {
	case c.viaRedirect != nil && !c.refused() && len(c.blockers) == 0:
		b.Status, b.Reasons = Translated, []string{c.viaRedirect.note()}
		if len(c.differs) > 0 {
			b.Status, b.Reasons, b.Needs = TranslatedDiffers, append(b.Reasons, c.differs.reasons()...), c.differs.needs()
		}
		return 0
	case c.refused():
		if len(c.paths) == 0 {
			ns := c.refusalNotes()
			b.Status, b.Reasons, b.Needs = Refused, ns.reasons(), ns.needs()
			t.useTree(c.loc.Dir)
			return 0
		}
		if c.loc != nil {
			t.useTree(c.loc.Dir)
		}
		routes = t.refusalRoutes(c)
	case len(c.blockers) > 0 || c.pool == nil && c.static == nil && c.r.redirect == nil && c.r.respond == nil && !c.rematches():
		if len(c.blockers) == 0 {
			c.blockers.add("", "nothing proxies its requests")
		}
		b.Status, b.Reasons, b.Needs = NotTranslated, c.blockers.reasons(), c.blockers.needs()
		t.noteBlockedPass(c)
		t.useTree(c.loc.Dir)
		if c.match != nil && len(c.paths) > 0 && c.loc != nil && !c.loc.Named && (c.runsCode() || c.pass != nil) {
			// Its requests would reach another route: the files a
			// FastCGI location ran would be served as they are (PHP
			// sources), a proxy_pass sturdy cannot repeat would become
			// another location's backend. They get a refusal instead.
			for _, r := range t.holdRoutes(c) {
				r.block = b
				if n := t.addRoute(r); n != "" {
					b.Routes = append(b.Routes, n)
				}
			}
			if len(b.Routes) > 0 {
				b.Reasons = append(b.Reasons, "its requests get a refusal (503) instead of reaching another route")
			}
		}
		return 0
	default:
		routes = t.proxyRoutes(c)
	}
	var names []string
	for _, r := range routes {
		r.block = b
		r.keepNoSlash = c.loc != nil && !passes(c.loc)
		if n := t.addRoute(r); n != "" {
			names = append(names, n)
		}
	}
	for _, r := range t.methodRoutes(c, routes) {
		r.block = b
		if n := t.addRoute(r); n != "" {
			names = append(names, n)
		}
	}
	for _, r := range t.glueGuards(c, routes) {
		r.block = b
		if n := t.addRoute(r); n != "" {
			names = append(names, n)
		}
	}
	for _, r := range t.slashGuards(c, routes) {
		r.block = b
		t.addRoute(r)
	}
	if b == nil {
		return len(names)
	}
	b.Routes = names
	switch {
	case c.refused():
		ns := c.refusalNotes()
		b.Status, b.Reasons, b.Needs = Refused, ns.reasons(), ns.needs()
		b.Reasons = append(b.Reasons, "its requests get the refusal page (503) instead")
	case len(names) == 0:
		b.Status, b.Reasons = NotTranslated, []string{"its routes would duplicate routes made from an earlier server block with the same names and paths (nginx ignores a conflicting server_name)"}
	case len(c.differs) > 0:
		b.Status, b.Reasons, b.Needs = TranslatedDiffers, c.differs.reasons(), c.differs.needs()
	default:
		b.Status = Translated
	}
	return len(names)
}

// noteBlockedPass lists a proxy_pass that was not translated.
func (t *translator) noteBlockedPass(c *locCtx) {
	if c.pass == nil || t.used[c.pass] && t.listed[c.pass] {
		return
	}
	t.listed[c.pass] = true
	t.used[c.pass] = true
	t.items = append(t.items, Item{File: c.pass.File, Line: c.pass.Line, Directive: c.pass.String(), Reason: strings.Join(c.blockers.reasons(), "; ")})
}

func (t *translator) proxyRoutes(c *locCtx) []*route {
	var out []*route
	for _, v := range c.sp.variants {
		for _, p := range c.paths {
			r := c.r
			r.listeners, r.hosts, r.path, r.match, r.pool = v.listeners, v.hosts, p, c.match, c.pool
			r.static, r.hsts, r.guard, r.clientCert = c.static, c.hsts, c.guard, c.sp.clientCert
			r.comments = slices.Clone(c.r.comments)
			r.name = t.routeName(c.sp, v, p)
			if c.pool != nil && c.pool.fallback != nil {
				r.comments = append(r.comments, "while "+c.pool.name+" has no host to try, requests go to its backup servers ("+c.pool.fallback.name+")")
			}
			if len(c.differs) > 0 {
				r.comments = append(r.comments, "differs from nginx: "+strings.Join(c.differs.reasons(), "; "))
			}
			for i, rw := range c.firstRewrites {
				// Ranked above r: nginx's first rewrite that matched won.
				f := r
				f.match, f.rewrite, f.def = &config.PathMatch{Regex: rw.Regex}, rw, false
				f.name = fmt.Sprintf("%s-rewrite%d", r.name, i+1)
				f.comments = append(slices.Clone(r.comments), fmt.Sprintf("the paths rewrite %s matched: nginx's first rewrite of the location that matched", rw.Regex))
				out = append(out, &f)
			}
			out = append(out, &r)
		}
	}
	return out
}

// refusalPool is the one pool of every refusal route.
func (t *translator) refusalPool() *pool {
	if t.refusal == nil {
		taken := map[string]bool{}
		for _, q := range t.pools {
			taken[q.name] = true
		}
		t.refusal = &pool{name: name(taken, "refused"), refusal: true, hosts: []host{{addr: refusalAddr, weight: 1}},
			comments: []string{"refusal pool: its only host (port 0) refuses every connection, so the routes using it answer with their sorry page and never reach a backend. They stand for nginx locations with access rules sturdy cannot reproduce yet."}}
		t.refusal.passive.off = true
		t.refusal.passive.comment = "no health evidence: this pool never answers"
		t.pools = append(t.pools, t.refusal)
	}
	return t.refusal
}

// routeName names a route after its server, path and variant.
func (t *translator) routeName(sp *serverPlan, v variant, path string) string {
	label := strings.TrimPrefix(sp.label, "server ")
	if strings.HasPrefix(sp.label, "server at ") {
		label = "default"
	}
	return name(map[string]bool{}, label, strings.Trim(path, "/"), v.tag)
}

// addRoute adds r unless a route with the same listeners, hosts and path
// exists; it returns the route's (unique) name, "" when it was a duplicate.
func (t *translator) addRoute(r *route) string {
	key := strings.Join(r.listeners, ",") + "|" + strings.Join(r.hosts, ",") + "|" + r.matchKey() + "|" + strings.Join(r.methods, ",")
	if _, dup := t.routeKeys[key]; dup {
		return ""
	}
	r.name = name(t.routeNames, r.name)
	t.routeKeys[key] = r.name
	if len(r.hosts) == 0 && r.everything() && !t.hasDefault() && (r.pool == nil || !r.pool.refusal) {
		r.def = true
		r.comments = append(r.comments, "the default route: nginx sent requests whose Host matches no server_name to this server, and sturdy does the same; an empty pool answers 503 with Retry-After instead of hours of 502 (incident 001)")
	}
	t.routesOut = append(t.routesOut, r)
	return r.name
}

func (t *translator) hasDefault() bool {
	return slices.ContainsFunc(t.routesOut, func(r *route) bool { return r.def })
}

// finishServer records the server block's own status.
func (t *translator) finishServer(sp *serverPlan, made int) {
	b := sp.block
	t.blocks = append(t.blocks, b)
	var ns notes
	ns = append(ns, sp.blockers...)
	ns = append(ns, sp.protect...)
	ns.merge(sp.own)
	rd := t.redirected[sp.srv]
	switch {
	case made == 0 && rd != nil && len(sp.blockers)+len(sp.protect) == 0:
		b.Status, b.Reasons, b.Needs = Translated, []string{rd.note()}, nil
		if len(sp.differs) > 0 {
			b.Status, b.Reasons, b.Needs = TranslatedDiffers, append(b.Reasons, sp.differs.reasons()...), sp.differs.needs()
		}
		return
	case made > 0:
		b.Status = Translated
		if len(sp.differs)+len(sp.own) > 0 {
			b.Status = TranslatedDiffers
		}
		ns = append(ns, sp.differs...)
	default:
		b.Status = NotTranslated
		ns.merge(sp.differs)
		if len(ns) == 0 {
			ns.add("", "none of its locations can be translated (each is listed with its reason)")
		}
	}
	b.Reasons, b.Needs = ns.reasons(), ns.needs()
}
