package translate

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// Locations become routes with the same match (docs/routing.md): sturdy
// chooses among a host's routes as nginx chooses among a server's
// locations (an exact path, the longest prefix when it is ^~, regular
// expressions in order, the longest prefix).

// matchPaths sets the location's route match, or the reason it has none.
func (t *translator) matchPaths(c *locCtx) {
	l := c.loc
	switch {
	case l.Named:
		return
	case l.Modifier == "" || l.Modifier == "^~" || l.Modifier == "=":
		if !strings.HasPrefix(l.Path, "/") || !printable(l.Path) {
			c.blockers.add("", "location %q does not start with / or holds control characters", l.Path)
			return
		}
		c.paths = []string{l.Path}
		switch l.Modifier {
		case "=":
			c.match = &config.PathMatch{Exact: l.Path}
		case "^~":
			c.match = &config.PathMatch{StartsWith: l.Path, BeforeRegex: true}
		default:
			c.match = &config.PathMatch{StartsWith: l.Path}
		}
	case l.Modifier == "~" || l.Modifier == "~*":
		fold := l.Modifier == "~*"
		if !printable(l.Path) {
			c.blockers.add("", "location %q holds control characters", l.Path)
			return
		}
		if _, ok := compileRegex(l.Path, fold); !ok {
			if sup, ok := dropLookaround(l.Path); ok {
				if _, ok := compileRegex(sup, fold); ok {
					// Kept only if the location keeps clients out (superset.go).
					c.paths, c.superset = []string{l.Path}, sup
					c.match = &config.PathMatch{Regex: sup, CaseInsensitive: fold}
					return
				}
			}
			c.blockers.add(NeedRegexLocations, "regular-expression location %q uses PCRE that sturdy's RE2 does not have (look-around, back-references, possessive quantifiers)", l.Path)
			return
		}
		expr, why := nestedRegex(c.sp.srv, l, fold)
		if why != "" {
			c.blockers.add(NeedRegexLocations, "%s", why)
			return
		}
		c.paths = []string{l.Path}
		c.match = &config.PathMatch{Regex: l.Path, CaseInsensitive: fold}
		if expr != l.Path {
			c.match = &config.PathMatch{Regex: expr}
			c.differs.add(NeedRegexLocations, "location %s is nested: its route matches %q, the outer location's paths followed by the regex, which nginx found anywhere in them", locationLabel(l), expr)
		}
	default:
		c.blockers.add("", "location modifier %q is not one nginx knows", l.Modifier)
	}
}

// nestedRegex is the route regex of a regex location nested in another:
// nginx tried it only for paths the outer location matched. A regex that
// starts with the outer prefix says so itself; otherwise the outer prefix
// (or an anchored outer regex without captures) goes in front of it. why
// says when neither is possible.
func nestedRegex(srv *nginx.Server, l *nginx.Location, fold bool) (expr, why string) {
	if l.Scope.Parent == nil || l.Scope.Parent == srv.Scope {
		return l.Path, ""
	}
	var outer *nginx.Location
	for _, o := range srv.Locations {
		if o.Scope == l.Scope.Parent {
			outer = o
		}
	}
	if outer == nil {
		return l.Path, ""
	}
	inner := l.Path
	if fold {
		inner = "(?i:" + inner + ")"
	}
	re, _ := compileRegex(l.Path, fold)
	lit, _ := re.LiteralPrefix()
	switch {
	case !isRegex(outer) && (outer.Path == "/" || !fold && strings.HasPrefix(l.Path, "^") && strings.HasPrefix(lit, outer.Path)):
		return l.Path, ""
	case strings.HasPrefix(l.Path, "^"):
	case !isRegex(outer):
		return "^" + regexp.QuoteMeta(outer.Path) + ".*" + inner, ""
	case outer.Modifier == "~" && strings.HasPrefix(outer.Path, "^") && !strings.HasSuffix(outer.Path, "$"):
		if o, ok := compileRegex(outer.Path, false); ok && o.NumSubexp() == 0 {
			return "(?:" + outer.Path + ").*" + inner, ""
		}
	}
	return "", fmt.Sprintf("regular-expression location %q is nested in location %s (%s): nginx tried it only for that location's paths, and one route regex cannot say both", l.Path, locationLabel(outer), outer.Dir.Pos())
}

// prefixOnly turns the route match back into a path prefix, for what only
// works on prefixes (an alias replaces the path the route matched): nginx's
// location /x also matched /xY, sturdy's path /x does not.
func (c *locCtx) prefixOnly() {
	if c.match == nil || c.match.StartsWith == "" {
		return
	}
	l := c.loc
	c.match = nil
	if a := l.Scope.Get1("alias"); !strings.HasSuffix(l.Path, "/") && a != nil && !strings.HasSuffix(a.Arg(0), "/") {
		// location /avatar { alias /srv/avatars; }: /avatarX read
		// /srv/avatarsX, a name next to the alias, mostly none.
		c.aliasGlue = true
		c.differs.add(NeedStatic, "nginx also matched %sX (any continuation) and read the file %sX next to the alias, mostly none (404); sturdy answers 404 there", l.Path, a.Arg(0))
	} else if !strings.HasSuffix(l.Path, "/") {
		c.differs.add(NeedStatic, "nginx also matched %sX (any continuation); sturdy matches %s and %s/... (an alias works on whole path segments)", l.Path, l.Path, l.Path)
	}
	if l.Modifier == "^~" {
		c.differs.add(NeedRegexLocations, "location ^~ %s: nginx chose it before regular expressions; with its alias sturdy matches it as a path prefix, after them", l.Path)
	}
}

// glueGuards answer 404 for the paths that continue an alias location's
// last segment (/avatarx for location /avatar): ranked below its routes,
// with its access rules.
func (t *translator) glueGuards(c *locCtx, routes []*route) []*route {
	if !c.aliasGlue || c.refused() || len(c.blockers) > 0 {
		return nil
	}
	var out []*route
	for _, r := range routes {
		if r.path != c.loc.Path || r.match != nil || len(r.methods) > 0 {
			continue
		}
		g := &route{listeners: r.listeners, hosts: r.hosts, path: r.path, match: &config.PathMatch{StartsWith: r.path},
			guard: r.guard, clientCert: r.clientCert, rateLimit: r.rateLimit, connLimit: r.connLimit,
			hsts: r.hsts, maxBody: r.maxBody, maxBodyDefault: r.maxBodyDefault,
			respond: &config.Respond{Status: 404, Body: errorPage(404), ContentType: "text/html"}}
		g.name = r.name + "-continued"
		g.comments = []string{fmt.Sprintf("location %s (%s) also took %sX, which its alias turned into a name next to it: 404", c.loc.Path, c.loc.Dir.Pos(), c.loc.Path)}
		out = append(out, g)
	}
	return out
}

// isRegex reports a regular-expression location.
func isRegex(l *nginx.Location) bool { return l != nil && (l.Modifier == "~" || l.Modifier == "~*") }

// matchKey is the route's match as the duplicate check sees it.
func (r *route) matchKey() string {
	if m := r.match; m != nil {
		switch {
		case m.Exact != "":
			return "=" + m.Exact
		case m.Regex != "":
			if m.CaseInsensitive {
				return "~*" + m.Regex
			}
			return "~" + m.Regex
		case m.BeforeRegex:
			return "^~" + m.StartsWith
		default:
			if m.StartsWith == "/" {
				return "/"
			}
			return "starts_with " + m.StartsWith
		}
	}
	return r.path
}

// everything reports a route that matches every path, like path "/".
func (r *route) everything() bool {
	if m := r.match; m != nil {
		return m.StartsWith == "/"
	}
	return r.path == "/"
}
