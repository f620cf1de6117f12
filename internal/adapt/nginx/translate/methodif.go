package translate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// `if ($request_method = OPTIONS) { add_header ...; return 204; }` in a
// location (a CORS preflight) becomes a companion route: the location's
// paths and access rules, match.methods [OPTIONS], and a fixed answer
// with the block's headers. The location's other requests go on as
// before.

// methodAnswer is one such if block.
type methodAnswer struct {
	method  string
	respond *config.Respond
	headers []headerRule
	dir     *nginx.Directive
}

// methodIf reads `if ($request_method = M)`, quotes allowed.
func methodIf(d *nginx.Directive) (string, bool) {
	s := strings.ReplaceAll(strings.ReplaceAll(strings.Join(d.Args, " "), `"`, ""), "'", "")
	f := strings.Fields(strings.NewReplacer("(", " ", ")", " ").Replace(s))
	if len(f) != 3 || f[0] != "$request_method" || f[1] != "=" || !slices.Contains(config.LimitExceptMethods, f[2]) {
		return "", false
	}
	return f[2], true
}

// methodIfs finds the location's method if blocks that answer
// themselves with literal headers and a fixed answer.
func (t *translator) methodIfs(c *locCtx, l *nginx.Location) {
	for _, d := range l.Local("if") {
		m, ok := methodIf(d)
		if !ok || ifRefuses(d) != "" {
			continue
		}
		var ret *nginx.Directive
		var hs []headerRule
		fits := len(d.Children) > 0
		for _, x := range d.Children {
			switch {
			case x.Name == "return" && ret == nil:
				ret = x
			case x.Name == "add_header" && len(x.Args) >= 2 && !strings.Contains(x.Arg(1), "$") && printable(x.Arg(1)) && validFieldName(x.Arg(0)):
				if !strings.EqualFold(x.Arg(0), "Content-Length") { // sturdy sets it
					hs = append(hs, headerRule{x.Arg(0), x.Arg(1)})
				}
			default:
				fits = false
			}
		}
		if !fits || ret == nil {
			continue
		}
		code, text, hasText, why := fixedReturn(ret)
		if code == 0 || why != "" {
			continue
		}
		if len(hs) == 0 && len(l.Local("add_header")) > 0 {
			continue // nginx inherited the location's headers into the block
		}
		rs := fixedRespond(l.Scope, code, text, hasText)
		t.use(d)
		t.useTree(d)
		c.methodAnswers = append(c.methodAnswers, methodAnswer{method: m, respond: rs, headers: hs, dir: d})
	}
}

// handledIf reports an if block a method answer stands for.
func (c *locCtx) handledIf(d *nginx.Directive) bool {
	return slices.ContainsFunc(c.methodAnswers, func(a methodAnswer) bool { return a.dir == d })
}

// methodRoutes are the companion routes of a location's routes.
func (t *translator) methodRoutes(c *locCtx, routes []*route) []*route {
	if c.refused() || len(c.blockers) > 0 {
		return nil
	}
	var out []*route
	for _, r := range routes {
		for _, a := range c.methodAnswers {
			g := &route{listeners: r.listeners, hosts: r.hosts, path: r.path, match: r.match, def: false,
				guard: r.guard, clientCert: r.clientCert, rateLimit: r.rateLimit, connLimit: r.connLimit,
				hsts: r.hsts, maxBody: r.maxBody, maxBodyDefault: r.maxBodyDefault,
				methods: []string{a.method}, respond: a.respond, respAdd: a.headers}
			g.name = r.name + "-" + strings.ToLower(a.method)
			g.comments = []string{fmt.Sprintf("if %s (%s): nginx answered %s requests itself", strings.Join(a.dir.Args, " "), a.dir.Pos(), a.method)}
			out = append(out, g)
		}
		for _, mp := range c.methodPools {
			g := *r
			g.def, g.methods, g.pool, g.backends = false, mp.methods, mp.pool, nil
			if mp.host != "" {
				g.hostHeader = mp.host // nginx's $proxy_host for this pool
			}
			g.reqSet = slices.DeleteFunc(slices.Clone(r.reqSet), func(h headerRule) bool { return slices.Contains(c.mapHeaders, h.name) })
			for _, name := range c.mapHeaders {
				g.reqSet = append(g.reqSet, headerRule{name, strings.ReplaceAll(mp.value, "$", "$$")})
			}
			g.name = r.name + "-" + strings.ToLower(strings.Join(mp.methods, "-"))
			g.comments = append(slices.Clone(r.comments), fmt.Sprintf("nginx's map on $request_method sent %s to %s", strings.Join(mp.methods, " "), mp.pool.name))
			out = append(out, &g)
		}
	}
	return out
}
