package lint

import (
	"fmt"
	"slices"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// slashes warns about a listener that keeps runs of slashes
// (merge_slashes: false) while a route on it protects a path: the route
// judges //admin/x as written, so it misses a protected /admin/, while
// most backends (and nginx) merge the slashes and serve /admin/x.
func (l *linter) slashes() {
	for i := range l.c.Listeners {
		ln := &l.c.Listeners[i]
		if ln.MergesSlashes() {
			continue
		}
		for j := range l.c.Routes {
			r := &l.c.Routes[j]
			if len(r.Listeners) > 0 && !slices.Contains(r.Listeners, ln.Name) {
				continue
			}
			if what := protection(r); what != "" && pathBound(r) {
				l.warn(fmt.Sprintf("listeners[%d].merge_slashes", i), "listener %q keeps repeated slashes, and route %q protects a path with %s: a request like //%s reaches another route, while a backend that merges slashes serves it as the protected path. Leave merge_slashes at its default (true) unless the backends give // a meaning", ln.Name, r.Name, what, trimSlash(routePath(r)))
				break
			}
		}
	}
}

// protection names the first access control of r, or "".
func protection(r *config.Route) string {
	switch {
	case len(r.Access) > 0:
		return "access rules"
	case r.BasicAuth != nil:
		return "basic_auth"
	case r.ForwardAuth != nil:
		return "forward_auth"
	case len(r.Methods) > 0:
		return "methods"
	case r.ClientCert == "required":
		return "client_cert"
	case len(r.RateLimit) > 0 || len(r.ConnLimit) > 0:
		return "limits"
	}
	return ""
}

// pathBound reports whether r takes only some paths.
func pathBound(r *config.Route) bool { return routePath(r) != "/" }

func routePath(r *config.Route) string {
	if m := r.Match; m != nil && m.Path != nil {
		for _, p := range []string{m.Path.Exact, m.Path.Prefix, m.Path.StartsWith, m.Path.Regex} {
			if p != "" {
				return p
			}
		}
	}
	if r.Path == "" {
		return "/"
	}
	return r.Path
}

func trimSlash(p string) string {
	for len(p) > 0 && (p[0] == '/' || p[0] == '^') {
		p = p[1:]
	}
	return p
}
