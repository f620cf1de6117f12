package doctor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/nginx"
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

func checkDefaultServer(u *usage) []Finding {
	var out []Finding
	targets := defaultTargets(u.site)
	for _, srv := range u.site.Servers {
		l, ok := targets[srv]
		if !ok || hasErrorPage(l) {
			continue
		}
		up := l.Target.Upstream
		if up != nil && hasBackup(up) {
			continue
		}
		explicit := explicitDefault(srv)
		target := "upstream " + l.Target.Host
		if up == nil {
			target = l.Target.Host
		}
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
		if up != nil {
			f.Evidence = append(f.Evidence, serverEvidence(up)...)
		}
		addrs := strings.Join(srv.DefaultFor, ", ")
		if explicit {
			f.Severity, f.Score = High, 200
			f.Title = fmt.Sprintf("the default server for %s sends every request whose Host matches no server_name to %s, which has no backup server and no error_page for 502/503/504", addrs, target)
		} else {
			f.Severity, f.Score = Medium, 110
			f.Title = fmt.Sprintf("server %s (the default for %s) proxies / to %s with no backup server and no error_page for 502/503/504: an empty pool means bare 502s for this site and every unmatched host", srv.Label(), addrs, target)
		}
		if up != nil && up.Check != nil {
			f.Severity, f.Score = High, f.Score+50
			f.Evidence = append(f.Evidence, ev(up.Check))
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
		if ssl == nil || srv.Get1("ssl_certificate") != nil || srv.Get1("ssl_certificate_by_lua_block") != nil {
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

func checkKeepalive(u *usage) []Finding {
	var out []Finding
	wc := u.site.WorkerConnections()
	for _, up := range u.site.Upstreams {
		if up.Keepalive <= 0 {
			continue
		}
		if up.Keepalive > wc || up.Keepalive >= 1024 {
			out = append(out, Finding{
				ID:       "keepalive-oversized",
				Severity: Medium,
				Title:    fmt.Sprintf("upstream %s caches up to %d idle connections per worker, but a worker can hold only %d connections in all (worker_connections)", up.Name, up.Keepalive, wc),
				File:     up.KeepaliveDir.File, Line: up.KeepaliveDir.Line,
				Incident: Inc001Conn,
				Why:      "keepalive is per worker. A cache larger than the connections a worker can have never fills usefully, but lets idle upstream connections pile up and pin file descriptors and backend slots, eating the connection budget the other upstreams need during an incident. Incident 001 carried an unbenchmarked keepalive 10240; 256 showed no measurable latency change.",
				NginxFix: "Size keepalive to the concurrent requests one worker sends to this upstream (tens to a few hundred), and benchmark.",
				Sturdy:   "sturdy bounds idle connections per host (max_idle_conns_per_host, default 64) and total connections per host (max_conns_per_host).",
				Evidence: []string{ev(up.KeepaliveDir), fmt.Sprintf("events { worker_connections %d; }", wc)},
				Score:    70,
			})
		}
		var bad []string
		var first *nginx.Location
		for _, l := range u.locs[up] {
			v := l.Get1("proxy_http_version")
			if v != nil && v.Arg(0) == "1.1" && clearsConnection(l) {
				continue
			}
			if first == nil {
				first = l
			}
			bad = append(bad, ev(l.Dir))
		}
		if first == nil {
			continue
		}
		out = append(out, Finding{
			ID:       "keepalive-without-http11",
			Severity: Medium,
			Title:    fmt.Sprintf("upstream %s has keepalive %d, but %s not set both proxy_http_version 1.1 and proxy_set_header Connection \"\": those requests close their upstream connection", up.Name, up.Keepalive, plural(len(bad), "location does", "locations do")),
			File:     first.Dir.File, Line: first.Dir.Line,
			Incident: Inc001Conn,
			Why:      "nginx reuses an upstream connection only for HTTP/1.1 requests without \"Connection: close\". Otherwise every request opens a new connection: under load that is a connect() per request, ephemeral port and backend accept-queue pressure, and connect timeouts that nginx counts against the servers.",
			NginxFix: "In these locations (or their server block) set `proxy_http_version 1.1;` and `proxy_set_header Connection \"\";` (for WebSocket locations, map $http_upgrade so that ordinary requests send an empty Connection header).",
			Sturdy:   "sturdy always speaks HTTP/1.1 (or HTTP/2) upstream with connection reuse, bounded per host.",
			Evidence: append([]string{ev(up.KeepaliveDir)}, bad...),
			Score:    60,
		})
	}
	return out
}

// clearsConnection reports whether proxy_set_header Connection "" is in
// effect at l.
func clearsConnection(l *nginx.Location) bool {
	for _, d := range l.Get("proxy_set_header") {
		if strings.EqualFold(d.Arg(0), "Connection") {
			return d.Arg(1) == ""
		}
	}
	return false
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
