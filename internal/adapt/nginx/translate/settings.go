package translate

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/adapt/nginx/accesslog"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// The apply functions of locationRules: each gets every directive of its
// name in effect at the proxied location (inherited ones included).

func (t *translator) timeouts(c *locCtx, ds []*nginx.Directive) {
	d := last(ds)
	if d == nil {
		return
	}
	v, err := nginx.ParseTime(d.Arg(0))
	if err != nil || v <= 0 {
		return
	}
	switch d.Name {
	case "proxy_connect_timeout":
		c.r.connect = v
	case "proxy_read_timeout":
		c.r.response = v
	}
}

// requestBuffering reads proxy_request_buffering: off streams request
// bodies to the backend as they arrive, which sturdy does only when told
// (request_buffering: false), since it reads bodies whole by default as
// nginx does; a registry or an upload service that turned buffering off
// keeps its streaming uploads (and their size: no temp-file bound).
func (t *translator) requestBuffering(c *locCtx, ds []*nginx.Directive) {
	if d := last(ds); d != nil && d.Arg(0) == "off" {
		c.r.streamBody = true
	}
}

func (t *translator) bodySize(c *locCtx, ds []*nginx.Directive) {
	d := last(ds)
	if d == nil {
		c.r.maxBody, c.r.maxBodyDefault = "1MiB", true
		return
	}
	n, err := nginx.ParseSize(d.Arg(0))
	switch {
	case err != nil:
		c.differs.add("", "unreadable client_max_body_size %q (%s); sturdy's default of 10MiB applies", d.Arg(0), d.Pos())
	case n == 0:
		c.r.maxBody = "1024GiB"
		c.r.comments = append(c.r.comments, "client_max_body_size 0 (no limit) became a 1024GiB limit")
	default:
		c.r.maxBody = sizeString(n)
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

func (t *translator) retries(c *locCtx, ds []*nginx.Directive) {
	d := last(ds)
	if d == nil {
		return
	}
	if d.Name == "proxy_next_upstream_tries" {
		var n int
		if _, err := fmt.Sscan(d.Arg(0), &n); err == nil && n > 0 && c.r.tries == 0 {
			c.r.tries = min(n, 10)
		}
		return
	}
	if d.Arg(0) == "off" {
		c.r.tries = 1
		c.r.comments = append(c.r.comments, "proxy_next_upstream off: no retries (tries: 1)")
	} else if slices.Contains(d.Args, "non_idempotent") {
		c.differs.add("", "nginx retried POSTs on another server (non_idempotent, %s); sturdy never replays a request that reached a backend", d.Pos())
	}
	var codes []string
	for _, a := range d.Args {
		if strings.HasPrefix(a, "http_") {
			codes = append(codes, a)
		}
	}
	if len(codes) > 0 {
		c.r.comments = append(c.r.comments, fmt.Sprintf("nginx retried on %s and counted them against the servers; sturdy retries 502/503/504 only when safe and attributes them first", strings.Join(codes, " ")))
	}
}

// errorPages turns error_page 502/503/504 into the route's sorry page when
// the page is a file on this machine; other error pages are differences.
func (t *translator) errorPages(c *locCtx, ds []*nginx.Directive) {
	if x := c.scope().Get1("proxy_intercept_errors"); x != nil && x.Arg(0) == "on" && c.pass != nil {
		t.use(x)
		t.interceptedPages(c, ds)
		return
	}
	for _, d := range ds {
		if len(d.Args) < 2 {
			continue
		}
		codes, target := d.Args[:len(d.Args)-1], d.Arg(len(d.Args)-1)
		if slices.ContainsFunc(codes, func(a string) bool { return a == "502" || a == "503" || a == "504" }) {
			file := t.errorPageFile(c.sp.srv, target)
			switch {
			case file != "" && t.opt.Exists(file):
				c.r.sorryFile = file
			case file != "":
				c.r.comments = appendOnce(c.r.comments, fmt.Sprintf("nginx's error page %s (%s) does not exist on this machine; sturdy's sorry page (503 with Retry-After) is used until routes[].sorry.body_file names it", file, d.Pos()))
			default:
				c.differs.add(NeedErrorPages, "error_page %s (%s) goes to a named location or URL; sturdy answers with its sorry page", strings.Join(d.Args, " "), d.Pos())
			}
		}
		if slices.ContainsFunc(codes, func(a string) bool { return a != "502" && a != "503" && a != "504" && !strings.HasPrefix(a, "=") }) {
			c.differs.add(NeedErrorPages, "nginx answered some error statuses with its own page (error_page %s, %s) when it produced them itself", strings.Join(d.Args, " "), d.Pos())
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
func (t *translator) cache(c *locCtx, ds []*nginx.Directive) {
	d := last(ds)
	if d == nil || d.Arg(0) == "off" {
		return
	}
	sc := c.scope()
	rc := &routeCache{comment: fmt.Sprintf("nginx cached this location (proxy_cache %s, %s)", d.Arg(0), d.Pos())}
	if u := sc.Get1("proxy_cache_use_stale"); u != nil {
		t.use(u)
		for _, a := range u.Args {
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
	if accesslog.IsHealthPath(c.loc.Path) {
		rc.comment += "; " + c.loc.Path + " is a health path, which sturdy never caches (cache.bypass_paths), so checks always reach a backend"
	}
	c.r.cache = rc
}

// interceptedPages turns error_page with proxy_intercept_errors on into
// the route's error_pages: the backend's error answers are replaced too.
func (t *translator) interceptedPages(c *locCtx, ds []*nginx.Directive) {
	for _, d := range ds {
		if len(d.Args) < 2 {
			continue
		}
		args, target := d.Args[:len(d.Args)-1], d.Arg(len(d.Args)-1)
		ep := config.ErrorPage{}
		for _, a := range args {
			if st, ok := strings.CutPrefix(a, "="); ok {
				n, err := strconv.Atoi(st)
				if err != nil || n < 200 || n > 599 {
					ep.Codes = nil
					break
				}
				ep.Status = n
				continue
			}
			if n, err := strconv.Atoi(a); err == nil && n >= 300 && n <= 599 {
				ep.Codes = append(ep.Codes, n)
			}
		}
		file := t.errorPageFile(c.sp.srv, target)
		switch {
		case len(ep.Codes) == 0:
			c.differs.add(NeedErrorPages, "error_page %s (%s) is not one sturdy can keep", strings.Join(d.Args, " "), d.Pos())
		case file == "":
			c.differs.add(NeedErrorPages, "error_page %s (%s) goes to a named location or URL; sturdy passes the backend's answer", strings.Join(d.Args, " "), d.Pos())
		case !t.opt.Exists(file):
			c.differs.add(NeedErrorPages, "nginx's error page %s (%s) does not exist on this machine; sturdy passes the backend's answer until routes[].error_pages names it", file, d.Pos())
		default:
			ep.File = file
			c.r.errorPages = append(c.r.errorPages, ep)
		}
	}
}

// intercept: proxy_intercept_errors on is read by errorPages; without an
// error_page it changes nothing.
func (t *translator) intercept(c *locCtx, ds []*nginx.Directive) {
	if d := last(ds); d != nil && d.Arg(0) == "on" && len(c.scope().Get("error_page")) == 0 {
		c.r.comments = appendOnce(c.r.comments, fmt.Sprintf("proxy_intercept_errors on (%s) without an error_page: nginx passed the backend's errors, as sturdy does", d.Pos()))
	}
}
