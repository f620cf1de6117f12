package translate

import (
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// Access rules. nginx's allow/deny, limit_except, auth_basic and
// auth_request become the route's access, methods, basic_auth and
// forward_auth (docs/access.md), checked before any backend is asked.
// Where a rule cannot be kept as nginx had it (a condition, Lua, a file
// named by a variable), the location is never opened: it becomes a
// refusal route, whose only host refuses connections, so that it answers
// with its sorry page (503) and never reaches a backend. A rule that
// sturdy keeps more strictly than nginx (satisfy any, limit_except with
// an allow list) is kept strictly and listed. Deny lists of the http
// block, and of locations that are not translated, become the edge deny
// list, which applies to every route: narrower than nginx, never wider.

// refusalAddr is the refusal pool's only host: connecting to port 0 is
// refused at once, so the route answers with its sorry page.
const refusalAddr = "127.0.0.1:0"

// guard is how a route keeps nginx's access rules.
type guard struct {
	access  []config.AccessRule
	from    []*nginx.Directive // the allow and deny lines access came from
	methods []string
	// methodsStatus refuses other methods: 0 for limit_except's 403,
	// else a server-level allow-list's 403, 405 or 444 (allowlist.go).
	methodsStatus int
	basic         *config.BasicAuth
	forward       *config.ForwardAuth
	// kept describes each rule kept, for comments and refusal pages.
	kept notes
}

// any reports whether the guard restricts who may ask.
func (g *guard) any() bool {
	return len(g.access) > 0 || len(g.methods) > 0 || g.basic != nil || g.forward != nil
}

// accessRules returns the allow and deny directives in effect at sc, in
// file order, and the block they are written in: nginx's access module
// inherits them as one list, replaced as a whole by any block that has
// either.
func accessRules(sc *nginx.Scope) ([]*nginx.Directive, *nginx.Scope) {
	for c := sc; c != nil; c = c.Parent {
		out := append(c.Local("allow"), c.Local("deny")...)
		if len(out) > 0 {
			slices.SortFunc(out, func(a, b *nginx.Directive) int {
				if a.File != b.File {
					return strings.Compare(a.File, b.File)
				}
				return a.Line - b.Line
			})
			return out, c
		}
	}
	return nil, nil
}

func isAll(a string) bool { return a == "all" || a == "0.0.0.0/0" || a == "::/0" }

// guards adds to c how nginx restricts access at sc: what is in effect
// there (inherited) and, for locations, what the block itself holds.
// Rules sturdy can keep go into c.guard, the others into c.protect.
func (t *translator) guards(c *locCtx, sc *nginx.Scope, location bool) {
	var g guard
	t.accessList(c, sc, &g)
	t.basicAuth(c, sc, &g)
	if d := sc.Get1("auth_request"); d != nil && d.Arg(0) != "off" {
		t.use(d)
		t.forwardAuth(c, sc, d, &g)
	}
	for _, name := range []string{"access_by_lua_block", "access_by_lua", "access_by_lua_file"} {
		if d := sc.Get1(name); d != nil {
			t.use(d)
			c.protect.add(NeedLua, "nginx ran Lua to decide access (%s, %s)", d.Name, d.Pos())
		}
	}
	if d := sc.Get1("satisfy"); d != nil {
		t.use(d)
		if d.Arg(0) == "any" && len(g.access) > 0 && (g.basic != nil || g.forward != nil) {
			c.differs.add(NeedAccessRules, "satisfy any (%s): nginx let a request in when the address list or the password check passed; sturdy requires both", d.Pos())
		}
	}
	if location {
		for _, d := range sc.Local("limit_except") {
			t.use(d)
			t.useTree(d)
			t.limitExcept(c, d, &g)
		}
		for _, d := range sc.Local("if") {
			if code := ifRefuses(d); code != "" {
				t.use(d)
				t.useTree(d)
				c.protect.add(NeedConditions, "nginx answered %s when %s (%s)", code, strings.Join(d.Args, " "), d.Pos())
			}
		}
	}
	t.mergeGuard(c, g)
}

// mergeGuard adds g to the rules c already holds (a location and the
// named location it hands requests to: nginx checked both).
func (t *translator) mergeGuard(c *locCtx, g guard) {
	o := &c.guard
	switch {
	case len(o.access) > 0 && len(g.access) > 0 && !slices.Equal(o.from, g.from):
		c.protect.add(NeedAccessRules, "nginx checked two different address lists (%s and %s); sturdy has one per route", o.from[0].Pos(), g.from[0].Pos())
	case len(g.access) > 0:
		o.access, o.from = g.access, g.from
	}
	switch {
	case o.basic != nil && g.basic != nil && *o.basic != *g.basic:
		c.protect.add(NeedBasicAuth, "nginx asked for two different passwords (%s, %s)", o.basic.Htpasswd, g.basic.Htpasswd)
	case g.basic != nil:
		o.basic = g.basic
	}
	switch {
	case o.forward != nil && g.forward != nil && o.forward.URL != g.forward.URL:
		c.protect.add(NeedAuthRequest, "nginx asked two auth services (%s, %s)", o.forward.URL, g.forward.URL)
	case g.forward != nil:
		o.forward = g.forward
	}
	switch {
	case len(o.methods) > 0 && len(g.methods) > 0:
		o.methods = slices.DeleteFunc(o.methods, func(m string) bool { return !slices.Contains(g.methods, m) })
		if len(o.methods) == 0 {
			c.protect.add(NeedMethodRules, "no method passes both limit_except lists")
		}
	case len(g.methods) > 0:
		o.methods = g.methods
	}
	o.kept.merge(g.kept)
}

// accessList translates the allow and deny lines in effect at sc.
func (t *translator) accessList(c *locCtx, sc *nginx.Scope, g *guard) {
	rules, from := accessRules(sc)
	if len(rules) == 0 {
		return
	}
	if opens(rules) {
		for _, d := range rules {
			t.use(d)
		}
		return // allow all, or only allow lines: nobody is refused
	}
	list := !slices.ContainsFunc(rules, func(d *nginx.Directive) bool { return d.Name == "allow" || isAll(d.Arg(0)) })
	if list && (from == t.site.HTTP || len(c.paths) == 0) {
		return // a deny list no route can keep exactly: edge.deny (see edge)
	}
	var allowed []string
	for _, d := range rules {
		a := d.Arg(0)
		switch {
		case a == "unix:":
			continue // sturdy has no unix-socket listeners: no client comes that way
		case a == "all":
		default:
			if _, err := config.ParsePrefix(a); err != nil {
				c.protect.add(NeedAccessRules, "%s %s (%s) is not an address or CIDR sturdy can match", d.Name, a, d.Pos())
				return
			}
		}
		t.use(d)
		r := config.AccessRule{Allow: a}
		if d.Name == "deny" {
			r = config.AccessRule{Deny: a}
		} else {
			allowed = append(allowed, a)
		}
		g.access = append(g.access, r)
		g.from = append(g.from, d)
	}
	switch {
	case list:
		g.kept.add("", "nginx denied %s (%s)", strings.Join(args(rules), ", "), rules[0].Pos())
	case len(allowed) > 0:
		g.kept.add("", "nginx allowed only %s (%s)", strings.Join(allowed, ", "), rules[0].Pos())
	default:
		g.kept.add("", "nginx denied everyone (%s)", rules[0].Pos())
	}
}

// opens reports an allow/deny list that refuses nobody: no deny line
// comes before an allow all.
func opens(rules []*nginx.Directive) bool {
	for _, d := range rules {
		switch {
		case d.Name == "deny":
			return false
		case d.Arg(0) == "all":
			return true
		}
	}
	return true
}

func args(ds []*nginx.Directive) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Arg(0))
	}
	return out
}

// basicAuth translates auth_basic and its user file.
func (t *translator) basicAuth(c *locCtx, sc *nginx.Scope, g *guard) {
	d := sc.Get1("auth_basic")
	if d == nil || d.Arg(0) == "off" {
		return
	}
	t.use(d)
	f := sc.Get1("auth_basic_user_file")
	if f == nil || strings.Contains(f.Arg(0), "$") {
		c.protect.add(NeedBasicAuth, "nginx asked for a password (auth_basic, %s) against a user file sturdy cannot name (%s)", d.Pos(), map[bool]string{true: "none given", false: f.String()}[f == nil])
		return
	}
	t.use(f)
	file := f.Arg(0)
	if !filepath.IsAbs(file) {
		file = filepath.Join(t.opt.ConfigDir, file)
	}
	if !t.opt.Exists(file) {
		t.warnings = appendOnce(t.warnings, fmt.Sprintf("%s (auth_basic_user_file, %s) does not exist on this machine; `sturdy check` reads it and fails until it does", file, f.Pos()))
	}
	realm := strings.NewReplacer(`"`, "'", `\`, "/", "\r", " ", "\n", " ").Replace(d.Arg(0))
	// nginx passes Authorization on to the backends; forward_authorization
	// keeps that (set it false to keep the password at the edge).
	g.basic = &config.BasicAuth{Realm: realm, Htpasswd: file, ForwardAuthorization: true}
	g.kept.add("", "nginx asked for a password (auth_basic, %s)", d.Pos())
	c.differs.add("", "after 5 wrong passwords in a row a client gets 429 for a while (basic_auth.failure_burst); nginx kept answering 401")
}

// limitExcept: `limit_except GET { deny all; }` is methods: [GET].
func (t *translator) limitExcept(c *locCtx, d *nginx.Directive, g *guard) {
	var ms []string
	for _, m := range d.Args {
		m = strings.ToUpper(m)
		if !slices.Contains(config.LimitExceptMethods, m) {
			c.protect.add(NeedMethodRules, "limit_except %s (%s): sturdy knows the methods %s", m, d.Pos(), strings.Join(config.LimitExceptMethods, " "))
			return
		}
		ms = append(ms, m)
	}
	exact := len(d.Children) == 1 && d.Children[0].Name == "deny" && d.Children[0].Arg(0) == "all"
	if !exact {
		c.differs.add(NeedMethodRules, "limit_except %s (%s) let some clients use other methods (its block is not just deny all); sturdy refuses other methods to everyone", strings.Join(d.Args, " "), d.Pos())
	}
	g.methods = ms
	g.kept.add("", "nginx refused methods other than %s (limit_except, %s)", strings.Join(ms, " "), d.Pos())
}

// forwardAuth translates auth_request: the location the sub-request
// reaches must proxy it, and its proxy_pass becomes the auth service.
func (t *translator) forwardAuth(c *locCtx, sc *nginx.Scope, d *nginx.Directive, g *guard) {
	uri := d.Arg(0)
	refuse := func(format string, a ...any) {
		c.protect.add(NeedAuthRequest, "nginx asked %s whether to let each request in (auth_request, %s), and %s", uri, d.Pos(), fmt.Sprintf(format, a...))
	}
	path, query, _ := strings.Cut(uri, "?")
	if strings.Contains(uri, "$") || !strings.HasPrefix(path, "/") {
		refuse("the URI is built per request")
		return
	}
	target, sure := t.locate(c.sp.srv, path)
	if target == nil || !sure {
		refuse("sturdy cannot tell which location answers it")
		return
	}
	sub := &locCtx{sp: c.sp, loc: target, sub: true}
	t.content(sub, target, 0)
	if len(sub.blockers) > 0 || sub.pass == nil || sub.static != nil {
		refuse("location %s (%s) does not proxy it in a way sturdy can repeat", locationLabel(target), target.Dir.Pos())
		return
	}
	tg := sub.target
	if tg == nil || tg.Variable || tg.Unix || tg.Scheme != "http" && tg.Scheme != "https" {
		refuse("its proxy_pass %s (%s) is not an http(s) address or upstream sturdy can call", sub.pass.Arg(0), sub.pass.Pos())
		return
	}
	p, ns := t.poolFor(tg, sub.pass)
	if p == nil {
		refuse("%s", strings.Join(ns.reasons(), "; "))
		return
	}
	t.use(sub.pass)
	sent := path
	switch {
	case tg.URI != "" && sub.content.Modifier == "=":
		sent = tg.URI
	case tg.URI != "":
		sent = tg.URI + strings.TrimPrefix(path, sub.content.Path)
	}
	if query != "" {
		sent += "?" + query
	}
	// nginx's sub-request carried every client header (unless the auth
	// location turned that off), and nginx read its answer its own way.
	f := &config.ForwardAuth{URL: tg.Scheme + "://" + tg.Host + sent, Pool: p.name, RequestHeaders: []string{"*"}, Statuses: config.ForwardAuthStatusesNginx}
	if h := sub.content.Scope.Get1("proxy_pass_request_headers"); h != nil && h.Arg(0) == "off" {
		t.use(h)
		f.RequestHeaders = []string{}
	}
	hostNote := ""
	for _, h := range sub.content.Scope.Get("proxy_set_header") {
		if !strings.EqualFold(h.Arg(0), "Host") {
			continue
		}
		switch v := h.Arg(1); {
		case v == "$host" || v == "$http_host":
			f.HostHeader = v
		case v == "$proxy_host":
			f.HostHeader = ""
		case !strings.ContainsAny(v, "$/@?# \t"):
			f.HostHeader = v
		default:
			hostNote = fmt.Sprintf("; its Host is the one of url, not proxy_set_header Host %s (%s)", v, h.Pos())
		}
	}
	if r := sub.content.Scope.Get1("proxy_read_timeout"); r != nil {
		if v, err := nginx.ParseTime(r.Arg(0)); err == nil && v > 0 {
			f.Timeout = config.Duration(v)
		}
	}
	// auth_request_set $user $upstream_http_x_user; proxy_set_header X-User $user;
	set := map[string]string{}
	for _, s := range sc.Get("auth_request_set") {
		t.use(s)
		if h, ok := strings.CutPrefix(s.Arg(1), "$upstream_http_"); ok {
			set[s.Arg(0)] = headerName(h)
		} else {
			c.differs.add(NeedAuthRequest, "auth_request_set %s %s (%s) is not translated: sturdy copies the auth answer's headers onto the request", s.Arg(0), s.Arg(1), s.Pos())
		}
	}
	for _, h := range c.scope().Get("proxy_set_header") {
		from, ok := set[h.Arg(1)]
		switch {
		case !ok:
		case http.CanonicalHeaderKey(h.Arg(0)) == http.CanonicalHeaderKey(from):
			f.CopyHeaders = appendOnce(f.CopyHeaders, from)
			c.authHeaders = appendOnce(c.authHeaders, http.CanonicalHeaderKey(from))
		default:
			c.differs.add(NeedRequestHeaders, "nginx sent the auth service's %s to the backend as %s (%s); sturdy copies headers under their own name", from, h.Arg(0), h.Pos())
		}
	}
	for _, e := range sc.Get("error_page") {
		for _, code := range e.Args[:max(len(e.Args)-1, 0)] {
			if code == "401" || code == "403" {
				c.differs.add(NeedErrorPages, "nginx answered the auth service's %s with error_page %s (%s); sturdy passes the auth service's answer on", code, e.Arg(len(e.Args)-1), e.Pos())
			}
		}
	}
	c.differs.add("", "the auth service gets sturdy's X-Forwarded-*/X-Original-* headers beside the client's, not the other proxy_set_header of location %s (%s)%s", locationLabel(target), target.Dir.Pos(), hostNote)
	g.forward = f
	g.kept.add("", "nginx asked %s whether to let each request in (auth_request, %s)", uri, d.Pos())
}

// edge carries nginx's deny lists that no route keeps (those of the http
// block, and of locations that were not translated) over to the edge deny
// list, which sturdy applies to every route.
func (t *translator) edge() {
	scopes := []*nginx.Scope{}
	if t.site.HTTP != nil {
		scopes = append(scopes, t.site.HTTP)
	}
	for _, srv := range t.site.Servers {
		scopes = append(scopes, srv.Scope)
		for _, l := range srv.Locations {
			scopes = append(scopes, l.Scope)
		}
	}
	for _, sc := range scopes {
		for _, d := range sc.Local("deny") {
			a := d.Arg(0)
			if isAll(a) || t.used[d] {
				continue // an allow list, deny all, or kept by the routes
			}
			if _, err := config.ParsePrefix(a); err != nil {
				t.skip(d, "not an address or CIDR sturdy can deny")
				continue
			}
			t.use(d)
			if !slices.Contains(t.deny, a) {
				t.deny = append(t.deny, a)
			}
			if sc != t.site.HTTP {
				t.denyNotes = appendOnce(t.denyNotes, fmt.Sprintf("%s: nginx denied it only at %s; sturdy denies it everywhere", a, d.Pos()))
			} else if t.overridden() {
				t.denyNotes = appendOnce(t.denyNotes, fmt.Sprintf("%s: some server blocks or locations of nginx had their own allow/deny list instead of the http block's; sturdy denies it everywhere", a))
			}
		}
		for _, d := range sc.Local("allow") {
			t.use(d)
		}
	}
}

// overridden reports whether any server or location has allow/deny lines
// of its own, which replaced the http block's in nginx.
func (t *translator) overridden() bool {
	for _, srv := range t.site.Servers {
		if len(srv.Local("allow"))+len(srv.Local("deny")) > 0 {
			return true
		}
		for _, l := range srv.Locations {
			if len(l.Local("allow"))+len(l.Local("deny")) > 0 {
				return true
			}
		}
	}
	return false
}
