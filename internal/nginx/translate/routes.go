package translate

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/nginx"
	"github.com/sturdyproxy/sturdy/internal/nginx/accesslog"
)

// route is a sturdy route made from one location with proxy_pass.
type route struct {
	name      string
	listeners []string
	hosts     []string
	path      string
	def       bool
	pool      *pool
	connect   time.Duration // 0: sturdy's default
	response  time.Duration
	maxBody   string // "" : sturdy's default
	// maxBodyDefault reports that maxBody is nginx's default, not written.
	maxBodyDefault bool
	tries          int // 0: sturdy's default
	comments       []string
	// sorryFile is the error_page file for 502/503/504, "" for sturdy's default page.
	sorryFile string
	// cache is set when the location used proxy_cache.
	cache *routeCache
}

// routeCache is what proxy_cache and proxy_cache_use_stale become.
type routeCache struct {
	staleOnError bool // proxy_cache_use_stale listed error, timeout or http_5xx
	comment      string
}

func (t *translator) routes() {
	taken := map[string]bool{}
	seen := map[string]string{} // listeners+host+path -> route name
	defaultSrv := t.defaultServer()
	for _, srv := range t.site.Servers {
		listeners := t.serverListeners(srv)
		hosts, hostNotes := t.serverHosts(srv)
		for _, l := range srv.Locations {
			if l.ProxyPass == nil {
				continue
			}
			r := t.route(srv, l, listeners, hosts)
			if r == nil {
				continue
			}
			r.comments = append(r.comments, hostNotes...)
			dupKey := strings.Join(r.listeners, ",") + "|" + strings.Join(r.hosts, ",") + "|" + r.path
			if prev, dup := seen[dupKey]; dup {
				t.items = append(t.items, Item{File: l.Dir.File, Line: l.Dir.Line, Directive: l.Dir.String(), Reason: fmt.Sprintf("same listeners, host names and path as route %s (nginx ignores a conflicting server_name); left out", prev)})
				continue
			}
			label := srv.Label()
			if label == "server on "+srv.Listens[0].Addr {
				label = "default"
			}
			r.name = name(taken, label, strings.Trim(r.path, "/"))
			seen[dupKey] = r.name
			if srv == defaultSrv && r.path == "/" && !t.hasDefault() {
				r.def = true
				r.comments = append(r.comments, fmt.Sprintf("nginx sends requests whose Host matches no server_name to this server (default for %s); sturdy's default route does the same, and an empty pool answers 503 with Retry-After instead of hours of 502 (incident 001)", strings.Join(srv.DefaultFor, ", ")))
			}
			t.routesOut = append(t.routesOut, r)
		}
	}
}

func (t *translator) hasDefault() bool {
	return slices.ContainsFunc(t.routesOut, func(r *route) bool { return r.def })
}

// defaultServer is the server nginx answers unmatched hosts with: an
// explicit default_server if any, else the first server of the first
// listen address.
func (t *translator) defaultServer() *nginx.Server {
	for _, srv := range t.site.Servers {
		for _, l := range srv.Listens {
			if l.Default {
				return srv
			}
		}
	}
	if len(t.site.Servers) > 0 {
		return t.site.Servers[0]
	}
	return nil
}

func (t *translator) serverListeners(srv *nginx.Server) []string {
	var out []string
	for _, l := range srv.Listens {
		if ln := t.listenerOf[l.Addr]; ln != nil && !slices.Contains(out, ln.name) {
			out = append(out, ln.name)
		}
	}
	return out
}

// serverHosts translates server_name values. The catch-all names ("_",
// "") become no host restriction.
func (t *translator) serverHosts(srv *nginx.Server) ([]string, []string) {
	var hosts, notes []string
	for _, d := range srv.Local("server_name") {
		t.use(d)
		for _, n := range d.Args {
			n = strings.ToLower(n)
			switch {
			case n == "_" || n == "" || n == "default_server" || n == "$hostname":
			case strings.HasPrefix(n, "~"):
				t.items = append(t.items, Item{File: d.File, Line: d.Line, Directive: d.String(), Reason: fmt.Sprintf("regular-expression server name %q: sturdy matches exact names and *.wildcards", n)})
			case strings.HasPrefix(n, ".") && validHost(n[1:]):
				hosts = appendOnce(hosts, n[1:])
				hosts = appendOnce(hosts, "*"+n)
				notes = appendOnce(notes, fmt.Sprintf("server_name %s became %s and *%s", n, n[1:], n))
			case strings.HasSuffix(n, ".*") || strings.Count(n, "*") > 1 || (strings.Contains(n, "*") && !strings.HasPrefix(n, "*.")):
				t.items = append(t.items, Item{File: d.File, Line: d.Line, Directive: d.String(), Reason: fmt.Sprintf("server name %q: sturdy supports wildcards only as a leading *.", n)})
			case !validHost(n):
				t.items = append(t.items, Item{File: d.File, Line: d.Line, Directive: d.String(), Reason: fmt.Sprintf("server name %q is not a host name sturdy can match", n)})
			default:
				hosts = appendOnce(hosts, n)
			}
		}
	}
	return hosts, notes
}

// route translates one proxied location, or records why it cannot.
func (t *translator) route(srv *nginx.Server, l *nginx.Location, listeners, hosts []string) *route {
	pp := l.ProxyPass
	bad := func(reason string) *route {
		t.skip(pp, reason)
		t.use(l.Dir)
		return nil
	}
	switch {
	case l.Named:
		return bad(fmt.Sprintf("named location %s is reached only through error_page or try_files, which sturdy does not have", l.Path))
	case l.Modifier == "~" || l.Modifier == "~*":
		return bad(fmt.Sprintf("regular-expression location %q: sturdy routes by path prefix", l.Path))
	case !strings.HasPrefix(l.Path, "/") || !printable(l.Path):
		return bad(fmt.Sprintf("location %q does not start with / or holds control characters", l.Path))
	case l.Target.Variable:
		return bad("proxy_pass with variables chooses the backend per request; sturdy routes need a fixed pool")
	case l.Target.Unix:
		return bad("proxy_pass to a unix-domain socket: sturdy connects to host:port addresses")
	case l.Target.Scheme != "http":
		return bad(fmt.Sprintf("proxy_pass %s://: not translated; for HTTPS backends add tls: { ca: FILE } to the pool by hand (sturdy verifies backend certificates; nginx does not unless proxy_ssl_verify is on)", l.Target.Scheme))
	case l.Target.URI != "" && l.Target.URI != l.Path:
		return bad(fmt.Sprintf("proxy_pass with a URI part (%s) rewrites %s to it; sturdy routes do not rewrite paths, so this route was left out rather than send wrong paths", l.Target.URI, l.Path))
	case len(listeners) == 0:
		return bad("this server's listeners could not be translated (see above)")
	}
	if len(hosts) == 0 && !isCatchAll(srv) {
		return bad("none of this server's names could be translated; without them the route would match every host")
	}
	p := t.poolFor(l)
	if p == nil {
		return bad("its upstream could not be translated (see above)")
	}
	t.use(l.Dir, pp)
	r := &route{listeners: listeners, hosts: hosts, path: l.Path, pool: p}
	r.comments = append(r.comments, fmt.Sprintf("%s, location %s (%s)", serverLabel(srv), l.Path, l.Dir.Pos()))
	if srv.Get1("ssl_certificate") == nil && slices.ContainsFunc(srv.Listens, func(ls *nginx.Listen) bool { return ls.SSL }) {
		r.comments = append(r.comments, "this nginx server had no ssl_certificate, so its TLS handshakes failed; sturdy serves it with the listener's certificate")
	}
	if l.Modifier == "=" {
		r.comments = append(r.comments, fmt.Sprintf("nginx matched %s exactly (location =); sturdy matches it as a prefix", l.Path))
	}
	if p.fallback != nil {
		r.comments = append(r.comments, "while "+p.name+" has no host to try, requests go to its backup servers ("+p.fallback.name+")")
	}
	t.timeouts(l, r)
	t.bodySize(l, r)
	t.retries(l, r)
	t.sorry(srv, l, r)
	t.cache(l, r)
	return r
}

// serverLabel names a server for comments.
func serverLabel(srv *nginx.Server) string {
	if isCatchAll(srv) {
		return "default server (" + srv.Dir.Pos() + ")"
	}
	return "server " + srv.Names[0]
}

func isCatchAll(srv *nginx.Server) bool {
	for _, n := range srv.Names {
		if n == "_" || n == "" {
			return true
		}
	}
	return false
}

func (t *translator) timeouts(l *nginx.Location, r *route) {
	if d := l.Get1("proxy_connect_timeout"); d != nil {
		if v, err := nginx.ParseTime(d.Arg(0)); err == nil && v > 0 {
			r.connect = v
		}
		t.use(d)
	}
	if d := l.Get1("proxy_read_timeout"); d != nil {
		if v, err := nginx.ParseTime(d.Arg(0)); err == nil && v > 0 {
			r.response = v
		}
		t.use(d)
	}
	for _, name := range []string{"proxy_send_timeout", "send_timeout"} {
		if d := l.Get1(name); d != nil {
			t.use(d)
		}
	}
}

func (t *translator) bodySize(l *nginx.Location, r *route) {
	d := l.Get1("client_max_body_size")
	if d == nil {
		r.maxBody, r.maxBodyDefault = "1MiB", true
		return
	}
	t.use(d)
	n, err := nginx.ParseSize(d.Arg(0))
	switch {
	case err != nil:
		t.items = append(t.items, Item{File: d.File, Line: d.Line, Directive: d.String(), Reason: "unreadable size; sturdy's default of 10MiB applies"})
	case n == 0:
		r.maxBody = "1024GiB"
		r.comments = append(r.comments, "client_max_body_size 0 (no limit) became a 1024GiB limit")
	default:
		r.maxBody = sizeString(n)
	}
}

func sizeString(n int64) string {
	switch {
	case n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprint(n)
}

func (t *translator) retries(l *nginx.Location, r *route) {
	if d := l.Get1("proxy_next_upstream"); d != nil {
		t.use(d)
		if d.Arg(0) == "off" {
			r.tries = 1
			r.comments = append(r.comments, "proxy_next_upstream off: no retries (tries: 1)")
		} else if slices.Contains(d.Args, "non_idempotent") {
			t.items = append(t.items, Item{File: d.File, Line: d.Line, Directive: d.String(), Reason: "non_idempotent: sturdy never replays a POST (or other non-idempotent request) that reached a backend"})
		}
		var codes []string
		for _, a := range d.Args {
			if strings.HasPrefix(a, "http_") {
				codes = append(codes, a)
			}
		}
		if len(codes) > 0 {
			r.comments = append(r.comments, fmt.Sprintf("nginx retried on %s and counted them against the servers; sturdy retries 502/503/504 only when safe and attributes them first", strings.Join(codes, " ")))
		}
	}
	if d := l.Get1("proxy_next_upstream_tries"); d != nil {
		t.use(d)
		var n int
		if _, err := fmt.Sscan(d.Arg(0), &n); err == nil && n > 0 && r.tries == 0 {
			r.tries = min(n, 10)
		}
	}
	if d := l.Get1("proxy_next_upstream_timeout"); d != nil {
		t.use(d)
	}
}

// sorry turns error_page 502/503/504 into the route's sorry page when the
// page is a file on this machine.
func (t *translator) sorry(srv *nginx.Server, l *nginx.Location, r *route) {
	for _, d := range l.Get("error_page") {
		codes, target := d.Args[:max(len(d.Args)-1, 0)], d.Arg(len(d.Args)-1)
		if !slices.ContainsFunc(codes, func(c string) bool { return c == "502" || c == "503" || c == "504" }) {
			continue
		}
		file := t.errorPageFile(srv, target)
		switch {
		case file != "" && t.opt.Exists(file):
			r.sorryFile = file
			t.use(d)
		case t.used[d]:
		case file != "":
			t.skip(d, fmt.Sprintf("the error page %s does not exist on this machine; sturdy's default sorry page (503 with Retry-After) is used until routes[].sorry.body_file names it", file))
		default:
			t.skip(d, "error_page to a named location, a URL or a page not served from a file: sturdy's sorry page (503 with Retry-After) is used; the fallback pool covers a second backend")
		}
	}
}

// errorPageFile finds the file nginx serves for an error_page URI: the
// root (or alias) of the location matching it.
func (t *translator) errorPageFile(srv *nginx.Server, uri string) string {
	if !strings.HasPrefix(uri, "/") {
		return ""
	}
	var best *nginx.Location
	for _, l := range srv.Locations {
		if l.Named || l.Modifier == "~" || l.Modifier == "~*" || !strings.HasPrefix(uri, l.Path) {
			continue
		}
		if l.Modifier == "=" && l.Path != uri {
			continue
		}
		if best == nil || len(l.Path) > len(best.Path) {
			best = l
		}
	}
	var root string
	if best != nil {
		if a := best.Get1("alias"); a != nil {
			return filepath.Join(a.Arg(0), strings.TrimPrefix(uri, best.Path))
		}
		if d := best.Get1("root"); d != nil {
			root = d.Arg(0)
		}
	} else if d := srv.Get1("root"); d != nil {
		root = d.Arg(0)
	}
	if root == "" || strings.Contains(root, "$") {
		return ""
	}
	if !filepath.IsAbs(root) {
		root = filepath.Join(t.opt.ConfigDir, root)
	}
	return filepath.Join(root, uri)
}

// cache turns proxy_cache into the route's cache settings.
func (t *translator) cache(l *nginx.Location, r *route) {
	c := l.Get1("proxy_cache")
	if c == nil {
		return
	}
	t.use(c)
	if c.Arg(0) == "off" {
		return
	}
	rc := &routeCache{comment: fmt.Sprintf("nginx cached this location (proxy_cache %s, %s)", c.Arg(0), c.Pos())}
	if d := l.Get1("proxy_cache_use_stale"); d != nil {
		t.use(d)
		for _, a := range d.Args {
			if a == "error" || a == "timeout" || strings.HasPrefix(a, "http_5") {
				rc.staleOnError = true
			}
		}
	}
	if rc.staleOnError {
		rc.comment += "; nginx served stale copies on origin errors for as long as they stayed in the cache (incident 004): sturdy caps stale-if-error at 15m, labels stale answers with Age and Cache-Status, and alerts"
	} else {
		rc.comment += "; nginx did not serve stale copies on errors, so stale_if_error_max is 0s"
	}
	if accesslog.IsHealthPath(l.Path) {
		rc.comment += "; " + l.Path + " is a health path, which sturdy never caches (cache.bypass_paths), so checks always reach a backend"
	}
	for _, name := range []string{"proxy_cache_background_update", "proxy_cache_lock", "proxy_cache_revalidate", "proxy_cache_methods", "proxy_cache_bypass", "proxy_no_cache"} {
		if d := l.Get1(name); d != nil {
			t.use(d)
		}
	}
	r.cache = rc
}
