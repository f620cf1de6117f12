package translate

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// Files. A location with no content handler of its own (no proxy_pass,
// return, fastcgi_pass, ...) is answered by nginx's static module from its
// root or alias; try_files chains files, directories, a named location and
// a status. Each becomes a route's static block (docs/static.md), with the
// route's pool as the @named fallback when that location proxies.

// DefaultPrefix is the prefix of Debian's and Ubuntu's nginx (nginx -V:
// --prefix): relative roots, and the default root html, are inside it.
const DefaultPrefix = "/usr/share/nginx"

// staticPlan is what a route's static block will say.
type staticPlan struct {
	root, alias   string
	index         []string // nil: the default, index.html, as in nginx
	tryFiles      []string // nil: sturdy's default for the route
	autoindex     bool
	cacheControl  string
	expires       time.Duration
	precompressed []string
	// fixed is the status of a location that answers every request with
	// it (return 404, internal): a chain of only =CODE.
	fixed   int
	comment string
	// ccFrom are the add_header Cache-Control directives cacheControl holds.
	ccFrom []*nginx.Directive
}

// config returns the plan as sturdy's static block.
func (s *staticPlan) config() *config.Static {
	return &config.Static{Root: s.root, Alias: s.alias, Index: s.index, TryFiles: s.tryFiles, Autoindex: s.autoindex,
		Dotfiles: config.DotfilesAllow, CacheControl: s.cacheControl, Expires: config.Duration(s.expires), Precompressed: s.precompressed}
}

// fsPath resolves a root or alias as nginx does: relative to its prefix.
func (t *translator) fsPath(p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(t.opt.Prefix, p)
	}
	if p != "/" {
		p = strings.TrimSuffix(p, "/")
	}
	return p
}

// expandSet replaces variables in v by the constant values a `set` gives
// them in sc or a block around it (`set $public /srv/app/public; root
// $public;`); ok is false when a variable is left that only a request
// could fill.
func expandSet(sc *nginx.Scope, v string) (string, bool) {
	for range 4 {
		i := strings.IndexByte(v, '$')
		if i < 0 {
			return v, true
		}
		j := i + 1
		for j < len(v) && (v[j] == '_' || v[j] >= 'a' && v[j] <= 'z' || v[j] >= 'A' && v[j] <= 'Z' || v[j] >= '0' && v[j] <= '9') {
			j++
		}
		name := v[i:j]
		val, found := "", false
		for s := sc; s != nil && !found; s = s.Parent {
			for _, d := range s.Local("set") {
				if d.Arg(0) == name && len(d.Args) == 2 && !strings.Contains(d.Arg(1), "$") {
					val, found = d.Arg(1), true
				}
			}
		}
		if !found {
			return v, false
		}
		v = v[:i] + val + v[j:]
	}
	return v, !strings.Contains(v, "$")
}

// docRoot finds where a location's files are: its alias, or the root in
// effect (nginx's default root is html in its prefix). ok is false, with
// the reason in c.blockers, when sturdy cannot serve from there.
func (t *translator) docRoot(c *locCtx, l *nginx.Location, sc *nginx.Scope) (root, alias string, ok bool) {
	if l != nil {
		if d := l.Local("alias"); len(d) > 0 {
			a, fine := expandSet(sc, last(d).Arg(0))
			if !fine || l.Modifier == "~" || l.Modifier == "~*" {
				c.blockers.add(NeedStatic, "nginx served files from alias %s (%s), which takes its value per request (sturdy's alias is one directory)", last(d).Arg(0), last(d).Pos())
				return "", "", false
			}
			return "", t.fsPath(a), true
		}
		if d := sc.Get1("alias"); d != nil {
			c.blockers.add(NeedStatic, "location %s inherits alias %s (%s) from the location around it", locationLabel(l), d.Arg(0), d.Pos())
			return "", "", false
		}
	}
	d := sc.Get1("root")
	if d == nil {
		return t.fsPath("html"), "", true
	}
	r, fine := expandSet(sc, d.Arg(0))
	if !fine {
		c.blockers.add(NeedStatic, "nginx served files from root %s (%s), which takes its value per request", d.Arg(0), d.Pos())
		return "", "", false
	}
	return t.fsPath(r), "", true
}

// staticContent plans the files a location (nil: the server itself, for
// paths no location matches) serves; chain is its try_files directive or nil.
func (t *translator) staticContent(c *locCtx, l *nginx.Location, sc *nginx.Scope, chain *nginx.Directive, depth int) bool {
	root, alias, ok := t.docRoot(c, l, sc)
	if !ok {
		return false
	}
	sp := &staticPlan{root: root, alias: alias}
	if alias != "" {
		raw := sc.Get1("alias").Arg(0)
		switch {
		case !strings.HasSuffix(raw, "/") && (l.Modifier == "=" || path.Ext(l.Path) != "" && path.Ext(raw) != ""):
			// location = /config.js { alias /etc/app/config.js; }: the alias is the file.
			sp.root, sp.alias = filepath.Dir(alias), ""
			sp.tryFiles = []string{"/" + filepath.Base(alias)}
		case strings.HasSuffix(l.Path, "/") && !strings.HasSuffix(raw, "/"):
			c.differs.add(NeedStatic, "location %s ends with / but alias %s does not: nginx glued the rest of the path to the alias without a slash; sturdy puts one between", l.Path, raw)
		}
		if sp.alias != "" {
			c.prefixOnly()
		}
	}
	if d := sc.Get("index"); len(d) > 0 {
		dropped := false
		for _, x := range d {
			t.use(x)
			for _, name := range x.Args {
				if strings.ContainsAny(name, "/$") {
					c.differs.add(NeedRewrites, "index %s (%s) hands directories without an index file to another URI; sturdy tries only plain index files", name, x.Pos())
					continue
				}
				if target, sure := t.locate(c.sp.srv, "/"+name); !sure || target != nil && target != l && runsCode(target) {
					// nginx handed the index to that location (index.php to
					// PHP); sturdy would serve the script as a file.
					c.differs.add(NeedFastCGI, "index %s (%s) is a script nginx handed to another location; sturdy does not use it as an index", name, x.Pos())
					dropped = true
					continue
				}
				sp.index = appendOnce(sp.index, name)
			}
		}
		switch {
		case dropped && len(sp.index) == 0:
			sp.index = []string{} // none, not sturdy's default
		case len(sp.index) == 1 && sp.index[0] == config.DefaultStaticIndex:
			sp.index = nil
		}
	}
	if d := sc.Get1("autoindex"); d != nil && d.Arg(0) == "on" {
		sp.autoindex = true
	}
	if chain != nil {
		t.use(chain)
		if !t.tryFiles(c, l, sc, chain, sp, depth) {
			return false
		}
	}
	t.cacheHeaders(c, sc, sp)
	if d := sc.Get1("gzip_static"); d != nil && d.Arg(0) != "off" {
		t.use(d)
		sp.precompressed = []string{config.EncodingGzip}
		if d.Arg(0) == "always" {
			c.differs.add(NeedGzip, "gzip_static always (%s): nginx sent FILE.gz even to clients that do not accept gzip; sturdy sends it only to those that do", d.Pos())
		}
	}
	c.static = sp
	return true
}

// tryFiles turns try_files into the static chain; the last entry decides
// what happens when no file exists.
func (t *translator) tryFiles(c *locCtx, l *nginx.Location, sc *nginx.Scope, d *nginx.Directive, sp *staticPlan, depth int) bool {
	if len(d.Args) < 2 {
		c.blockers.add("", "try_files with one argument (%s) is not valid nginx", d.Pos())
		return false
	}
	var chain []string
	for _, a := range d.Args[:len(d.Args)-1] {
		if a == "/dev/null" {
			continue // a file that is never there: the idiom for "always the last entry"
		}
		v, ok := expandURI(sc, a)
		if _, err := config.ParseTryFile(v); !ok || err != nil {
			c.blockers.add(NeedStatic, "try_files entry %s (%s) names files by variables sturdy does not know (sturdy knows $uri)", a, d.Pos())
			return false
		}
		chain = append(chain, v)
	}
	fallback := d.Arg(len(d.Args) - 1)
	switch {
	case strings.HasPrefix(fallback, "@"):
		named := t.namedLocation(c.sp.srv, fallback)
		if named == nil {
			c.blockers.add("", "try_files falls back to %s (%s), which is not a named location of this server", fallback, d.Pos())
			return false
		}
		if file, ok := t.fileFallback(c, named, sp); ok {
			// @client { rewrite ^ / break; }: that file, as a last entry.
			sp.tryFiles = append(chain, file)
			return true
		}
		t.content(c, named, depth+1)
		if c.pass == nil {
			if len(c.blockers) == 0 {
				c.blockers.add(NeedStatic, "try_files falls back to %s (%s), which does not proxy", fallback, d.Pos())
			}
			return false
		}
		chain = append(chain, "@pool")
	case strings.HasPrefix(fallback, "="):
		if _, err := config.ParseTryFile(fallback); err != nil {
			c.blockers.add("", "try_files status %s (%s): %v", fallback, d.Pos(), err)
			return false
		}
		chain = append(chain, fallback)
	default:
		uri, _, _ := strings.Cut(fallback, "?")
		v, ok := expandURI(sc, uri)
		if lit, tail := uriTail(uri); !ok && tail && strings.HasPrefix(lit, "/") {
			// /index.php$request_uri: whatever the request, one location
			// that runs scripts takes it (Nextcloud's front controller).
			if target, sure := t.locateAll(c.sp.srv, lit+"/"); sure && target != nil && target != l && runsCode(target) {
				sp.tryFiles = append(chain, "=503")
				c.differs.add(NeedFastCGI, "try_files hands missing files to %s (%s), which location %s (%s) ran as a script; sturdy answers them 503, as it answers that location", fallback, d.Pos(), locationLabel(target), target.Dir.Pos())
				return true
			}
		}
		if !ok || !strings.HasPrefix(v, "/") {
			c.blockers.add(NeedRewrites, "try_files hands missing files to %s (%s), a URI built per request", fallback, d.Pos())
			return false
		}
		target, sure := t.locate(c.sp.srv, v)
		switch {
		case !sure:
			c.blockers.add(NeedRegexLocations, "try_files hands missing files to %s (%s); which location answers it depends on a regex sturdy cannot evaluate", fallback, d.Pos())
			return false
		case target != nil && target != l && runsCode(target):
			// The fallback is a script sturdy cannot run (WordPress's
			// /index.php?$args): its answer is that location's refusal.
			sp.tryFiles = append(chain, "=503")
			c.differs.add(NeedFastCGI, "try_files hands missing files to %s (%s), which location %s (%s) ran as a script; sturdy answers them 503, as it answers that location", fallback, d.Pos(), locationLabel(target), target.Dir.Pos())
			return true
		case target != nil && target != l && !servesFiles(target):
			c.blockers.add(NeedRewrites, "try_files hands missing files to %s (%s), which location %s (%s) answers with the path changed", fallback, d.Pos(), locationLabel(target), target.Dir.Pos())
			return false
		}
		troot, talias, ok := t.docRoot(&locCtx{sp: c.sp}, target, scopeOf(c.sp.srv, target))
		if !ok || talias != "" || troot != sp.root || sp.alias != "" {
			c.blockers.add(NeedRewrites, "try_files hands missing files to %s (%s), served from another directory than this location's", fallback, d.Pos())
			return false
		}
		if strings.Contains(v, "$uri") {
			c.blockers.add(NeedRewrites, "try_files ends with %s (%s): nginx looked the URI up again as a new request", fallback, d.Pos())
			return false
		}
		chain = append(chain, v)
		if target != nil && target != l {
			c.differs.add("", "nginx answered %s through location %s (%s) with its headers; sturdy answers it with this route's", v, locationLabel(target), target.Dir.Pos())
		}
	}
	sp.tryFiles = chain
	return true
}

// fileFallback reads a named location that serves one file for every
// request: `rewrite ^ /index.html break;` and nothing else that answers,
// from the same root as sp. It is the try_files entry for that file ("/"
// being the root's index).
func (t *translator) fileFallback(c *locCtx, named *nginx.Location, sp *staticPlan) (string, bool) {
	rws := named.Local("rewrite")
	if len(rws) != 1 || rws[0].Arg(2) != "break" || !rewritesEverything(rws[0]) || !servesFilesAfterRewrite(named) {
		return "", false
	}
	file := rws[0].Arg(1)
	if !strings.HasPrefix(file, "/") || strings.ContainsAny(file, "$?") {
		return "", false
	}
	if _, err := config.ParseTryFile(file); err != nil {
		return "", false
	}
	root, alias, ok := t.docRoot(&locCtx{sp: c.sp}, named, named.Scope)
	if !ok || alias != "" || sp.alias != "" || root != sp.root {
		return "", false
	}
	t.use(rws[0])
	c.r.comments = append(c.r.comments, fmt.Sprintf("handed to location %s (%s) for what is not a file: it served %s (%s)", named.Path, named.Dir.Pos(), file, strings.TrimSuffix(rws[0].String(), ";")))
	return file, true
}

// servesFilesAfterRewrite reports a location whose content, but for its
// rewrites, is nginx's static module.
func servesFilesAfterRewrite(l *nginx.Location) bool {
	for _, name := range []string{"proxy_pass", "return", "fastcgi_pass", "uwsgi_pass", "scgi_pass", "grpc_pass", "memcached_pass", "content_by_lua_block", "content_by_lua", "stub_status", "try_files", "if", "alias"} {
		if len(l.Local(name)) > 0 {
			return false
		}
	}
	return true
}

// expandURI resolves set variables in a try_files entry, keeping $uri.
func expandURI(sc *nginx.Scope, a string) (string, bool) {
	const mark = "\x00uri\x00"
	v, ok := expandSet(sc, strings.ReplaceAll(a, "$uri", mark))
	return strings.ReplaceAll(v, mark, "$uri"), ok || !strings.Contains(strings.ReplaceAll(v, mark, ""), "$")
}

func scopeOf(srv *nginx.Server, l *nginx.Location) *nginx.Scope {
	if l == nil {
		return srv.Scope
	}
	return l.Scope
}

// servesFiles reports a location whose content is nginx's static module:
// nothing proxies, answers or hands over.
func servesFiles(l *nginx.Location) bool {
	for _, name := range []string{"proxy_pass", "return", "fastcgi_pass", "uwsgi_pass", "scgi_pass", "grpc_pass", "memcached_pass", "rewrite", "content_by_lua_block", "content_by_lua", "stub_status", "try_files", "if"} {
		if len(l.Local(name)) > 0 {
			return false
		}
	}
	return !l.Named
}

// runsCode reports a location whose content is a script server or code
// sturdy does not run (FastCGI, uWSGI, SCGI, memcached, gRPC, Lua).
func runsCode(l *nginx.Location) bool {
	for _, name := range []string{"fastcgi_pass", "uwsgi_pass", "scgi_pass", "grpc_pass", "memcached_pass", "content_by_lua_block", "content_by_lua", "content_by_lua_file"} {
		if len(l.Local(name)) > 0 {
			return true
		}
	}
	return false
}

// cacheHeaders carries expires and add_header Cache-Control over to the
// static block; nginx sent both headers, sturdy folds them into one.
func (t *translator) cacheHeaders(c *locCtx, sc *nginx.Scope, sp *staticPlan) {
	var cc []string
	for _, d := range sc.Get("add_header") {
		if strings.EqualFold(d.Arg(0), "Cache-Control") && !strings.Contains(d.Arg(1), "$") {
			t.use(d)
			cc = append(cc, d.Arg(1))
			sp.ccFrom = append(sp.ccFrom, d)
		}
	}
	sp.cacheControl = strings.Join(cc, ", ")
	d := sc.Get1("expires")
	if d == nil {
		return
	}
	t.use(d)
	switch a := d.Arg(0); {
	case a == "off":
	case a == "epoch" || strings.HasPrefix(a, "-"):
		sp.cacheControl = joinCC(sp.cacheControl, "no-cache")
	case a == "max":
		sp.expires = 10 * 365 * 24 * time.Hour // nginx's max-age=315360000
	case a == "modified" || strings.HasPrefix(a, "@") || strings.Contains(a, "$"):
		c.differs.add(NeedResponseHeaders, "expires %s (%s) is not translated: sturdy's expires counts from the answer", strings.Join(d.Args, " "), d.Pos())
	default:
		v, err := nginx.ParseTime(strings.TrimPrefix(a, "+"))
		switch {
		case err != nil:
			c.differs.add(NeedResponseHeaders, "unreadable expires %q (%s)", a, d.Pos())
		case v < time.Second:
			sp.cacheControl = joinCC(sp.cacheControl, "no-cache")
		case strings.Contains(strings.ToLower(sp.cacheControl), "max-age"):
			c.differs.add("", "nginx sent max-age twice (expires %s and add_header Cache-Control, %s); sturdy sends the add_header one", a, d.Pos())
		default:
			sp.expires = v.Truncate(time.Second)
		}
	}
	if sp.expires > 0 || d.Arg(0) != "off" {
		c.differs.add("", "expires %s (%s): nginx also sent an Expires header; sturdy sends Cache-Control only", d.Arg(0), d.Pos())
	}
}

func joinCC(a, b string) string {
	if a == "" {
		return b
	}
	return a + ", " + b
}
