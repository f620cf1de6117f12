package compile

// The routing features of routes (config/routing.go, docs/routing.md):
// regular expressions, templates and error pages are parsed and read here,
// once per load, and every problem is reported at its key path.

import (
	"fmt"
	"net/http"
	"net/textproto"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/proxy"
	"github.com/sturdyproxy/sturdy/internal/route"
	"github.com/sturdyproxy/sturdy/internal/route/subst"
)

// maxErrorPage bounds an error page file: it is kept in memory.
const maxErrorPage = 1 << 20

// regex compiles a regular expression written at key path p.
func (c *compiler) regex(p, expr string, fold bool) *regexp.Regexp {
	src := expr
	if fold {
		src = "(?i)" + expr
	}
	re, err := regexp.Compile(src)
	if err != nil {
		c.errorf(p, "invalid regular expression (RE2 syntax): %v", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		return nil
	}
	return re
}

// routeMatch compiles routes[i]'s match: its path and conditions.
func (c *compiler) routeMatch(i int) route.Match {
	rc := c.cfg.Routes[i]
	p := "routes[" + strconv.Itoa(i) + "].match"
	m := route.Match{Path: route.PathMatch{Kind: route.Prefix, Value: rc.Path}}
	mc := rc.Match
	if mc == nil {
		return m
	}
	if pm := mc.Path; pm != nil {
		m.Path = route.PathMatch{BeforeRegex: pm.BeforeRegex}
		switch {
		case pm.Exact != "":
			m.Path.Kind, m.Path.Value = route.Exact, pm.Exact
		case pm.StartsWith != "":
			m.Path.Kind, m.Path.Value = route.StartsWith, pm.StartsWith
		case pm.Regex != "":
			m.Path.Kind, m.Path.Value = route.Regex, pm.Regex
			m.Path.Re = c.regex(p+".path.regex", pm.Regex, pm.CaseInsensitive)
			if m.Path.Re == nil {
				m.Path.Re = regexp.MustCompile(`$^`) // never matches; the error stops the load
			}
		default:
			m.Path.Kind, m.Path.Value = route.Prefix, pm.Prefix
		}
	}
	m.Methods = mc.Methods
	for j, h := range mc.Headers {
		m.Headers = append(m.Headers, route.Header{
			Name:       textproto.CanonicalMIMEHeaderKey(h.Name),
			ValueMatch: c.valueMatch(fmt.Sprintf("%s.headers[%d]", p, j), h),
		})
	}
	for j, q := range mc.Query {
		m.Query = append(m.Query, route.Query{Name: q.Name, ValueMatch: c.valueMatch(fmt.Sprintf("%s.query[%d]", p, j), q)})
	}
	return m
}

func (c *compiler) valueMatch(p string, v config.ValueMatch) route.ValueMatch {
	switch {
	case v.Present != nil && *v.Present:
		return route.ValueMatch{Kind: route.ValuePresent}
	case v.Present != nil:
		return route.ValueMatch{Kind: route.ValueAbsent}
	case v.Regex != "":
		re := c.regex(p+".regex", v.Regex, false)
		if re == nil {
			re = regexp.MustCompile(`$^`)
		}
		return route.ValueMatch{Kind: route.ValueRegex, Value: v.Regex, Re: re}
	}
	return route.ValueMatch{Kind: route.ValueExact, Value: v.Exact}
}

// template parses a template written at key path p.
func (c *compiler) template(p, s string, o subst.Options) *subst.Template {
	t, err := subst.Parse(s, o)
	if err != nil {
		c.errorf(p, "%v", err)
		return nil
	}
	return t
}

// requestIDOf is the request id section that applies to routes[i].
func (c *compiler) requestIDOf(rc config.Route) *config.RequestID {
	if rc.RequestID != nil {
		return rc.RequestID
	}
	return c.cfg.RequestID
}

// routing compiles the routing features of routes[i] into r; its pools
// are built already. r.Routing stays nil for a route that uses none.
func (c *compiler) routing(i int, r *proxy.Route, m route.Match) {
	rc := c.cfg.Routes[i]
	p := "routes[" + strconv.Itoa(i) + "]"
	g := &proxy.Routing{}
	used := false
	if m.Path.Kind == route.Regex {
		g.PathRegex = m.Path.Re
	}
	rid := c.requestIDOf(rc)
	if rid.On() {
		g.RequestID = &proxy.RequestID{
			Header:        textproto.CanonicalMIMEHeaderKey(rid.Header),
			AcceptAny:     rid.Accept == "any",
			AcceptTrusted: rid.Accept == "trusted",
			Response:      rid.Response == nil || *rid.Response,
		}
		used = true
	}
	hdr := subst.Options{Context: subst.Header, Regex: g.PathRegex, RequestID: g.RequestID != nil}
	url := subst.Options{Context: subst.URL, Regex: g.PathRegex, RequestID: g.RequestID != nil}
	prefix := proxy.Prefix{Value: m.Path.Value, Segments: m.Path.Kind == route.Prefix}

	if rd := rc.Redirect; rd != nil {
		out := &proxy.Redirect{Status: rd.Status, Scheme: rd.Scheme, Host: rd.Host, Port: rd.Port, Match: prefix}
		q := p + ".redirect"
		switch {
		case rd.URL != "":
			out.URL = c.template(q+".url", rd.URL, url)
		case rd.Path != "":
			out.Path = c.template(q+".path", rd.Path, url)
		case rd.Prefix != nil:
			out.Prefix = c.template(q+".prefix", *rd.Prefix, url)
		}
		g.Redirect, used = out, true
	}
	if rs := rc.Respond; rs != nil {
		if rs.Close {
			g.Respond = proxy.NewClose()
		} else {
			g.Respond = proxy.NewRespond(rs.Status, rs.ContentType, []byte(rs.Body))
		}
		used = true
	}
	if rw := rc.Rewrite; rw != nil {
		q := p + ".rewrite"
		out := &proxy.Rewrite{Match: prefix}
		if rw.Prefix != nil {
			out.Prefix = c.template(q+".prefix", *rw.Prefix, url)
		} else {
			o := url
			if rw.Regex != "" {
				out.Regex = c.regex(q+".regex", rw.Regex, rw.CaseInsensitive)
				o.Regex = out.Regex
			}
			out.Path = c.template(q+".path", rw.Path, o)
		}
		if rw.Query != "" {
			o := url
			if out.Regex != nil {
				o.Regex = out.Regex // its captures, as the path's
			}
			out.Query = c.template(q+".query", rw.Query, o)
		}
		if rw.Rematch {
			r.Rematch = out // routed again before anything of this route runs
		} else {
			g.Rewrite, used = out, true
		}
	}
	if h := c.headerRules(p+".request_headers", rc.RequestHeaders, nil, hdr); h != nil || rc.ForwardingHeaders != nil {
		g.Request, used = withoutForwarding(h, rc.ForwardingHeaders), true
	}
	if h := c.headerRules(p+".response_headers", rc.ResponseHeaders, rc.HideResponseHeaders, hdr); h != nil {
		g.Response, used = h, true
	}
	if pages := c.errorPages(p, rc); pages != nil {
		g.ErrorPages, used = pages, true
	}
	var routeHost *subst.Template
	if rc.HostHeader != "" {
		routeHost = c.template(p+".host_header", rc.HostHeader, subst.Options{Context: subst.Header, Regex: g.PathRegex, ProxyHost: true, RequestID: g.RequestID != nil})
	}
	if rc.Pool != "" {
		r.HostHeader = c.hostHeader(routeHost, rc.Pool)
	}
	if len(rc.Backends) > 0 {
		g.Backends, used = c.backends(p, rc, routeHost, hdr), true
	}
	if mc := rc.Mirror; mc != nil {
		g.Mirror, used = c.mirror(p, rc, r), true
	}
	if used {
		r.Routing = g
	}
}

// hostHeader is the Host template of a route on pool: the route's
// host_header, else the pool's, else nil (the client's Host).
func (c *compiler) hostHeader(routeHost *subst.Template, pool string) *subst.Template {
	if routeHost != nil {
		return routeHost
	}
	pi := c.poolIndex(pool)
	if pi < 0 {
		return nil
	}
	return c.poolHost[pi]
}

// poolHosts parses every pool's host_header once.
func (c *compiler) poolHosts() {
	c.poolHost = make([]*subst.Template, len(c.cfg.Pools))
	for i, pc := range c.cfg.Pools {
		if pc.HostHeader != "" {
			// A pool's rule serves every route: no captures, no request id.
			c.poolHost[i] = c.template("pools["+strconv.Itoa(i)+"].host_header", pc.HostHeader, subst.Options{Context: subst.Header, ProxyHost: true})
		}
	}
}

// headerRules compiles one set of rules; hide are removed first
// (hide_response_headers). It returns nil when there are none.
func (c *compiler) headerRules(p string, h *config.HeaderRules, hide []string, o subst.Options) *proxy.HeaderRules {
	if h == nil && len(hide) == 0 {
		return nil
	}
	out := &proxy.HeaderRules{}
	for _, n := range hide {
		out.Remove = append(out.Remove, textproto.CanonicalMIMEHeaderKey(n))
	}
	if h == nil {
		return out
	}
	for _, n := range h.Remove {
		out.Remove = append(out.Remove, textproto.CanonicalMIMEHeaderKey(n))
	}
	values := func(key string, m map[string]string) []proxy.HeaderValue {
		names := make([]string, 0, len(m))
		for n := range m {
			names = append(names, n)
		}
		slices.Sort(names)
		var list []proxy.HeaderValue
		for _, n := range names {
			if t := c.template(p+"."+key+"."+n, m[n], o); t != nil {
				list = append(list, proxy.NewHeaderValue(textproto.CanonicalMIMEHeaderKey(n), t))
			}
		}
		return list
	}
	out.Set = values("set", h.Set)
	out.Add = values("add", h.Add)
	return out
}

// withoutForwarding adds to h (nil: no rules) the removal of sturdy's
// forwarding headers that keep are not: routes[].forwarding_headers. The
// removal runs before the route's own set and add, so a rule still wins;
// a route without the key pays nothing.
func withoutForwarding(h *proxy.HeaderRules, keep []string) *proxy.HeaderRules {
	if h == nil {
		h = &proxy.HeaderRules{}
	}
	if keep == nil {
		return h
	}
	for _, k := range config.SetForwardingHeaders {
		if !slices.ContainsFunc(keep, func(s string) bool { return strings.EqualFold(strings.TrimSpace(s), k) }) {
			h.Remove = append(h.Remove, k)
		}
	}
	return h
}

// errorPages reads routes[i]'s error pages.
func (c *compiler) errorPages(p string, rc config.Route) map[int]*proxy.ErrorPage {
	if len(rc.ErrorPages) == 0 {
		return nil
	}
	out := map[int]*proxy.ErrorPage{}
	for j, e := range rc.ErrorPages {
		q := fmt.Sprintf("%s.error_pages[%d].file", p, j)
		body, ok := c.readFile(q, "the error page", e.File)
		if !ok {
			continue
		}
		if len(body) > maxErrorPage {
			c.errorf(q, "the error page is %d bytes; keep it under %d (it is held in memory)", len(body), maxErrorPage)
			continue
		}
		ct := e.ContentType
		if ct == "" {
			ct = "text/plain; charset=utf-8"
			if strings.HasPrefix(strings.TrimSpace(string(body)), "<") {
				ct = "text/html; charset=utf-8"
			}
		}
		pg := &proxy.ErrorPage{Status: e.Status, ContentType: ct, Body: body}
		for _, code := range e.Codes {
			out[code] = pg
		}
	}
	return out
}

// backends compiles a split route's pools, each with its upstream client,
// fallback, hash key and Host.
func (c *compiler) backends(p string, rc config.Route, routeHost *subst.Template, hdr subst.Options) *proxy.Backends {
	var when, weighted []*proxy.Backend
	for j, bc := range rc.Backends {
		q := fmt.Sprintf("%s.backends[%d]", p, j)
		pi := c.poolIndex(bc.Pool)
		if pi < 0 {
			continue // config.Load refused it
		}
		pc := c.cfg.Pools[pi]
		be := &proxy.Backend{
			Pool:     c.rt.poolBy[bc.Pool],
			Upstream: c.upstream(rc, pc),
			Host:     c.hostHeader(routeHost, bc.Pool),
			Weight:   uint64(bc.Weight),
		}
		if bc.HostHeader != "" {
			be.Host = c.template(q+".host_header", bc.HostHeader, subst.Options{Context: subst.Header, ProxyHost: true, RequestID: hdr.RequestID})
		}
		if fb := cmpOr(bc.Fallback, rc.Fallback.Pool); fb != "" {
			be.Fallback = c.rt.poolBy[fb]
		}
		if pc.Unresolved != "" {
			be.Respond = proxy.NewRespond(http.StatusInternalServerError, "text/plain; charset=utf-8", []byte("500 Internal Server Error: unresolved backend: "+pc.Unresolved+".\n"))
		}
		be.HashKind, be.HashName = c.hashKey(pi, pc)
		be.Request = c.headerRules(q+".request_headers", bc.RequestHeaders, nil, hdr)
		switch {
		case bc.Header != nil:
			vm := c.valueMatch(q+".header", *bc.Header)
			be.Header, be.When = textproto.CanonicalMIMEHeaderKey(bc.Header.Name), &vm
			when = append(when, be)
		case bc.Cookie != nil:
			vm := c.valueMatch(q+".cookie", *bc.Cookie)
			be.Cookie, be.When = bc.Cookie.Name, &vm
			when = append(when, be)
		default:
			weighted = append(weighted, be)
		}
	}
	return proxy.NewBackends(when, weighted)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// mirror compiles routes[i]'s mirror: its own pool, through that pool's
// health model, with the route's timeouts.
func (c *compiler) mirror(p string, rc config.Route, r *proxy.Route) *proxy.Mirror {
	mc := rc.Mirror
	pi := c.poolIndex(mc.Pool)
	if pi < 0 {
		return nil
	}
	m := proxy.NewMirror(proxy.MirrorConfig{
		Transport:   &proxy.PoolTransport{Pool: c.rt.poolBy[mc.Pool], Upstream: c.upstream(rc, c.cfg.Pools[pi])},
		Num:         mc.Share.Num,
		Den:         mc.Share.Den,
		MaxBody:     int64(mc.MaxBody),
		MaxInFlight: int64(mc.MaxInFlight),
		Timeout:     mc.Timeout.D(),
		Stats:       &r.Stats.Mirror,
	})
	c.rt.mirrors = append(c.rt.mirrors, m)
	return m
}
