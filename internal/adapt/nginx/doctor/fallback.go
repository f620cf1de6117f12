package doctor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
)

// Checks of what incident 001 taught: an empty pool behind the default
// server, a TLS listener without a certificate, an oversized keepalive
// cache, DNS on the data path.

// catchAll returns the server's "location /" (the one that answers paths
// no other location matches) if it proxies.
func catchAll(srv *nginx.Server) *nginx.Location {
	for _, l := range srv.Locations {
		if l.Path == "/" && (l.Modifier == "" || l.Modifier == "^~") && l.Scope.Parent == srv.Scope {
			if l.ProxyPass != nil {
				return l
			}
			return nil
		}
	}
	return nil
}

// hasErrorPage reports whether an error_page for 502, 503 or 504 is in
// effect at l.
func hasErrorPage(l *nginx.Location) bool {
	for _, d := range l.Get("error_page") {
		for _, a := range d.Args {
			if a == "502" || a == "503" || a == "504" {
				return true
			}
		}
	}
	return false
}

func isCatchAllName(srv *nginx.Server) bool {
	for _, n := range srv.Names {
		if n == "_" || n == "" || n == "default_server" {
			return true
		}
	}
	return false
}

// explicitDefault reports whether srv was meant as the catch-all: it is
// marked default_server or named "_" (or has no name).
func explicitDefault(srv *nginx.Server) bool {
	for _, ls := range srv.Listens {
		if ls.Default {
			return true
		}
	}
	return isCatchAllName(srv)
}

// defaultTargets returns, per default server, the upstream its "location /"
// proxies to.
func defaultTargets(site *nginx.Site) map[*nginx.Server]*nginx.Location {
	out := map[*nginx.Server]*nginx.Location{}
	for _, srv := range site.Servers {
		if len(srv.DefaultFor) == 0 {
			continue
		}
		if l := catchAll(srv); l != nil {
			out[srv] = l
		}
	}
	return out
}

// canEmpty reports whether nginx can mark every primary server of the
// pool behind l unavailable, and why. A group with a single server (a
// direct proxy_pass address is one) is never marked unavailable: nginx
// ignores max_fails there, so its failures are the backend's own 502s, not
// an empty pool. With several servers, passive checks (max_fails > 0) or an
// active check can take them all out.
func canEmpty(l *nginx.Location) (bool, []string) {
	up := l.Target.Upstream
	if up == nil || hasLua(up) {
		return false, nil
	}
	if up.Check != nil && len(primaries(up)) > 0 {
		return true, []string{ev(up.Check)}
	}
	if on, desc := passive(up); on {
		return true, []string{fmt.Sprintf("%s: upstream %s: %d servers, %s", up.Dir.Pos(), up.Name, len(primaries(up)), desc)}
	}
	return false, nil
}

// hasLua reports an upstream whose servers Lua chooses (ingress-nginx's
// balancer_by_lua_block): its server line is a placeholder.
func hasLua(up *nginx.Upstream) bool {
	return slices.ContainsFunc(up.Dir.Children, func(d *nginx.Directive) bool { return strings.Contains(d.Name, "_by_lua") })
}

// reachesPool reports whether requests to srv's "/" get to the proxy: no
// server-level return or rewrite answers them first, and no access rule
// refuses them.
func reachesPool(srv *nginx.Server, l *nginx.Location) bool {
	if len(srv.Local("return")) > 0 {
		return false
	}
	for _, sc := range []*nginx.Scope{srv.Scope, l.Scope} {
		for _, d := range sc.Local("deny") {
			if d.Arg(0) == "all" {
				return false
			}
		}
	}
	return len(l.Local("return")) == 0
}

// sharesListen reports whether other server blocks with names listen where
// srv is the default: then the requests it catches are other sites'.
func sharesListen(site *nginx.Site, srv *nginx.Server) bool {
	for _, o := range site.Servers {
		if o == srv {
			continue
		}
		for _, l := range o.Listens {
			if slices.Contains(srv.DefaultFor, l.Addr) {
				return true
			}
		}
	}
	return false
}

// checkDefaultServer: unknown hosts reach a pool that can become empty,
// with nothing behind it (incident 001). Single-server pools cannot become
// empty in nginx and are not reported; severity grows with the evidence that
// other sites' traffic lands there.
func checkDefaultServer(u *usage) []Finding {
	var out []Finding
	targets := defaultTargets(u.site)
	for _, srv := range u.site.Servers {
		l, ok := targets[srv]
		if !ok || hasErrorPage(l) || !reachesPool(srv, l) {
			continue
		}
		up := l.Target.Upstream
		if up == nil || hasBackup(up) {
			continue
		}
		empty, why := canEmpty(l)
		if !empty {
			continue
		}
		explicit := explicitDefault(srv)
		shared := sharesListen(u.site, srv)
		target := "upstream " + up.Name
		f := Finding{
			ID:   "default-server-no-fallback",
			File: l.ProxyPass.File, Line: l.ProxyPass.Line,
			Incident: Inc001,
			Why:      "When every server of that pool is marked down (an active check failing fall= times in a row, or passive ejections), nginx has nothing to send these requests to and answers a bare 502 for as long as it lasts. In incident 001 the pool behind the default server of :80 and :443 emptied and every host without its own server block got 502 for 6 h 38 min.",
			NginxFix: "Add a `backup` server (a second, independent deployment or a static sorry-page server) to the upstream, and `error_page 502 503 504 /sorry.html;` with a `location = /sorry.html` that sets `Retry-After`; alert on \"no live upstreams\" in the error log.",
			Sturdy:   "An empty pool in sturdy still answers: it tries the hosts anyway if only passive evidence ejected them, then the route's fallback pool, then a bounded stale cached copy, then a 503 sorry page with Retry-After. The pool-empty event is logged once, counted and alerted, never hours of silent 502s.",
		}
		for _, ls := range srv.Listens {
			if !ls.Implicit {
				f.Evidence = append(f.Evidence, ev(ls.Dir))
			}
		}
		f.Evidence = append(f.Evidence, ev(l.ProxyPass))
		f.Evidence = append(f.Evidence, why...)
		f.Evidence = append(f.Evidence, serverEvidence(up)...)
		addrs := strings.Join(srv.DefaultFor, ", ")
		switch {
		case explicit && shared:
			f.Severity, f.Score = High, 200
			f.Title = fmt.Sprintf("the default server for %s sends every request whose Host matches no other server block to %s, which can lose all its servers and has no backup server and no error_page for 502/503/504", addrs, target)
		case shared:
			f.Severity, f.Score = Medium, 130
			f.Title = fmt.Sprintf("server %s is the default for %s (it is listed first) and proxies / to %s, which can lose all its servers and has no backup server or error_page for 502/503/504: then this site and every host no other server block names get bare 502s", srv.Label(), addrs, target)
		default:
			f.Severity, f.Score = Medium, 110
			f.Title = fmt.Sprintf("server %s proxies / to %s, which can lose all its servers, with no backup server and no error_page for 502/503/504: an empty pool means bare 502s for the whole site", srv.Label(), target)
		}
		if up.Check != nil {
			f.Severity, f.Score = High, f.Score+50
			f.Title += "; its active check can mark every server down at once"
		}
		out = append(out, f)
	}
	return out
}

// checkActiveCheck: a pool with active checks and no backup, not already
// reported as a default server's pool.
func checkActiveCheck(u *usage) []Finding {
	covered := map[*nginx.Upstream]bool{}
	for _, l := range defaultTargets(u.site) {
		if l.Target.Upstream != nil {
			covered[l.Target.Upstream] = true
		}
	}
	var out []Finding
	for _, up := range u.site.Upstreams {
		if up.Check == nil || hasBackup(up) || covered[up] || len(u.locs[up]) == 0 {
			continue
		}
		out = append(out, Finding{
			ID:       "active-check-no-fallback",
			Severity: Medium,
			Title:    fmt.Sprintf("upstream %s has an active health check but no backup server: when the check fails on every server the pool is empty and its routes answer bare 502s", up.Name),
			File:     up.Check.File, Line: up.Check.Line,
			Incident: Inc001,
			Why:      "Active checks may rightly mark every server down (a real outage). What matters then is what clients get: without a backup server or an error_page, a bare 502, for as long as the outage lasts.",
			NginxFix: "Add a `backup` server or an `error_page 502 503 504` sorry page with Retry-After, and alert on \"no live upstreams\".",
			Sturdy:   "sturdy falls back to the fallback pool, stale cache or a 503 sorry page with Retry-After, and logs and alerts the pool-empty event once.",
			Evidence: append(serverEvidence(up), ev(up.Check)),
			Score:    100,
		})
	}
	return out
}

func checkSSL(u *usage) []Finding {
	var out []Finding
	for _, srv := range u.site.Servers {
		var ssl *nginx.Listen
		for _, ls := range srv.Listens {
			if ls.SSL {
				ssl = ls
				break
			}
		}
		if ssl == nil || srv.Get1("ssl_certificate") != nil || srv.Get1("ssl_certificate_by_lua_block") != nil || rejectsHandshake(srv) {
			continue
		}
		out = append(out, Finding{
			ID:       "ssl-no-certificate",
			Severity: High,
			Title:    fmt.Sprintf("server %s listens on %s with ssl but no ssl_certificate is set for it", srv.Label(), ssl.Addr),
			File:     ssl.Dir.File, Line: ssl.Dir.Line,
			Incident: Inc001TLS,
			Why:      "Depending on the nginx version, every TLS handshake for this server fails, or `nginx -t` and the next reload fail (\"no ssl_certificate is defined\"), blocking every other config change. In incident 001 such a server sat unnoticed for years.",
			NginxFix: "Add ssl_certificate and ssl_certificate_key to this server (or the http block), or drop `ssl` from the listen; run `nginx -t` in CI on the rendered config.",
			Sturdy:   "`sturdy check` loads every listener's certificate and key; a TLS listener without a loadable pair is a config error, never a latent outage.",
			Evidence: []string{ev(ssl.Dir), ev(srv.Dir)},
			Score:    220,
		})
	}
	return out
}

// rejectsHandshake reports a server with ssl_reject_handshake on: a TLS
// default server that refuses names no other server has needs no
// certificate (nginx 1.19.4 and later).
func rejectsHandshake(srv *nginx.Server) bool {
	d := srv.Get1("ssl_reject_handshake")
	return d != nil && d.Arg(0) == "on"
}

func checkDNS(u *usage) []Finding {
	var out []Finding
	httpResolver := u.site.HTTP != nil && len(u.site.HTTP.Local("resolver")) > 0
	for _, up := range u.site.Upstreams {
		var resolve, static []*nginx.UpstreamServer
		for _, s := range up.Servers {
			if !s.IsHostname() {
				continue
			}
			if s.Resolve {
				resolve = append(resolve, s)
			} else {
				static = append(static, s)
			}
		}
		if len(resolve) > 0 {
			f := Finding{
				ID:       "dns-on-data-path",
				Severity: Medium,
				Title:    fmt.Sprintf("upstream %s re-resolves %s through the resolver while serving: when DNS is slow or failing, this upstream fails", up.Name, resolve[0].Host),
				File:     resolve[0].Dir.File, Line: resolve[0].Dir.Line,
				Incident: Inc001DNS,
				Why:      "With `resolve`, the addresses come from the resolver at run time; when it is overloaded (CoreDNS under pressure in incident 001) or returns nothing, the server drops out of the pool and requests fail, on top of whatever caused the DNS pressure.",
				NginxFix: "List the backend addresses explicitly (incident 001 replaced the cluster DNS name with the NodePort addresses), or keep `resolve` but with a resolver close to nginx, `valid=` long enough to ride out a DNS outage, and a zone.",
				Sturdy:   "sturdy keeps the last good DNS answer when a lookup fails, so a resolver outage does not empty a pool.",
				Score:    80,
			}
			for _, s := range resolve {
				f.Evidence = append(f.Evidence, ev(s.Dir))
			}
			if up.Resolver != nil {
				f.Evidence = append(f.Evidence, ev(up.Resolver))
			} else if httpResolver {
				f.Evidence = append(f.Evidence, ev(u.site.HTTP.Local("resolver")[0]))
			} else {
				f.Severity, f.Score = High, 210
				f.Title = fmt.Sprintf("upstream %s uses `resolve` for %s but no resolver is configured: nginx refuses this config", up.Name, resolve[0].Host)
			}
			out = append(out, f)
		}
		if len(static) > 0 {
			names := make([]string, len(static))
			f := Finding{
				ID:       "dns-resolved-once",
				Severity: Low,
				File:     static[0].Dir.File, Line: static[0].Dir.Line,
				Incident: Inc001DNS,
				Why:      "nginx resolves these names once, at start and reload. If the addresses change, nginx keeps sending to the old ones until the next reload; if DNS is down at reload time, nginx fails to start or reload.",
				NginxFix: "Use IP addresses, or `resolve` with a zone and a resolver whose `valid=` rides out DNS trouble.",
				Sturdy:   "sturdy re-resolves names in the background and keeps the last good answer when a lookup fails.",
				Score:    30,
			}
			for i, s := range static {
				names[i] = s.Host
				f.Evidence = append(f.Evidence, ev(s.Dir))
			}
			f.Title = fmt.Sprintf("upstream %s names %s by DNS name, resolved only at start and reload", up.Name, list(names, 3))
			out = append(out, f)
		}
	}
	var varDirs []string
	var first *nginx.Directive
	for _, srv := range u.site.Servers {
		for _, l := range srv.Proxied() {
			if l.Target.Variable && strings.Contains(l.Target.Host, "$") {
				if first == nil {
					first = l.ProxyPass
				}
				varDirs = append(varDirs, ev(l.ProxyPass))
			}
		}
	}
	if first != nil {
		out = append(out, Finding{
			ID:       "dns-per-request",
			Severity: Medium,
			Title:    "proxy_pass with a variable host resolves the backend's name through DNS on the request path",
			File:     first.File, Line: first.Line,
			Incident: Inc001DNS,
			Why:      "A proxy_pass whose host holds a variable is resolved at request time (cached for the resolver's valid= time). Every cache expiry puts DNS on the request path; a slow or failing resolver turns into 502s.",
			NginxFix: "Proxy to a named upstream block with explicit addresses where you can; otherwise set a resolver with valid= long enough to ride out DNS trouble.",
			Sturdy:   "sturdy resolves pool hosts in the background and keeps the last good answer when a lookup fails.",
			Evidence: slices.Clip(varDirs),
			Score:    75,
		})
	}
	return out
}
