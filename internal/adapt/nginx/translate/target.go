package translate

import (
	"slices"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
)

// The proxy_pass of a location: its URL, the pool or the backends (maps)
// behind it, and the Host nginx sent.

// wholeVar is the name of the one variable s is ($x or ${x}), "" when s
// is anything else.
func wholeVar(s string) string {
	v, ok := strings.CutPrefix(s, "$")
	if !ok {
		return ""
	}
	v = strings.TrimSuffix(strings.TrimPrefix(v, "{"), "}")
	for i := 0; i < len(v); i++ {
		if c := v[i]; !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return ""
		}
	}
	return v
}

// valueHost is nginx's $proxy_host where proxy_pass's variable held
// value: the host (and port, unless the scheme's own) it named.
func (t *translator) valueHost(tg *nginx.ProxyTarget, value string) string {
	u := value
	if tg.Scheme != "" {
		u = tg.Scheme + "://" + value
	}
	vt := t.site.DecodeTarget(u)
	if vt == nil {
		return value
	}
	if h, ok := strings.CutSuffix(vt.Host, map[string]string{"http": ":80", "https": ":443"}[vt.Scheme]); ok {
		return h
	}
	return vt.Host
}

// setInIf returns a set, inside an if block of sc or a scope around it,
// of a variable v uses: such a value depends on the request.
func setInIf(sc *nginx.Scope, v string) (cond, set *nginx.Directive) {
	for s := sc; s != nil; s = s.Parent {
		for _, d := range s.Local("if") {
			for _, x := range d.All("set") {
				if n := x.Arg(0); n != "" && strings.Contains(v, n) {
					return d, x
				}
			}
		}
	}
	return nil, nil
}

// proxyTarget checks the proxy_pass URL and finds its pool.
func (t *translator) proxyTarget(c *locCtx) {
	tg, pass, l := c.target, c.pass, c.content
	t.use(pass)
	if tg != nil && tg.Variable {
		if cond, d := setInIf(l.Scope, tg.Scheme+"://"+tg.Host); d != nil {
			c.blockers.add(NeedVariables, "proxy_pass %s (%s) chooses the backend per request: %s is set when if %s (%s)", pass.Arg(0), pass.Pos(), d.Arg(0), strings.Join(cond.Args, " "), d.Pos())
			return
		}
		// set $backend http://app:8080; proxy_pass $backend;
		if v, ok := expandSet(l.Scope, pass.Arg(0)); ok {
			tg = t.site.DecodeTarget(v)
			c.target = tg
		}
	}
	switch {
	case tg == nil || tg.Scheme == "" && !tg.Variable:
		c.blockers.add("", "proxy_pass %q is not a URL (%s)", pass.Arg(0), pass.Pos())
		return
	case tg.Variable && strings.HasPrefix(tg.Host, "$") && !strings.ContainsAny(tg.Host[1:], "$:") && !strings.Contains(tg.URI, "$") && tg.Scheme != "",
		tg.Variable && tg.Scheme == "" && wholeVar(pass.Arg(0)) != "":
		name := strings.TrimPrefix(strings.Trim(tg.Host, "{}"), "$")
		if tg.Scheme == "" {
			name = wholeVar(pass.Arg(0)) // proxy_pass $target: each value is a whole URL
		}
		bs, why := t.mapBackends(c, name, tg, pass)
		if bs == nil {
			c.blockers.add(NeedVariables, "proxy_pass %s (%s) chooses the backend per request: %s", pass.Arg(0), pass.Pos(), why)
			return
		}
		bs, c.methodPools = splitMethods(bs)
		if len(bs) == 0 {
			c.blockers.add(NeedVariables, "proxy_pass %s (%s) chooses the backend by method for every request", pass.Arg(0), pass.Pos())
			return
		}
		c.r.backends, c.pool, c.mapVar, c.mapValue = bs, bs[0].pool, name, bs[0].value
		if len(bs) == 1 && bs[0].cond == nil {
			c.r.backends = nil // one pool for the other methods
		}
		if tg.URI != "" {
			t.uriPart(c, tg.URI, pass)
		}
		if slices.ContainsFunc(bs, func(b backendPlan) bool { return b.cond == nil && b.weight > 1 }) {
			c.differs.add(NeedVariables, "split_clients hashed each client to one side (sticky); sturdy spreads requests evenly by weight, so one client sees both")
		}
		if sc := c.content.Scope; sc.Get1("proxy_set_header") == nil || !slices.ContainsFunc(sc.Get("proxy_set_header"), func(d *nginx.Directive) bool { return strings.EqualFold(d.Arg(0), "Host") }) {
			// nginx's default Host, $proxy_host, was the value that chose
			// the upstream: each backend sends its own.
			c.noDefaultHost = true
			for i := range c.r.backends {
				c.r.backends[i].host = t.valueHost(tg, c.r.backends[i].value)
			}
			if len(c.r.backends) == 0 {
				c.mapHost = t.valueHost(tg, c.mapValue)
			}
			for i := range c.methodPools {
				c.methodPools[i].host = t.valueHost(tg, c.methodPools[i].value)
			}
		}
		return
	case tg.Variable && strings.Contains(tg.Host, "$") || tg.Variable && tg.Scheme == "":
		c.blockers.add(NeedVariables, "proxy_pass %s (%s) chooses the backend per request", pass.Arg(0), pass.Pos())
		return
	case tg.Scheme != "http" && tg.Scheme != "https":
		c.blockers.add("", "proxy_pass %s:// (%s) is not HTTP", tg.Scheme, pass.Pos())
		return
	}
	switch {
	case tg.Variable && c.r.rewrite != nil && (tg.URI == "$uri" || tg.URI == "$uri$is_args$args"):
		// The rewritten path ($uri), as the rewrite already says.
		if !c.rawURI && tg.URI == "$uri" {
			c.differs.add(NeedRewrites, "nginx sent the backend the rewritten path without the client's query (proxy_pass %s, %s); sturdy keeps the query", pass.Arg(0), pass.Pos())
		}
		base := t.site.DecodeTarget(tg.Scheme + "://" + tg.Host)
		tg = base
		c.target = tg
	case tg.URI != "" && c.r.rewrite != nil:
		c.blockers.add(NeedRewrites, "proxy_pass %s (%s) has a URI part next to a rewrite: nginx used one or the other per request", pass.Arg(0), pass.Pos())
	case tg.Variable:
		t.uriTemplate(c, tg.URI, pass)
		base := t.site.DecodeTarget(tg.Scheme + "://" + tg.Host)
		base.URI = tg.URI
		tg = base
		c.target = tg
	case tg.URI != "":
		t.uriPart(c, tg.URI, pass)
	}
	if len(c.blockers) > 0 {
		return
	}
	c.proxyHost = tg.Host
	if h, ok := strings.CutSuffix(tg.Host, map[string]string{"http": ":80", "https": ":443"}[tg.Scheme]); ok && !tg.Unix {
		c.proxyHost = h // nginx's $proxy_host leaves the default port out
	}
	if tg.Unix {
		c.proxyHost = "localhost" // nginx's $proxy_host for a socket
	}
	p, ns := t.poolFor(tg, pass)
	if p == nil {
		c.blockers = append(c.blockers, ns...)
		return
	}
	c.differs = append(c.differs, ns...)
	c.pool = p
}
