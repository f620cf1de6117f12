package translate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// return 301/302/303/307/308 URL (and return URL, nginx's 302) becomes a
// route that redirects (docs/routing.md#redirects): in a location, or for
// every request of a server when the return is the server's own.

// redirectReturn reads a redirecting return: its status and target.
func redirectReturn(d *nginx.Directive) (int, string, bool) {
	switch len(d.Args) {
	case 1:
		a := d.Arg(0)
		if strings.HasPrefix(a, "http://") || strings.HasPrefix(a, "https://") || strings.HasPrefix(a, "$scheme") {
			return 302, a, true
		}
	case 2:
		n, err := strconv.Atoi(d.Arg(0))
		if err == nil && (n == 301 || n == 302 || n == 303 || n == 307 || n == 308) {
			return n, d.Arg(1), true
		}
	}
	return 0, "", false
}

// redirectTo makes the redirect of a return; why is set when sturdy cannot
// build its Location.
func redirectTo(c *locCtx, d *nginx.Directive) (*config.Redirect, string) {
	code, target, ok := redirectReturn(d)
	if !ok {
		return nil, "not a redirect"
	}
	if !printable(target) || target == "" {
		return nil, "its target holds control characters"
	}
	x := &varCtx{c: c, re: c.regex(), url: true}
	tpl, why, ok := x.template(target)
	if !ok {
		return nil, why
	}
	if x.requestID {
		return nil, "$request_id in a redirect"
	}
	tpl, ok = absolute(c, tpl)
	if !ok {
		return nil, fmt.Sprintf("target %q is not a URL or an absolute path", target)
	}
	return &config.Redirect{URL: tpl, Status: code}, ""
}

// absolute makes a relative redirect target absolute as nginx did: with
// the request's scheme, host and the port the client reached, unless
// absolute_redirect is off.
func absolute(c *locCtx, tpl string) (string, bool) {
	if strings.HasPrefix(tpl, "/") {
		switch sc := c.scope(); {
		case sc.Get1("absolute_redirect") != nil && sc.Get1("absolute_redirect").Arg(0) == "off":
		case sc.Get1("server_name_in_redirect") != nil && sc.Get1("server_name_in_redirect").Arg(0) == "on" && validHost(c.sp.srv.Names[0]):
			tpl = "${scheme}://" + c.sp.srv.Names[0] + tpl
		default:
			tpl = "${scheme}://${http_host}" + tpl
		}
		return tpl, true
	}
	return tpl, strings.HasPrefix(tpl, "http://") || strings.HasPrefix(tpl, "https://") || strings.HasPrefix(tpl, "${scheme}://")
}

// rewriteRedirect reads `rewrite REGEX REPL permanent|redirect` (or a
// REPL that is a URL) as a redirect of the paths REGEX matches; nginx
// appended the client's query unless REPL ends with "?".
func rewriteRedirect(c *locCtx, d *nginx.Directive) (*config.Redirect, string) {
	re, repl := d.Arg(0), d.Arg(1)
	code := 302
	switch flag := d.Arg(2); {
	case flag == "permanent":
		code = 301
	case flag == "redirect":
	case strings.HasPrefix(repl, "http://") || strings.HasPrefix(repl, "https://") || strings.HasPrefix(repl, "$scheme"):
	default:
		return nil, "not a redirect"
	}
	rx, ok := compileRegex(re, false)
	if !ok || !printable(re) || !printable(repl) {
		return nil, "its regex uses PCRE that sturdy's RE2 does not have"
	}
	repl, noArgs := strings.CutSuffix(repl, "?")
	if strings.Contains(repl, "?") {
		return nil, "its target adds query arguments, which nginx joined with the client's"
	}
	x := &varCtx{c: c, re: rx, url: true}
	tpl, why, ok := x.template(repl)
	if !ok || x.requestID {
		return nil, why
	}
	if tpl, ok = absolute(c, tpl); !ok {
		return nil, fmt.Sprintf("target %q is not a URL or an absolute path", repl)
	}
	if !noArgs && !strings.Contains(repl, "$request_uri") && !strings.Contains(repl, "$args") {
		tpl += "${is_args}${args}"
	}
	return &config.Redirect{URL: tpl, Status: code}, ""
}

// serverRewriteRedirects plans the server's own rewrite ... permanent|redirect
// directives as regex routes, when every rewrite of the server redirects:
// nginx ran them before choosing a location. all reports one that matches
// every path, after which no location is reached.
func (t *translator) serverRewriteRedirects(sp *serverPlan) (plans []*locCtx, all bool) {
	rws := sp.srv.Local("rewrite")
	for _, d := range rws {
		c := &locCtx{sp: sp, paths: []string{d.Arg(0)}, match: &config.PathMatch{Regex: d.Arg(0)}}
		rd, _ := rewriteRedirect(c, d)
		if rd == nil {
			return nil, false
		}
		c.r.redirect = rd
		c.r.comments = []string{fmt.Sprintf("%s: %s (%s), before any location", sp.label, strings.TrimSuffix(d.String(), ";"), d.Pos())}
		if slices.ContainsFunc(sp.srv.Locations, func(l *nginx.Location) bool { return l.Modifier == "=" || l.Modifier == "^~" }) && !rewritesEverything(d) {
			c.differs.add(NeedRedirects, "nginx redirected before choosing a location; sturdy's exact and ^~ routes of this server are chosen before this redirect")
		}
		plans = append(plans, c)
		if rewritesEverything(d) {
			return plans, true
		}
	}
	return plans, false
}

// redirectAnswer makes the location a redirect; false when it cannot.
func (t *translator) redirectAnswer(c *locCtx, l *nginx.Location, d *nginx.Directive) bool {
	if _, _, ok := redirectReturn(d); !ok {
		return false
	}
	c.content = l
	rd, why := redirectTo(c, d)
	if rd == nil {
		if why != "not a redirect" {
			c.blockers.add(NeedRedirects, "nginx redirected (%s, %s), and %s", strings.TrimSuffix(d.String(), ";"), d.Pos(), why)
		}
		return why != "not a redirect"
	}
	c.r.redirect = rd
	c.r.comments = append(c.r.comments, fmt.Sprintf("%s, location %s (%s): %s", c.sp.label, locationLabel(c.loc), l.Dir.Pos(), strings.TrimSuffix(d.String(), ";")))
	if !strings.Contains(d.Arg(len(d.Args)-1), "$request_uri") && !strings.Contains(d.Arg(len(d.Args)-1), "$args") {
		c.r.comments = append(c.r.comments, "the Location is nginx's exactly: the client's query is not in it")
	}
	return true
}

// serverRedirect plans a server whose own return redirects every request:
// one redirect route per variant, and its locations are never reached.
func (t *translator) serverReturn(sp *serverPlan) (*locCtx, bool) {
	d := last(sp.srv.Local("return"))
	if d == nil || t.redirected[sp.srv] != nil {
		return nil, false
	}
	c := &locCtx{sp: sp, paths: []string{"/"}, match: &config.PathMatch{StartsWith: "/"}}
	rd, _ := redirectTo(c, d)
	if rd == nil {
		return c, t.serverFixed(c, d)
	}
	c.r.redirect = rd
	c.r.comments = []string{fmt.Sprintf("%s (%s): %s, before any location", sp.label, sp.srv.Dir.Pos(), strings.TrimSuffix(d.String(), ";"))}
	return c, true
}

// schemeIf finds `if ($scheme = http) { return 301 URL; }` in a server that
// listens with and without TLS: its plain listeners redirect, its TLS ones
// go on to the locations.
func (t *translator) schemeIf(sp *serverPlan) *nginx.Directive {
	if t.redirected[sp.srv] != nil {
		return nil
	}
	for _, d := range sp.srv.Local("if") {
		if schemeIsHTTP(d) && len(d.Children) == 1 && d.Children[0].Name == "return" {
			if _, _, ok := redirectReturn(d.Children[0]); ok {
				return d
			}
		}
	}
	return nil
}

// splitScheme takes the plain listeners out of sp's variants for a
// server whose schemeIf redirects them: it returns their redirect
// routes' plan, nil when there is none.
func (t *translator) splitScheme(sp *serverPlan) *locCtx {
	d := sp.schemeIf
	if d == nil {
		return nil
	}
	ssl := map[string]bool{}
	for _, ln := range t.listenersOut {
		ssl[ln.name] = ln.ssl
	}
	var plain, secure []variant
	for _, v := range sp.variants {
		p, s := v, v
		p.listeners, s.listeners = nil, nil
		for _, n := range v.listeners {
			if ssl[n] {
				s.listeners = append(s.listeners, n)
			} else {
				p.listeners = append(p.listeners, n)
			}
		}
		if len(p.listeners) > 0 {
			plain = append(plain, p)
		}
		if len(s.listeners) > 0 {
			secure = append(secure, s)
		}
	}
	psp := *sp
	psp.variants = plain
	c := &locCtx{sp: &psp, paths: []string{"/"}, match: &config.PathMatch{StartsWith: "/"}}
	rd, why := redirectTo(c, d.Children[0])
	if rd == nil || len(plain) == 0 {
		sp.differs.add(NeedRedirects, "the server's if %s (%s) redirected plain requests; %s", strings.Join(d.Args, " "), d.Pos(), why)
		return nil
	}
	c.r.redirect = rd
	c.r.comments = []string{fmt.Sprintf("%s: if %s { %s } (%s), before any location", sp.label, strings.Join(d.Args, " "), strings.TrimSuffix(d.Children[0].String(), ";"), d.Pos())}
	sp.variants = secure
	return c
}

// hostIfs finds `if ($host = NAME) { return 301 URL; }` in a server that
// answers NAME among other names (the www. redirect): NAME gets its own
// redirect route, the other names go on to the locations.
func (t *translator) hostIfs(sp *serverPlan) []*nginx.Directive {
	var out []*nginx.Directive
	for _, d := range sp.srv.Local("if") {
		if _, ok := hostIfName(d); ok && len(d.Children) == 1 && d.Children[0].Name == "return" {
			if _, _, ok := redirectReturn(d.Children[0]); ok {
				out = append(out, d)
			}
		}
	}
	return out
}

// hostIfName reads `if ($host = NAME)`, quotes allowed.
func hostIfName(d *nginx.Directive) (string, bool) {
	c := strings.ReplaceAll(strings.ReplaceAll(strings.Join(d.Args, " "), `"`, ""), "'", "")
	f := strings.Fields(strings.NewReplacer("(", " ", ")", " ").Replace(c))
	if len(f) != 3 || f[0] != "$host" || f[1] != "=" || !validHost(f[2]) || strings.HasPrefix(f[2], "*.") {
		return "", false
	}
	return strings.ToLower(f[2]), true
}

// splitHosts takes each hostIfs name out of sp's variants and returns the
// plans of their redirect routes.
func (t *translator) splitHosts(sp *serverPlan) []*locCtx {
	var out []*locCtx
	for _, d := range sp.hostIfs {
		name, _ := hostIfName(d)
		var listeners []string
		for i := range sp.variants {
			v := &sp.variants[i]
			listeners = append(listeners, v.listeners...)
			v.hosts = slices.DeleteFunc(slices.Clone(v.hosts), func(h string) bool { return h == name })
		}
		sp.variants = slices.DeleteFunc(sp.variants, func(v variant) bool { return v.hosts != nil && len(v.hosts) == 0 })
		psp := *sp
		psp.variants = []variant{{listeners: listeners, hosts: []string{name}, tag: "redirect"}}
		c := &locCtx{sp: &psp, paths: []string{"/"}, match: &config.PathMatch{StartsWith: "/"}}
		rd, why := redirectTo(c, d.Children[0])
		if rd == nil {
			sp.differs.add(NeedRedirects, "the server's if %s (%s) redirected %s; %s", strings.Join(d.Args, " "), d.Pos(), name, why)
			continue
		}
		c.r.redirect = rd
		c.r.comments = []string{fmt.Sprintf("%s: if %s { %s } (%s), before any location", sp.label, strings.Join(d.Args, " "), strings.TrimSuffix(d.Children[0].String(), ";"), d.Pos())}
		sp.methodGuard(c, d)
		out = append(out, c)
	}
	return out
}
