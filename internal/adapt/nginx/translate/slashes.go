package translate

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// nginx merges repeated slashes before it chooses a location (merge_slashes
// on): //admin/x is location /admin/'s. sturdy merges them too, by
// default. A listener shared with a server that had merge_slashes off gets
// merge_slashes: false, and there sturdy matches the path as sent, so //admin/x would miss a protected /admin/ route and
// reach a wider one: there each protected prefix or exact route gets a
// companion regex route for its path written with a repeated slash, which
// refuses: narrower than nginx, never wider.

// maxSlashAlternatives bounds the companion regex (one alternative per
// slash of the path).
const maxSlashAlternatives = 8

// slashRegex matches path p written with at least one slash repeated: the
// whole path for exact, a prefix of the path otherwise. "" when p has too
// many slashes.
func slashRegex(p string, exact bool) string {
	parts := strings.Split(p, "/")
	if len(parts)-1 > maxSlashAlternatives {
		return ""
	}
	var alts []string
	for i := 1; i < len(parts); i++ {
		var b strings.Builder
		for j := 1; j < len(parts); j++ {
			if j == i {
				b.WriteString("//+")
			} else {
				b.WriteString("/+")
			}
			b.WriteString(regexp.QuoteMeta(parts[j]))
		}
		alts = append(alts, b.String())
	}
	re := "^(?:" + strings.Join(alts, "|") + ")"
	if exact {
		re += "/*$"
	}
	return re
}

// mergesSlashes reports whether nginx merged repeated slashes for srv.
func mergesSlashes(srv *nginx.Server) bool {
	d := srv.Scope.Get1("merge_slashes")
	return d == nil || d.Arg(0) != "off"
}

// listenersMerge reports whether every listener named merges slashes
// (sturdy's default): only when every server on it had nginx merge them. Elsewhere a protected route keeps its companion refusal route.
func (t *translator) listenersMerge(names []string) bool {
	if len(names) == 0 {
		return false
	}
	for _, n := range names {
		i := slices.IndexFunc(t.listenersOut, func(ln *listener) bool { return ln.name == n })
		if i < 0 || t.listenersOut[i].keepSlashes {
			return false
		}
	}
	return true
}

// slashGuards are the companion refusal routes of a protected location's
// routes.
func (t *translator) slashGuards(c *locCtx, routes []*route) []*route {
	if !c.guard.any() && len(c.protect) == 0 || c.r.redirect != nil {
		return nil
	}
	if !mergesSlashes(c.sp.srv) {
		return nil // nginx matched the path as sent, as sturdy does
	}
	var out []*route
	for _, r := range routes {
		if t.listenersMerge(r.listeners) {
			continue // sturdy merges them too, before routing
		}
		p, exact := r.path, false
		if m := r.match; m != nil {
			switch {
			case m.Exact != "":
				p, exact = m.Exact, true
			case m.StartsWith != "":
				p = m.StartsWith
			default:
				if strings.HasPrefix(m.Regex, "^/") && strings.Count(m.Regex, "/") > 1 {
					c.differs.add(NeedAccessRules, "nginx merged repeated slashes before matching %q; a request that repeats one can miss this route in sturdy", m.Regex)
				}
				continue
			}
		}
		if p == "/" {
			continue // every path is below it, however many slashes
		}
		re := slashRegex(p, exact)
		if re == "" {
			c.differs.add(NeedAccessRules, "%s has more than %d slashes: a request that repeats one (nginx merged them) reaches another route", p, maxSlashAlternatives)
			continue
		}
		g := &route{listeners: r.listeners, hosts: r.hosts, path: re, match: &config.PathMatch{Regex: re}, pool: t.refusalPool(), tries: 1, maxBody: "1MiB", maxBodyDefault: true,
			sorryBody: fmt.Sprintf("Refused: %s with a repeated slash; nginx merged slashes and protected it, sturdy refuses it rather than route it elsewhere.\n", p)}
		g.name = r.name + "-slashes"
		g.comments = []string{fmt.Sprintf("%s written with a repeated slash: nginx merged slashes (merge_slashes) and applied the access rules of %s; this route refuses those requests so that they never reach a wider route", p, r.name)}
		out = append(out, g)
	}
	return out
}
