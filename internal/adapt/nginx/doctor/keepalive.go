package doctor

import (
	"fmt"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
)

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
			if v != nil && v.Arg(0) == "1.1" && clearsConnection(u.site, l) {
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

// clearsConnection reports whether the Connection header nginx sends
// upstream from l is empty for an ordinary request: proxy_set_header
// Connection "", or a variable whose map yields "" when the request has no
// Upgrade header (ingress-nginx's `map $http_upgrade $connection_upgrade
// { default upgrade; ” ”; }`).
func clearsConnection(site *nginx.Site, l *nginx.Location) bool {
	for _, d := range l.Get("proxy_set_header") {
		if strings.EqualFold(d.Arg(0), "Connection") {
			v := d.Arg(1)
			if strings.HasPrefix(v, "$") {
				if mv, ok := mapValueForEmpty(site, v); ok {
					v = mv
				}
			}
			return v == ""
		}
	}
	return false
}

// mapValueForEmpty returns what the map defining variable v yields when
// its source variable is empty: the ” entry, else the default.
func mapValueForEmpty(site *nginx.Site, v string) (string, bool) {
	if site.HTTP == nil {
		return "", false
	}
	for _, m := range site.HTTP.Local("map") {
		if m.Arg(1) != v || !m.IsBlock {
			continue
		}
		def, hasDef := "", false
		for _, e := range m.Children {
			switch {
			case e.Name == "" && len(e.Args) == 1:
				return e.Arg(0), true
			case e.Name == "default":
				def, hasDef = e.Arg(0), true
			}
		}
		return def, hasDef
	}
	return "", false
}
