package translate

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// The redirect to HTTPS. When every server block on a plain listener
// sends every request to https://$host$request_uri (a server-level
// return, a location / that returns it next to ACME challenge locations,
// or `if ($scheme = http)`), the listener gets redirect_https (docs/tls.md),
// which answers the same, and lets ACME HTTP-01 challenges through to the
// routes.

// redirectPlan is how a server block redirects to HTTPS.
type redirectPlan struct {
	status int
	port   int
	// via is the directive that redirects; the server's other directives
	// of that kind are the same redirect.
	via   *nginx.Directive
	wide  bool // a server-level return: every request, before any location
	notes notes
}

// httpsRedirect reports whether d (a return) sends the request to the same
// host and URI over https with a status redirect_https has.
func httpsRedirect(d *nginx.Directive, srv *nginx.Server) (*redirectPlan, bool) {
	if d == nil || len(d.Args) != 2 {
		return nil, false
	}
	p := &redirectPlan{via: d, port: config.DefaultRedirectPort}
	switch d.Arg(0) {
	case "301":
		p.status = 301
	case "308":
		p.status = 308
	default:
		return nil, false
	}
	rest, ok := strings.CutPrefix(d.Arg(1), "https://")
	if !ok {
		return nil, false
	}
	hostPart, ok := strings.CutSuffix(rest, "$request_uri")
	if !ok {
		return nil, false
	}
	host, port := hostPart, ""
	if h, pt, err := net.SplitHostPort(hostPart); err == nil {
		host, port = h, pt
	}
	switch host {
	case "$host":
	case "$http_host":
		p.notes.add(NeedRedirects, "nginx's %s kept a port the client put in Host; sturdy's redirect leaves it out", d.Pos())
	case "$server_name":
		if names := realNames(srv); len(names) != 1 || len(srv.DefaultFor) > 0 {
			// Every Host it answers goes to its first name: a route's
			// redirect (answer.go), not redirect_https.
			return nil, false
		}
	default:
		// A default server sends unknown hosts to its own name: that is a
		// route's redirect (answer.go), not redirect_https.
		if names := realNames(srv); len(names) != 1 || !strings.EqualFold(names[0], host) || len(srv.DefaultFor) > 0 {
			return nil, false
		}
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return nil, false
		}
		p.port = n
	}
	return p, true
}

func realNames(srv *nginx.Server) []string {
	var out []string
	for _, n := range srv.Names {
		if n != "" && n != "_" && !strings.HasPrefix(n, "~") && !strings.Contains(n, "*") {
			out = append(out, n)
		}
	}
	return out
}

// schemeIsHTTP reports `if ($scheme = http)` and `if ($scheme != https)`.
func schemeIsHTTP(d *nginx.Directive) bool {
	c := strings.ReplaceAll(strings.ReplaceAll(strings.Join(d.Args, " "), `"`, ""), "'", "")
	c = strings.Join(strings.Fields(strings.NewReplacer("(", " ", ")", " ").Replace(c)), " ")
	return c == "$scheme = http" || c == "$scheme != https"
}

// refusesSome reports a server whose own if blocks refuse some requests
// before its return (an allow-list, or a return 401/403/444): the
// listener's redirect_https would redirect those too.
func refusesSome(srv *nginx.Server) bool {
	return slices.ContainsFunc(srv.Local("if"), func(d *nginx.Directive) bool {
		_, _, ok := methodAllowList(srv.Scope, d)
		return ok || ifRefuses(d) != "" || hostAllowList(srv.Scope, d) != nil
	})
}

// serverRedirect finds how srv redirects plain requests to HTTPS, nil when
// it does not redirect all of them.
func (t *translator) serverRedirect(srv *nginx.Server, plainOnly bool) *redirectPlan {
	if d := last(srv.Local("return")); d != nil {
		if p, ok := httpsRedirect(d, srv); ok && plainOnly && !refusesSome(srv) {
			p.wide = true
			return p
		}
		return nil
	}
	for _, d := range srv.Local("if") {
		if r := d.Child("return"); r != nil && schemeIsHTTP(d) && len(d.Children) == 1 {
			if p, ok := httpsRedirect(r, srv); ok {
				p.via = d
				return p
			}
		}
	}
	if !plainOnly || len(srv.Local("rewrite")) > 0 {
		return nil
	}
	var p *redirectPlan
	for _, l := range srv.Locations {
		if l.Named {
			continue
		}
		if strings.HasPrefix(l.Path, "/.well-known/acme-challenge") && l.Modifier != "~" && l.Modifier != "~*" {
			continue // passed through to the routes by redirect_https
		}
		if l.Path != "/" || l.Modifier != "" && l.Modifier != "^~" {
			return nil // another path that nginx answered otherwise
		}
		q, ok := httpsRedirect(last(l.Local("return")), srv)
		if !ok || len(l.Local("if"))+len(l.Local("rewrite")) > 0 {
			return nil
		}
		p = q
	}
	return p
}

// redirects sets redirect_https on each plain listener whose every server
// redirects every request to https.
func (t *translator) redirects() {
	t.redirected = map[*nginx.Server]*redirectPlan{}
	for _, ln := range t.listenersOut {
		if ln.ssl {
			continue
		}
		var plans []*redirectPlan
		var servers []*nginx.Server
		for _, srv := range t.site.Servers {
			on, plain := false, true
			for _, l := range srv.Listens {
				if t.listenerOf[l.Addr] == ln {
					on = true
				}
				if l.SSL || serverSSL(srv) {
					plain = false
				}
			}
			if !on {
				continue
			}
			p := t.serverRedirect(srv, plain)
			if p == nil || len(plans) > 0 && (p.status != plans[0].status || p.port != plans[0].port) {
				plans = nil
				break
			}
			plans, servers = append(plans, p), append(servers, srv)
		}
		if len(plans) == 0 {
			continue
		}
		ln.redirect = &config.RedirectHTTPS{Status: plans[0].status, Port: plans[0].port}
		var from []string
		for i, srv := range servers {
			t.redirected[srv] = plans[i]
			from = append(from, fmt.Sprintf("%s (%s)", serverLabel(srv), plans[i].via.Pos()))
		}
		slices.Sort(from)
		ln.redirectNote = "Every server on this address sent clients to https: " + strings.Join(from, ", ") + ". ACME HTTP-01 challenges (/.well-known/acme-challenge/) still reach the routes."
	}
}

// serverWide reports a redirect that nginx ran before choosing a location
// (a server-level return): no location of the server was ever reached.
func (p *redirectPlan) serverWide() bool { return p != nil && p.via.Name == "return" && p.wide }

// note is what the server's block says about its redirect.
func (p *redirectPlan) note() string {
	return fmt.Sprintf("nginx redirected plain requests to https (%s); the listener's redirect_https does the same", p.via.Pos())
}
