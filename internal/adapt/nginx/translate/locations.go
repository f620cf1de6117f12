package translate

import (
	"fmt"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/config"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
)

// locCtx is one location being translated.
type locCtx struct {
	sp *serverPlan
	// methodAnswers are its if ($request_method = M) { return ...; } blocks (methodif.go).
	methodAnswers []methodAnswer
	// methodPools are the pools a map on $request_method chose (maps.go).
	methodPools []methodPool
	// mapVar is the variable proxy_pass chose the backend by (maps.go),
	// mapValue its value where one pool is left; mapHeaders the request
	// headers that send it.
	mapVar, mapValue string
	mapHeaders       []string
	// sets are the set directives of a location that rewrote the request
	// to the one that proxies (name without $ to nginx value); they win
	// over the proxying location's own (vars.go).
	sets map[string]string
	// aliasGlue: an alias without a trailing slash in a location without
	// one; its other continuations get 404 (match.go).
	aliasGlue bool
	// firstRewrites are rewrite ... break directives before the last one,
	// each a route of its own ranked above the location's (rewrite.go).
	firstRewrites []*config.Rewrite
	// rawURI: `rewrite ^ $request_uri;` made $uri the client's escaped
	// path and query, which the route's prefix rewrite keeps (rawuri.go).
	rawURI bool
	loc    *nginx.Location // the location requests match
	// content is the location whose proxy_pass answers: loc itself, or the
	// named location it hands requests to (try_files ... @x, error_page).
	content   *nginx.Location
	pass      *nginx.Directive
	target    *nginx.ProxyTarget
	proxyHost string
	// paths are the route paths (prefixes) the location becomes; match,
	// when set, is the one route match that replaces them (match.go).
	paths []string
	match *config.PathMatch
	// noDefaultHost: nginx's Host was the upstream it chose per request,
	// which no one host_header says (maps.go).
	noDefaultHost bool
	// mapHost is nginx's Host where a map chose one pool for every method
	// left: the value that named it.
	mapHost string
	// superset is the location's regex without its look-around, matched
	// in its place when the location keeps clients out (superset.go).
	superset string
	blockers notes
	differs  notes
	protect  notes
	pool     *pool
	// static is set when files answer (some of) its requests.
	static *staticPlan
	// hsts is the add_header Strict-Transport-Security in effect (tls.go).
	hsts *nginx.Directive
	// guard holds the access rules the routes keep (access.go).
	guard guard
	// authHeaders are request headers the forward auth copies from the
	// auth service's answer (nginx auth_request_set).
	authHeaders []string
	// viaRedirect: the location redirected to https, as the plain
	// listener's redirect_https now does; it needs no route.
	viaRedirect *redirectPlan
	// sub marks nginx's own sub-request (auth_request): internal locations
	// answer it.
	sub bool
	r   route // settings shared by the routes made from it
}

// refused reports that the location keeps a rule sturdy cannot express,
// or one it can but no route can be made to carry it: it must refuse.
func (c *locCtx) refused() bool {
	return len(c.protect) > 0 || c.guard.any() && (len(c.blockers) > 0 || c.pass == nil && c.static == nil && c.r.redirect == nil && c.r.respond == nil || c.rematches())
}

// refusalNotes say why the location refuses: the rules sturdy cannot
// keep, or those it could keep and why no route can carry them.
func (c *locCtx) refusalNotes() notes {
	if len(c.protect) > 0 {
		return c.protect
	}
	ns := append(notes(nil), c.guard.kept...)
	for _, b := range c.blockers {
		ns.add(b.need, "sturdy could keep that, but cannot translate the location: %s", b.reason)
	}
	if len(c.blockers) == 0 && len(c.paths) == 0 {
		ns.add(NeedRegexLocations, "sturdy could keep that, but cannot route the location")
	}
	return ns
}

// scope is where the directives that shape the answer are read: the
// location that answers, or the server for its catch-all.
func (c *locCtx) scope() *nginx.Scope {
	if c.content != nil {
		return c.content.Scope
	}
	return c.sp.srv.Scope
}

// planCatchAll plans the route for paths no location of the server
// matches: nginx served them from the server's root.
func (t *translator) planCatchAll(sp *serverPlan) *locCtx {
	c := &locCtx{sp: sp, paths: []string{"/"}}
	c.blockers.merge(sp.blockers)
	c.differs.merge(sp.differs)
	c.protect.merge(sp.protect)
	t.guards(c, sp.srv.Scope, false)
	if !t.staticContent(c, nil, sp.srv.Scope, nil, 0) || len(c.blockers) > 0 {
		return c
	}
	c.r.comments = append(c.r.comments, fmt.Sprintf("%s (%s): nginx served the paths no location matches from the server's root", sp.label, sp.srv.Dir.Pos()))
	t.settings(c, sp.srv.Scope)
	return c
}

func locationLabel(l *nginx.Location) string {
	if l.Named || l.Modifier == "" {
		return l.Path
	}
	return l.Modifier + " " + l.Path
}

// planLocation decides what a location becomes.
func (t *translator) planLocation(sp *serverPlan, l *nginx.Location) *locCtx {
	c := &locCtx{sp: sp, loc: l}
	t.use(l.Dir)
	c.blockers.merge(sp.blockers)
	c.differs.merge(sp.differs)
	c.protect.merge(sp.protect)
	t.matchPaths(c)
	t.methodIfs(c, l)
	t.content(c, l, 0)
	t.rewriteBreakFallback(c, l)
	t.guards(c, l.Scope, true)
	if c.content != nil && c.content != l {
		t.guards(c, c.content.Scope, true)
	}
	if c.superset != "" {
		if c.keepsOut() {
			c.differs.add(NeedRegexLocations, "regular-expression location %q uses look-around, which sturdy's RE2 does not have; sturdy keeps clients out of every path %q matches, more than nginx did", l.Path, c.superset)
		} else {
			c.paths, c.match = nil, nil
			c.blockers.add(NeedRegexLocations, "regular-expression location %q uses PCRE that sturdy's RE2 does not have (look-around)", l.Path)
		}
	}
	if c.pass == nil && c.static == nil && c.r.respond == nil && !c.rematches() || len(c.blockers) > 0 || c.refused() || c.viaRedirect != nil || c.r.redirect != nil {
		return c
	}
	if c.rematches() {
		// Nothing of the location runs after its rewrite, in nginx
		// either: no settings, and nothing of it to list.
		t.useTree(l.Dir)
		c.r.comments = append([]string{fmt.Sprintf("%s, location %s (%s)", sp.label, locationLabel(l), l.Dir.Pos())}, c.r.comments...)
		return c
	}
	if c.pass != nil {
		t.proxyTarget(c)
		if len(c.blockers) > 0 {
			return c
		}
		if tg := c.target; tg != nil && (tg.URI == "" || tg.URI == "$request_uri") && c.r.rewrite == nil && c.static == nil {
			// nginx passed the request URI as the client sent it, %2F
			// included (GitLab's project paths, Nextcloud's WebDAV).
			c.r.encodedSlashes = true
		}
	}
	c.r.comments = append(c.r.comments, fmt.Sprintf("%s, location %s (%s)", sp.label, locationLabel(l), l.Dir.Pos()))
	if c.content != l {
		c.r.comments = append(c.r.comments, fmt.Sprintf("handed to location %s (%s)", c.content.Path, c.content.Dir.Pos()))
	}
	if c.static != nil && c.static.comment != "" {
		c.r.comments = append(c.r.comments, c.static.comment)
	}
	t.settings(c, c.content.Scope)
	if c.pass != nil {
		t.requestHeaders(c, c.content.Scope, sp.allTLS())
	}
	return c
}

func (sp *serverPlan) allTLS() bool {
	for _, l := range sp.srv.Listens {
		if !l.SSL && sp.srv.Get1("ssl") == nil {
			return false
		}
	}
	return true
}

// content finds what answers the location's requests in nginx's content
// phase, following hand-overs to named locations: a proxy_pass (c.pass),
// files (c.static), or both (try_files ... @app).
func (t *translator) content(c *locCtx, l *nginx.Location, depth int) {
	if depth > 4 {
		c.blockers.add("", "named locations hand requests to each other more than 4 times")
		return
	}
	t.locationRewrites(c, l)
	if c.pass != nil || c.r.redirect != nil {
		return // a rewrite ... last handed the request to a proxied location, or one redirected every request
	}
	if d := last(l.Local("return")); d != nil {
		t.use(d)
		if named := t.errorPageTarget(l, d.Arg(0)); named != nil {
			t.content(c, named, depth+1)
			return
		}
		if rd := t.redirected[c.sp.srv]; rd != nil && depth == 0 && !c.sub {
			if _, ok := httpsRedirect(d, c.sp.srv); ok {
				c.viaRedirect = rd
				return
			}
		}
		if depth == 0 && t.redirectAnswer(c, l, d) {
			return
		}
		if code, text, hasText, why := fixedReturn(d); code != 0 && why == "" && depth == 0 {
			t.fixedAnswer(c, l, code, text, hasText, fmt.Sprintf("%s (%s)", strings.TrimSuffix(d.String(), ";"), d.Pos()))
			return
		} else if code != 0 && why != "" {
			c.blockers.add(NeedFixedAnswers, "nginx answered itself (%s, %s): %s", strings.TrimSuffix(d.String(), ";"), d.Pos(), why)
			return
		}
		c.blockers.add(returnNeed(d), "nginx answered itself (%s, %s)", strings.TrimSuffix(d.String(), ";"), d.Pos())
		return
	}
	if d := last(l.Local("internal")); d != nil && depth == 0 && !c.sub {
		t.use(d)
		t.fixedAnswer(c, l, 404, "", false, fmt.Sprintf("internal (%s): only nginx's own redirects reached it", d.Pos()))
		return
	}
	if l.ProxyPass != nil {
		c.content, c.pass, c.target = l, l.ProxyPass, l.Target
		return
	}
	if t.fileTest(c, l, depth) {
		return
	}
	for _, d := range l.Local("if") {
		if c.handledIf(d) {
			continue
		}
		if ifRefuses(d) == "" {
			for _, x := range append(d.All("rewrite"), d.All("return")...) {
				t.use(d)
				need := rewriteNeed(x)
				if x.Name == "return" {
					need = returnNeed(x)
				}
				c.differs.add(need, "nginx ran %s when if %s (%s)", strings.TrimSuffix(x.String(), ";"), strings.Join(d.Args, " "), x.Pos())
				c.differs.add(NeedConditions, "nginx tested if %s (%s)", strings.Join(d.Args, " "), d.Pos())
			}
		}
		for _, p := range d.All("proxy_pass") {
			t.use(d)
			t.useTree(d)
			c.content, c.pass, c.target = l, p, t.site.DecodeTarget(p.Arg(0))
			c.differs.add(NeedConditions, "nginx proxied only when if %s (%s); otherwise it served files", strings.Join(d.Args, " "), d.Pos())
			return
		}
	}
	for name, need := range map[string]Need{"fastcgi_pass": NeedFastCGI, "uwsgi_pass": NeedFastCGI, "scgi_pass": NeedFastCGI, "grpc_pass": NeedGRPC, "memcached_pass": NeedFastCGI} {
		if d := last(l.Local(name)); d != nil {
			// Before try_files: its files are what the server runs, never
			// to be served as they are.
			t.use(d)
			c.blockers.add(need, "nginx passed requests to %s (%s)", strings.TrimSuffix(d.String(), ";"), d.Pos())
			return
		}
	}
	if d := last(l.Local("try_files")); d != nil {
		if named := handOver(t, l, d); named != nil {
			// try_files /dev/null @app: nothing is a file, the named location answers.
			t.use(d)
			t.content(c, named, depth+1)
			return
		}
		if depth > 0 {
			c.blockers.add(NeedStatic, "named location %s serves files (try_files, %s)", l.Path, d.Pos())
			return
		}
		c.content = l
		t.staticContent(c, l, l.Scope, d, depth)
		return
	}
	for _, name := range []string{"content_by_lua_block", "content_by_lua", "content_by_lua_file"} {
		if d := last(l.Local(name)); d != nil {
			t.use(d)
			c.blockers.add(NeedLua, "Lua code answered (%s)", d.Pos())
			return
		}
	}
	if d := last(l.Local("stub_status")); d != nil && depth == 0 {
		// sturdy has no copy of nginx's counters to show here, so the
		// location answers 404 and says where sturdy's are: whoever its
		// allow/deny kept out still gets nginx's 403 (the route keeps them).
		t.use(d)
		t.fixedAnswer(c, l, 404, stubStatusText, true, fmt.Sprintf("stub_status (%s): nginx's status page", d.Pos()))
		c.r.respond.ContentType = "text/plain"
		c.differs.add(NeedFixedAnswers, "nginx answered with its status page (stub_status, %s); sturdy answers 404 here, and its own status is on the admin listener (/status, /metrics)", d.Pos())
		return
	} else if d != nil {
		t.use(d)
		c.blockers.add(NeedFixedAnswers, "nginx answered with its status page (stub_status, %s); sturdy's is on the admin listener", d.Pos())
		return
	}
	if l.Named {
		c.blockers.add(NeedStatic, "named location %s serves files", l.Path)
		return
	}
	c.content = l
	t.staticContent(c, l, l.Scope, nil, depth)
}

// stubStatusText is the answer of a stub_status location.
const stubStatusText = "nginx's stub_status is not served by sturdy; sturdy's status and metrics are on its admin listener (/status, /metrics)\n"

// handOver returns the named location a try_files always hands requests
// to (every entry before it is /dev/null), nil when files are tried.
func handOver(t *translator, l *nginx.Location, d *nginx.Directive) *nginx.Location {
	last := d.Arg(len(d.Args) - 1)
	if !strings.HasPrefix(last, "@") {
		return nil
	}
	for _, a := range d.Args[:len(d.Args)-1] {
		if a != "/dev/null" {
			return nil
		}
	}
	return t.namedLocation(l.Server, last)
}

// errorPageTarget returns the named location an error_page sends code to
// ("error_page 418 = @workhorse; return 418;", GitLab's way to share a
// location), nil when there is none.
func (t *translator) errorPageTarget(l *nginx.Location, code string) *nginx.Location {
	for _, d := range l.Get("error_page") {
		target := d.Arg(len(d.Args) - 1)
		if !strings.HasPrefix(target, "@") {
			continue
		}
		for _, a := range d.Args[:len(d.Args)-1] {
			if a == code {
				t.use(d)
				return t.namedLocation(l.Server, target)
			}
		}
	}
	return nil
}

func (t *translator) namedLocation(srv *nginx.Server, name string) *nginx.Location {
	for _, l := range srv.Locations {
		if l.Named && l.Path == name {
			return l
		}
	}
	return nil
}
