package translate

import (
	"fmt"
	"regexp/syntax"
	"slices"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// The path the backend gets: proxy_pass with a URI part, with variables,
// and rewrite ... break become the route's rewrite (docs/routing.md).

// uriPart translates a proxy_pass URI without variables: nginx replaced
// the part of the path the location matched with it.
func (t *translator) uriPart(c *locCtx, uri string, pass *nginx.Directive) {
	m := c.match
	switch {
	case c.content != c.loc:
		c.blockers.add(NeedRewrites, "proxy_pass %s (%s) in a location that another hands requests to", pass.Arg(0), pass.Pos())
	case m == nil:
		if uri != c.loc.Path {
			c.blockers.add(NeedRewrites, "proxy_pass %s (%s) replaces %s with %s, and the location has an alias, which sturdy matches by whole segments", pass.Arg(0), pass.Pos(), c.loc.Path, uri)
		}
	case m.StartsWith != "":
		if uri != m.StartsWith {
			c.r.rewrite = &config.Rewrite{Prefix: &uri}
		}
	case m.Exact != "":
		if uri != m.Exact {
			c.r.rewrite = &config.Rewrite{Path: strings.ReplaceAll(uri, "$", "$$")}
		}
	default:
		c.blockers.add(NeedRewrites, "proxy_pass %s (%s) with a URI part in a regular-expression location", pass.Arg(0), pass.Pos())
	}
}

// uriTemplate translates a proxy_pass URI with variables: nginx sent
// exactly that URI, the client's query only where the URI names it. ok is
// false, with c.blockers set, when sturdy cannot build it.
func (t *translator) uriTemplate(c *locCtx, uri string, pass *nginx.Directive) {
	if uri == "$request_uri" {
		return // the client's request as it came: sturdy's default
	}
	keep := false
	for _, q := range []string{"$is_args$args", "?$args", "$is_args$query_string", "?$query_string"} {
		if rest, ok := strings.CutSuffix(uri, q); ok {
			uri, keep = rest, true
			break
		}
	}
	uri, query, hasQuery := strings.Cut(uri, "?")
	tpl, ok := t.pathTemplate(c, uri, &varCtx{c: c, re: c.regex(), url: true}, pass)
	if !ok {
		return
	}
	if hasQuery {
		// nginx sent exactly this query.
		q, why, ok := (&varCtx{c: c, re: c.regex(), url: true}).template(query)
		if !ok {
			c.blockers.add(NeedRewrites, "proxy_pass %s (%s) sets the query the backend gets: %s", pass.Arg(0), pass.Pos(), why)
			return
		}
		c.r.rewrite = &config.Rewrite{Path: tpl, Query: q}
		return
	}
	if tpl != "${uri}" {
		c.r.rewrite = &config.Rewrite{Path: tpl}
	}
	if !keep {
		c.differs.add(NeedRewrites, "nginx sent the backend %s without the client's query (proxy_pass %s, %s); sturdy keeps the query", uri, pass.Arg(0), pass.Pos())
	}
}

// pathTemplate converts a path with nginx variables; the query variables
// cannot be part of a path.
func (t *translator) pathTemplate(c *locCtx, p string, x *varCtx, d *nginx.Directive) (string, bool) {
	for _, v := range []string{"$request_uri", "$args", "$query_string", "$is_args", "$arg_"} {
		if strings.Contains(p, v) {
			c.blockers.add(NeedRewrites, "%s (%s) puts %s inside the path; sturdy keeps the query apart", strings.TrimSuffix(d.String(), ";"), d.Pos(), v)
			return "", false
		}
	}
	tpl, why, ok := x.template(p)
	if !ok {
		c.blockers.add(NeedRewrites, "%s (%s): %s", strings.TrimSuffix(d.String(), ";"), d.Pos(), why)
		return "", false
	}
	if !strings.HasPrefix(tpl, "/") && !strings.HasPrefix(tpl, "$") {
		c.blockers.add(NeedRewrites, "%s (%s) makes a path that does not start with /", strings.TrimSuffix(d.String(), ";"), d.Pos())
		return "", false
	}
	return tpl, true
}

// locationRewrites handles the rewrite directives of the location that
// answers: one rewrite ... break before a proxy_pass becomes the route's
// rewrite; redirects are differences (redirect.go); anything else keeps
// the location from translating.
func (t *translator) locationRewrites(c *locCtx, l *nginx.Location) {
	rws := l.Local("rewrite")
	for _, d := range rws {
		t.use(d)
	}
	if len(rws) > 0 && t.locationRedirect(c, l, rws[0]) {
		return
	}
	var pathRewrites []*nginx.Directive
	for _, d := range rws {
		if flag := d.Arg(2); flag == "redirect" || flag == "permanent" || rewriteNeed(d) == NeedRedirects {
			c.differs.add(NeedRedirects, "nginx redirected requests matching %s (%s)", d.Arg(0), d.Pos())
			continue
		}
		pathRewrites = append(pathRewrites, d)
	}
	if len(pathRewrites) == 0 {
		return
	}
	if len(pathRewrites) == 2 && isRawURIRewrite(pathRewrites[0]) {
		if rw, ok := rawURIRewrite(c, l, pathRewrites[1]); ok {
			c.r.rewrite, c.rawURI = rw, true
			return
		}
	}
	d := pathRewrites[0]
	if n := len(pathRewrites); n > 1 && t.firstBreaks(c, pathRewrites[:n-1]) {
		d = pathRewrites[n-1] // the earlier ones became routes of their own
	}
	switch {
	case len(pathRewrites) > 1 && c.firstRewrites == nil:
		c.blockers.add(NeedRewrites, "nginx rewrote the path with %d rewrites in turn (%s); sturdy has one per route", len(pathRewrites), d.Pos())
		return
	case l.ProxyPass == nil && (d.Arg(2) == "last" || d.Arg(2) == "") && t.rewriteLast(c, l, d):
		return
	case l.ProxyPass == nil && (d.Arg(2) == "last" || d.Arg(2) == "") && t.rewriteRematch(c, l, d):
		return
	case l.ProxyPass == nil && d.Arg(2) == "break" && l == c.loc && proxiedFallback(t, l) != nil:
		// rewrite ... break; try_files $uri @app: the named location
		// proxies the rewritten path (rewriteBreakFallback).
	case l.ProxyPass == nil || d.Arg(2) != "break":
		c.blockers.add(NeedRewrites, "nginx rewrote the path (%s, %s) and searched the locations again, so the backend would get other paths", strings.TrimSuffix(d.String(), ";"), d.Pos())
		return
	}
	if rw, ok := t.breakRewrite(c, d); ok {
		c.r.rewrite = rw
	}
}

// breakRewrite is `rewrite REGEX REPLACEMENT break;` as the route's
// rewrite; false, with c.blockers set, when sturdy cannot say it.
func (t *translator) breakRewrite(c *locCtx, d *nginx.Directive) (*config.Rewrite, bool) {
	re, ok := compileRegex(d.Arg(0), false)
	if !ok || !printable(d.Arg(0)) {
		c.blockers.add(NeedRewrites, "rewrite %s (%s) uses PCRE that sturdy's RE2 does not have", d.Arg(0), d.Pos())
		return nil, false
	}
	repl := d.Arg(1)
	drop := false
	if r, ok := strings.CutSuffix(repl, "?"); ok {
		repl, drop = r, true
	}
	repl, query, hasQuery := strings.Cut(repl, "?")
	if drop && !hasQuery {
		c.differs.add(NeedRewrites, "nginx dropped the client's query (rewrite %s %s?, %s); sturdy keeps it", d.Arg(0), repl, d.Pos())
	}
	tpl, ok := t.pathTemplate(c, repl, &varCtx{c: c, re: re, url: true}, d)
	if !ok {
		return nil, false
	}
	rw := &config.Rewrite{Regex: d.Arg(0), Path: tpl}
	if hasQuery && query != "" {
		// rewrite ^/u/(\d+)$ /users?id=$1 break: nginx sent the new
		// query, then the client's after "&" (none with a trailing ?).
		q, why, ok := (&varCtx{c: c, re: re, url: true}).template(query)
		if !ok || strings.ContainsAny(query, "#") {
			c.blockers.add(NeedRewrites, "rewrite %s %s (%s) sets the query the backend gets: %s", d.Arg(0), d.Arg(1), d.Pos(), why)
			return nil, false
		}
		rw.Query = q
		if !drop {
			rw.Query += "&${args}"
			c.r.comments = append(c.r.comments, fmt.Sprintf("nginx appended the client's query after & (rewrite %s %s, %s); a request without one gets a trailing & here, where nginx sent none", d.Arg(0), d.Arg(1), d.Pos()))
		}
	}
	return rw, true
}

// firstBreaks takes the rewrite ... break directives before a location's
// last one: the first that matches ended nginx's rewriting, so each is a
// route of its own, matched by its regex and ranked just above the
// location's. That holds only where every path the regex matches is one
// of the location's: a regex anchored at ^ with a literal start the
// location's regex (which cannot look at the end of the path) matches.
func (t *translator) firstBreaks(c *locCtx, ds []*nginx.Directive) bool {
	m := c.match
	if m == nil || m.Regex == "" || m.CaseInsensitive || c.loc == nil || c.loc.ProxyPass == nil && proxiedFallback(t, c.loc) == nil {
		return false
	}
	loc, err := syntax.Parse(m.Regex, syntax.Perl)
	if err != nil || looksAtEnd(loc) {
		return false
	}
	locRe, ok := compileRegex(m.Regex, false)
	if !ok {
		return false
	}
	var out []*config.Rewrite
	for _, d := range ds {
		if d.Arg(2) != "break" {
			return false
		}
		re, err := syntax.Parse(d.Arg(0), syntax.Perl)
		if err != nil {
			return false
		}
		lit := literalStart(re)
		if lit == "" || !locRe.MatchString(lit) {
			return false
		}
		rw, ok := t.breakRewrite(c, d)
		if !ok {
			return false
		}
		out = append(out, rw)
	}
	c.firstRewrites = out
	return true
}

// literalStart is the literal text a regex anchored at ^ requires first,
// "" when it is not anchored or starts with something else.
func literalStart(re *syntax.Regexp) string {
	re = re.Simplify()
	if re.Op != syntax.OpConcat || len(re.Sub) < 2 || re.Sub[0].Op != syntax.OpBeginText && re.Sub[0].Op != syntax.OpBeginLine {
		return ""
	}
	if l := re.Sub[1]; l.Op == syntax.OpLiteral && l.Flags&syntax.FoldCase == 0 {
		return string(l.Rune)
	}
	return ""
}

// looksAtEnd reports a regex with an assertion about where the path ends
// or about word boundaries: one that can match a path and not a longer one.
func looksAtEnd(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpEndLine, syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true
	}
	for _, s := range re.Sub {
		if looksAtEnd(s) {
			return true
		}
	}
	return false
}

// rewriteLast follows `rewrite REGEX /literal last;` to the location nginx
// chose for the new path: when that location proxies, the route rewrites
// the path as nginx did and proxies there. false when the new path is
// built per request, or its location does not proxy.
func (t *translator) rewriteLast(c *locCtx, l *nginx.Location, d *nginx.Directive) bool {
	repl := d.Arg(1)
	if !strings.HasPrefix(repl, "/") || strings.ContainsAny(repl, "$?") || !printable(repl) {
		return false
	}
	if _, ok := compileRegex(d.Arg(0), false); !ok {
		return false
	}
	m, sure := t.locate(c.sp.srv, repl)
	if sure && m != nil && m != l && m.ProxyPass != nil && m.Target != nil && m.Target.Variable && rewritesEverything(d) && l == c.loc {
		// proxy_pass http://b/ws?prefix=$prefix: nginx built the URI from
		// variables, which this location's set directives may have given
		// values (set $prefix $1) before the rewrite.
		c.sets = map[string]string{}
		for _, s := range l.Local("set") {
			t.use(s)
			if len(s.Args) == 2 {
				c.sets[strings.TrimPrefix(s.Arg(0), "$")] = s.Arg(1)
			}
		}
		c.content, c.pass, c.target = m, m.ProxyPass, m.Target
		c.r.comments = append(c.r.comments, fmt.Sprintf("%s (%s) sent the request to location %s (%s)", strings.TrimSuffix(d.String(), ";"), d.Pos(), locationLabel(m), m.Dir.Pos()))
		return true
	}
	if !sure || m == nil || m == l || m.ProxyPass == nil || m.Target == nil || m.Target.Variable {
		return false
	}
	path := repl
	switch uri := m.Target.URI; {
	case uri == "" || uri == m.Path:
	case m.Modifier == "=":
		path = uri
	case m.Modifier == "" || m.Modifier == "^~":
		path = uri + strings.TrimPrefix(repl, m.Path)
	default:
		return false
	}
	tg := *m.Target
	tg.URI = ""
	c.content, c.pass, c.target = m, m.ProxyPass, &tg
	c.r.rewrite = &config.Rewrite{Regex: d.Arg(0), Path: strings.ReplaceAll(path, "$", "$$")}
	c.r.comments = append(c.r.comments, fmt.Sprintf("%s (%s) sent the request to location %s (%s)", strings.TrimSuffix(d.String(), ";"), d.Pos(), locationLabel(m), m.Dir.Pos()))
	return true
}

// proxiedFallback is the named location that l's try_files ends with when
// that location proxies and rewrites nothing itself, nil otherwise.
func proxiedFallback(t *translator, l *nginx.Location) *nginx.Location {
	d := last(l.Local("try_files"))
	if d == nil || len(d.Args) < 2 || !strings.HasPrefix(d.Arg(len(d.Args)-1), "@") {
		return nil
	}
	named := t.namedLocation(l.Server, d.Arg(len(d.Args)-1))
	if named == nil || named.ProxyPass == nil || named.Target == nil || named.Target.URI != "" || len(named.Local("rewrite")) > 0 {
		return nil
	}
	return named
}

// rewriteBreakFallback finishes a location that rewrote the path (break)
// and then tried files before its named location: nginx looked the files
// up under the new path, which sturdy's static chain cannot (it looks
// under the client's), so the route proxies every request, with the path
// nginx's named location sent. The backend answers what nginx answered
// from files; no file nginx did not serve is served.
func (t *translator) rewriteBreakFallback(c *locCtx, l *nginx.Location) {
	if c.r.rewrite == nil || c.r.rewrite.Rematch || l.ProxyPass != nil || c.pass == nil || c.static == nil || c.content == l {
		return
	}
	c.static = nil
	d := last(l.Local("try_files"))
	c.differs.add(NeedStatic, "try_files %s (%s) looked for files under the rewritten path first; sturdy sends every request to location %s", strings.Join(d.Args[:len(d.Args)-1], " "), d.Pos(), c.content.Path)
}

// rewriteRematch makes a location whose rewrite ... last builds the new
// path from the request (`rewrite ^/static/[0-9a-f]{8}/(.*)$ /$1 last;`)
// a route that routes the new path again (rewrite.rematch): nginx's
// location for it depends on the request. nginx ran no access rule or
// content of this location after the rewrite, and sturdy runs none of the
// route's. false when the location does more than rewrite.
func (t *translator) rewriteRematch(c *locCtx, l *nginx.Location, d *nginx.Directive) bool {
	if l != c.loc || c.sub || len(l.Local("if")) > 0 || len(l.Local("return")) > 0 || len(l.Local("location")) > 0 || !printable(d.Arg(0)) {
		return false
	}
	re, ok := compileRegex(d.Arg(0), false)
	if !ok {
		return false
	}
	repl := d.Arg(1)
	if r, ok := strings.CutSuffix(repl, "?"); ok {
		repl = r
		c.differs.add(NeedRewrites, "nginx dropped the client's query (rewrite %s %s?, %s); sturdy keeps it", d.Arg(0), repl, d.Pos())
	}
	if strings.Contains(repl, "?") {
		return false
	}
	tpl, ok := t.pathTemplate(&locCtx{sp: c.sp, loc: l}, repl, &varCtx{c: c, re: re, url: true}, d)
	if !ok {
		return false
	}
	for _, s := range l.Local("set") {
		t.use(s)
		c.differs.add(NeedVariables, "set %s (%s) gave the location the request moved to a value; sturdy does not carry it over", s.Arg(0), s.Pos())
	}
	if m := c.match; !rewritesEverything(d) && (m == nil || m.CaseInsensitive || !covers(d.Arg(0), m.Regex)) {
		c.differs.add(NeedRewrites, "the location's paths that %s (%s) does not match got nginx's files; sturdy answers them 404", d.Arg(0), d.Pos())
	}
	c.content = l
	c.r.rewrite = &config.Rewrite{Regex: d.Arg(0), Path: tpl, Rematch: true}
	c.r.comments = append(c.r.comments, fmt.Sprintf("%s (%s): nginx searched its locations again for the new path; sturdy routes it again", strings.TrimSuffix(d.String(), ";"), d.Pos()))
	return true
}

// rematches reports a location that became a rewrite.rematch route.
func (c *locCtx) rematches() bool { return c.r.rewrite != nil && c.r.rewrite.Rematch }

// locationRedirect translates a location whose first rewrite redirects
// every request (`rewrite ^(.*)$ https://new.example$1 permanent;`):
// nginx ran it before anything else of the location, so the location is
// a redirect route. The regex's capture, when it has one, is the whole
// path, which the target gets as $uri. false when the rewrite matches
// only some paths, or an if or return of the location could answer first.
func (t *translator) locationRedirect(c *locCtx, l *nginx.Location, d *nginx.Directive) bool {
	if rewriteNeed(d) != NeedRedirects || !rewritesEverything(d) || len(l.Local("if")) > 0 || len(l.Local("return")) > 0 || c.sub {
		return false
	}
	repl := d.Arg(1)
	switch d.Arg(0) {
	case "^(.*)", "^(.*)$", "(.*)":
		repl = strings.ReplaceAll(repl, "$1", "$uri")
	case "^/(.*)", "^/(.*)$":
		repl = strings.ReplaceAll(repl, "/$1", "$uri")
	}
	if strings.Contains(repl, "$1") || strings.Contains(repl, "${1}") || strings.Contains(repl, "$2") {
		return false
	}
	x := *d
	x.Args = slices.Clone(d.Args)
	x.Args[0], x.Args[1] = "^", repl
	rd, why := rewriteRedirect(c, &x)
	if rd == nil {
		c.differs.add(NeedRedirects, "nginx redirected every request (%s, %s); %s", strings.TrimSuffix(d.String(), ";"), d.Pos(), why)
		return false
	}
	c.content = l
	c.r.redirect = rd
	c.r.comments = append(c.r.comments, fmt.Sprintf("%s, location %s (%s): %s", c.sp.label, locationLabel(l), l.Dir.Pos(), strings.TrimSuffix(d.String(), ";")))
	return true
}
