package lint

import (
	"fmt"
	"slices"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// grpcCatchAll warns about a catch-all route to HTTP/1.1 pools on a
// listener that also carries gRPC: a call to a service that no route of its
// own names lands there and, as gRPC needs HTTP/2 end to end, is answered
// UNIMPLEMENTED. Without a gRPC pool in the config, HTTP/2 clients reaching
// an HTTP/1.1 pool are ordinary and nothing is said.
func (l *linter) grpcCatchAll() {
	grpcPool := ""
	for _, p := range l.c.Pools {
		if p.Health.Active != nil && p.Health.Active.Type == config.CheckGRPC {
			grpcPool = p.Name
			break
		}
		if p.UsesHTTP2() && grpcPool == "" {
			grpcPool = p.Name
		}
	}
	if grpcPool == "" {
		return
	}
	for i, r := range l.c.Routes {
		if r.Pool == "" || !catchAll(r) || l.reachesHTTP2(r) {
			continue
		}
		ln := l.http2Listener(r)
		if ln == "" {
			continue
		}
		l.warn(fmt.Sprintf("routes[%d].pool", i),
			"route %q catches every path on listener %q, which speaks HTTP/2, and sends to pool %q over HTTP/1.1, while pool %q speaks HTTP/2 (gRPC): a gRPC call no other route names lands here and is answered UNIMPLEMENTED; give each gRPC service a route of its own (path: /package.Service/) to an h2c or h2 pool",
			r.Name, ln, r.Pool, grpcPool)
	}
}

// catchAll reports whether a route takes every path of its hosts.
func catchAll(r config.Route) bool {
	return (r.Path == "/" || r.Path == "") && r.Match == nil
}

// reachesHTTP2 reports whether any pool the route sends to speaks HTTP/2.
func (l *linter) reachesHTTP2(r config.Route) bool {
	names := []string{r.Pool}
	for _, b := range r.Backends {
		names = append(names, b.Pool)
	}
	for _, p := range l.c.Pools {
		if slices.Contains(names, p.Name) && p.UsesHTTP2() {
			return true
		}
	}
	return false
}

// http2Listener names a listener of the route that accepts HTTP/2 (h2c, or
// TLS offering h2), or "" when it has none.
func (l *linter) http2Listener(r config.Route) string {
	for _, ln := range l.c.Listeners {
		if len(r.Listeners) > 0 && !slices.Contains(r.Listeners, ln.Name) {
			continue
		}
		if ln.H2C || (ln.TLS != nil && slices.Contains(ln.TLS.ALPN, "h2")) {
			return ln.Name
		}
	}
	return ""
}
