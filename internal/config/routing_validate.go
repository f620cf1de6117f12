package config

// Validation of the routing keys (routing.go). Regular expressions and
// templates are parsed by the compile step, which reports them with the
// same key paths.

import (
	"fmt"
	"net/textproto"
	"slices"
	"strings"
)

// Headers sturdy owns on the way to the backend and back: hop-by-hop
// fields and the message framing. Rules may not touch them; Host has its
// own key (host_header).
var ownedHeaders = map[string]string{
	"Connection":          "hop-by-hop",
	"Keep-Alive":          "hop-by-hop",
	"Proxy-Connection":    "hop-by-hop",
	"Proxy-Authenticate":  "hop-by-hop",
	"Proxy-Authorization": "hop-by-hop",
	"Te":                  "hop-by-hop",
	"Trailer":             "hop-by-hop",
	"Transfer-Encoding":   "hop-by-hop",
	"Upgrade":             "hop-by-hop",
	"Content-Length":      "the message framing",
	"Host":                "the Host header",
}

// ForwardingHeaders are the headers sturdy sets on the way to the backend
// (docs/config.md). Rules may change them, and `sturdy check` warns.
var ForwardingHeaders = []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip", "Forwarded", "Via"}

func (v *validator) routing(pools map[string]bool) {
	c := v.c
	if r := c.RequestID; r != nil {
		v.requestID("request_id", r)
	}
	for i := range c.Routes {
		r := &c.Routes[i]
		p := fmt.Sprintf("routes[%d]", i)
		v.routeMatch(p, r)
		v.redirect(p, r)
		v.respond(p, r)
		v.rewrite(p, r)
		v.headerRules(p+".request_headers", r.RequestHeaders)
		v.headerRules(p+".response_headers", r.ResponseHeaders)
		for j, h := range r.HideResponseHeaders {
			v.ruleHeaderName(fmt.Sprintf("%s.hide_response_headers[%d]", p, j), h)
		}
		if c.Has(p+".host_header") && strings.TrimSpace(r.HostHeader) == "" {
			v.errorf(p+".host_header", "empty; leave it out to pass the client's Host, or give a name, $host or $proxy_host")
		}
		v.forwardingHeaders(p+".forwarding_headers", r.ForwardingHeaders)
		v.backends(p, r, pools)
		v.mirror(p, r, pools)
		if r.RequestID != nil {
			v.requestID(p+".request_id", r.RequestID)
		}
		v.errorPages(p, r)
	}
	for i, pl := range c.Pools {
		p := fmt.Sprintf("pools[%d].host_header", i)
		if c.Has(p) && strings.TrimSpace(pl.HostHeader) == "" {
			v.errorf(p, "empty; leave it out to pass the client's Host, or give a name or $proxy_host")
		}
	}
}

// SetForwardingHeaders are the headers routes[].forwarding_headers
// chooses from: those sturdy sets from the connection. Via and Forwarded
// are not among them (sturdy always sends Via and never makes Forwarded).
var SetForwardingHeaders = []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip"}

func (v *validator) forwardingHeaders(p string, list []string) {
	seen := map[string]bool{}
	for j, h := range list {
		q := fmt.Sprintf("%s[%d]", p, j)
		k := textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(h))
		switch {
		case !slices.Contains(SetForwardingHeaders, k):
			v.errorf(q, "%q is not a header sturdy sets itself; give some of X-Forwarded-For, X-Forwarded-Host, X-Forwarded-Proto, X-Real-IP (or [] for none), and set others with request_headers", h)
		case seen[k]:
			v.errorf(q, "%s is listed twice", h)
		}
		seen[k] = true
	}
}

// pathOf is the route's path condition kind and value: match.path, else
// the path key (a prefix).
func (r *Route) pathOf() (kind, value string) {
	if r.Match == nil || r.Match.Path == nil {
		return "prefix", r.Path
	}
	m := r.Match.Path
	switch {
	case m.Exact != "":
		return "exact", m.Exact
	case m.StartsWith != "":
		return "starts_with", m.StartsWith
	case m.Regex != "":
		return "regex", m.Regex
	}
	return "prefix", m.Prefix
}

func (v *validator) routeMatch(p string, r *Route) {
	m := r.Match
	if m == nil {
		return
	}
	mp := p + ".match"
	if pm := m.Path; pm != nil {
		if v.c.Has(p + ".path") {
			v.errorf(p+".path", "give the path either here or as match.path, not both")
		}
		n := 0
		for _, s := range []string{pm.Exact, pm.Prefix, pm.StartsWith, pm.Regex} {
			if s != "" {
				n++
			}
		}
		switch {
		case n != 1:
			v.errorf(mp+".path", "give exactly one of exact, prefix, starts_with or regex, like { prefix: /api }")
		case pm.Regex == "":
			kind, val := r.pathOf()
			if !strings.HasPrefix(val, "/") {
				v.errorf(mp+".path."+kind, "%q must start with /", val)
			}
		}
		if pm.CaseInsensitive && pm.Regex == "" {
			v.errorf(mp+".path.case_insensitive", "only for regex; exact and prefix paths are case-sensitive")
		}
		if pm.BeforeRegex && pm.Prefix == "" && pm.StartsWith == "" {
			v.errorf(mp+".path.before_regex", "only for prefix or starts_with (nginx's ^~)")
		}
	}
	for j, s := range m.Methods {
		if s == "" || strings.ContainsFunc(s, func(c rune) bool { return c < 'A' || c > 'Z' }) {
			v.errorf(fmt.Sprintf("%s.methods[%d]", mp, j), "invalid method %q; expected a name like GET or POST", s)
		}
	}
	v.valueMatches(mp+".headers", m.Headers, true)
	v.valueMatches(mp+".query", m.Query, false)
}

func (v *validator) valueMatches(p string, list []ValueMatch, header bool) {
	seen := map[string]int{}
	for j := range list {
		q := fmt.Sprintf("%s[%d]", p, j)
		m := &list[j]
		key := m.Name
		if header {
			key = textproto.CanonicalMIMEHeaderKey(m.Name)
		}
		if k, dup := seen[key]; dup {
			v.errorf(q+".name", "%q is already matched by %s[%d]; give one condition per name", m.Name, p, k)
		}
		seen[key] = j
		v.valueMatch(q, m, header)
	}
}

func (v *validator) valueMatch(p string, m *ValueMatch, header bool) {
	switch {
	case m.Name == "":
		v.errorf(p+".name", "missing; expected the name to match")
	case header && !validHeaderName(m.Name):
		v.errorf(p+".name", "invalid header name %q", m.Name)
	}
	n := 0
	if m.Exact != "" {
		n++
	}
	if m.Regex != "" {
		n++
	}
	if m.Present != nil {
		n++
	}
	if n != 1 {
		v.errorf(p, "give exactly one of exact, regex or present, like { name: %s, exact: \"1\" }", cmpOr(m.Name, "X-Canary"))
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (v *validator) redirect(p string, r *Route) {
	rd := r.Redirect
	if rd == nil {
		return
	}
	q := p + ".redirect"
	if rd.URL != "" && (rd.Scheme != "" || rd.Host != "" || rd.Port != 0 || rd.Path != "" || rd.Prefix != nil) {
		v.errorf(q+".url", "url is the whole Location; leave out scheme, host, port, path and prefix, or leave out url")
	}
	if rd.URL != "" && !strings.HasPrefix(rd.URL, "/") && !strings.HasPrefix(rd.URL, "$") && !strings.Contains(rd.URL, "://") {
		v.errorf(q+".url", "%q is neither absolute (https://...) nor a path (/...)", rd.URL)
	}
	switch rd.Scheme {
	case "", "http", "https":
	default:
		v.errorf(q+".scheme", "unknown scheme %q; expected http or https", rd.Scheme)
	}
	if rd.Port < 0 || rd.Port > 65535 {
		v.errorf(q+".port", "port %d out of range; expected 1 to 65535", rd.Port)
	}
	if rd.Host != "" && strings.ContainsAny(rd.Host, "/:?# ") {
		v.errorf(q+".host", "invalid host %q; give a name only (the port has its own key)", rd.Host)
	}
	if rd.Path != "" && rd.Prefix != nil {
		v.errorf(q+".prefix", "give path (the whole path) or prefix (the matched prefix), not both")
	}
	if rd.Path != "" && !strings.HasPrefix(rd.Path, "/") && !strings.HasPrefix(rd.Path, "$") {
		v.errorf(q+".path", "%q must start with /", rd.Path)
	}
	if rd.Prefix != nil {
		v.prefixReplacement(q+".prefix", r, *rd.Prefix)
	}
	switch rd.Status {
	case 301, 302, 303, 307, 308:
	default:
		v.errorf(q+".status", "status %d is not a redirect; expected 301, 302, 303, 307 or 308", rd.Status)
	}
	for _, k := range []string{"pool", "backends", "static", "rewrite", "mirror", "cache", "fallback"} {
		if v.c.Has(p + "." + k) {
			v.errorf(p+"."+k, "a redirect route answers every request itself; %s is never used", k)
		}
	}
}

// prefixReplacement checks a redirect's or rewrite's prefix: the route
// must match a prefix.
func (v *validator) prefixReplacement(p string, r *Route, repl string) {
	if kind, _ := r.pathOf(); kind != "prefix" && kind != "starts_with" {
		v.errorf(p, "replaces the prefix the route matched, but the route matches a %s path; use path instead", kind)
	}
	if repl != "" && !strings.HasPrefix(repl, "/") && !strings.HasPrefix(repl, "$") {
		v.errorf(p, "%q must start with / (or be empty, which strips the prefix)", repl)
	}
	if strings.ContainsAny(repl, "?#") {
		v.errorf(p, "%q holds ? or #; the query is kept as the client sent it", repl)
	}
}

func (v *validator) rewrite(p string, r *Route) {
	rw := r.Rewrite
	if rw == nil {
		return
	}
	q := p + ".rewrite"
	switch {
	case (rw.Prefix != nil) == (rw.Path != ""):
		v.errorf(q, "give exactly one of prefix (replace the matched prefix) or path (replace the whole path)")
	case rw.Prefix != nil:
		v.prefixReplacement(q+".prefix", r, *rw.Prefix)
		if rw.Regex != "" {
			v.errorf(q+".regex", "regex goes with path, not prefix")
		}
	default:
		if !strings.HasPrefix(rw.Path, "/") && !strings.HasPrefix(rw.Path, "$") {
			v.errorf(q+".path", "%q must start with /", rw.Path)
		}
		if strings.ContainsAny(rw.Path, "?#") {
			v.errorf(q+".path", "%q holds ? or #; the query is kept as the client sent it", rw.Path)
		}
	}
	if rw.CaseInsensitive && rw.Regex == "" {
		v.errorf(q+".case_insensitive", "only with regex")
	}
	switch {
	case strings.HasPrefix(rw.Query, "?") || strings.ContainsAny(rw.Query, "#\r\n"):
		v.errorf(q+".query", "%q: give the query without ? (and no #)", rw.Query)
	case rw.Query != "" && rw.Rematch:
		v.errorf(q+".query", "a rewrite that rematches keeps the client's query")
	}
	if rw.Rematch {
		for _, k := range []string{"pool", "backends", "static", "respond", "redirect", "mirror", "cache", "fallback", "error_pages"} {
			if v.c.Has(p + "." + k) {
				v.errorf(p+"."+k, "a route whose rewrite rematches hands every request to the route of the new path; %s is never used", k)
			}
		}
	}
}

func (v *validator) headerRules(p string, h *HeaderRules) {
	if h == nil {
		return
	}
	seen := map[string]string{}
	use := func(q, name string) {
		v.ruleHeaderName(q, name)
		k := textproto.CanonicalMIMEHeaderKey(name)
		if prev, dup := seen[k]; dup {
			v.errorf(q, "%s is already changed by %s; give one rule per header", name, prev)
		}
		seen[k] = q
	}
	for _, rule := range h.Rules() {
		q := p + "." + rule.Key
		use(q, rule.Name)
		if strings.ContainsAny(rule.Value, "\r\n\x00") {
			v.errorf(q, "the value holds a line break or NUL")
		}
	}
}

// RuleHeaderProblem says why header rules may not change the header
// name, "" when they may: an invalid name, a hop-by-hop header, the
// framing, or Host (which host_header sets). Translations from other
// configs (Kubernetes) check it to leave out what validation would refuse.
func RuleHeaderProblem(name string) string {
	if !validHeaderName(name) {
		return fmt.Sprintf("invalid header name %q", name)
	}
	if why, ok := ownedHeaders[textproto.CanonicalMIMEHeaderKey(name)]; ok {
		return fmt.Sprintf("%s is %s, which sturdy handles itself", name, why)
	}
	return ""
}

func (v *validator) ruleHeaderName(p, name string) {
	if !validHeaderName(name) {
		v.errorf(p, "invalid header name %q", name)
		return
	}
	switch why, ok := ownedHeaders[textproto.CanonicalMIMEHeaderKey(name)]; {
	case ok && why == "the Host header":
		v.errorf(p, "the Host the backend gets is set by host_header (default: the client's)")
	case ok:
		v.errorf(p, "%s is %s, which sturdy handles itself; rules cannot change it", name, why)
	}
}

func (v *validator) backends(p string, r *Route, pools map[string]bool) {
	if len(r.Backends) == 0 {
		return
	}
	if r.Pool != "" {
		v.errorf(p+".backends", "give pool (one pool) or backends (several), not both")
	}
	weighted := 0
	for j, b := range r.Backends {
		q := fmt.Sprintf("%s.backends[%d]", p, j)
		v.headerRules(q+".request_headers", b.RequestHeaders)
		if v.c.Has(q+".host_header") && strings.TrimSpace(b.HostHeader) == "" {
			v.errorf(q+".host_header", "empty; leave it out for the route's Host, or give a name or $proxy_host")
		}
		switch {
		case b.Pool == "":
			v.errorf(q+".pool", "missing; expected the name of a pool")
		case !pools[b.Pool]:
			v.errorf(q+".pool", "no pool named %q; %sdefine it under pools", b.Pool, didYouMean(b.Pool, v.poolNames()))
		}
		if b.Fallback != "" && !pools[b.Fallback] {
			v.errorf(q+".fallback", "no pool named %q; %sdefine it under pools", b.Fallback, didYouMean(b.Fallback, v.poolNames()))
		}
		if b.Weight < 0 || b.Weight > MaxBackendWeight {
			v.errorf(q+".weight", "weight %d out of range; expected 0 to %d", b.Weight, MaxBackendWeight)
		}
		switch {
		case b.Header != nil && b.Cookie != nil:
			v.errorf(q, "give header or cookie, not both; use two entries")
		case b.Header != nil:
			v.valueMatch(q+".header", b.Header, true)
		case b.Cookie != nil:
			v.valueMatch(q+".cookie", b.Cookie, false)
			if strings.ContainsAny(b.Cookie.Name, "=; \t") {
				v.errorf(q+".cookie.name", "invalid cookie name %q", b.Cookie.Name)
			}
		default:
			if b.Weight > 0 {
				weighted++
			}
			continue
		}
		if v.c.Has(q + ".weight") {
			v.errorf(q+".weight", "an entry with a header or cookie condition is chosen by it, not by weight")
		}
	}
	if weighted == 0 {
		v.errorf(p+".backends", "no entry without a condition has a weight above 0; requests that meet no condition would have no pool")
	}
}

func (v *validator) mirror(p string, r *Route, pools map[string]bool) {
	m := r.Mirror
	if m == nil {
		return
	}
	q := p + ".mirror"
	switch {
	case m.Pool == "":
		v.errorf(q+".pool", "missing; expected the name of the pool that receives the copies")
	case !pools[m.Pool]:
		v.errorf(q+".pool", "no pool named %q; %sdefine it under pools", m.Pool, didYouMean(m.Pool, v.poolNames()))
	case m.Pool == r.Pool || slices.ContainsFunc(r.Backends, func(b Backend) bool { return b.Pool == m.Pool }):
		v.errorf(q+".pool", "pool %q serves this route; copies must go elsewhere, or they would load it twice and count in its health", m.Pool)
	}
	if m.MaxInFlight < 1 {
		v.errorf(q+".max_in_flight", "must be at least 1")
	}
}

func (v *validator) requestID(p string, r *RequestID) {
	if !validHeaderName(r.Header) {
		v.errorf(p+".header", "invalid header name %q", r.Header)
	} else if why, ok := ownedHeaders[textproto.CanonicalMIMEHeaderKey(r.Header)]; ok {
		v.errorf(p+".header", "%s is %s", r.Header, why)
	}
	switch r.Accept {
	case "trusted", "any", "none":
	default:
		v.errorf(p+".accept", "unknown value %q; expected trusted (ids from trusted_proxies), any or none", r.Accept)
	}
}

func (v *validator) errorPages(p string, r *Route) {
	seen := map[int]int{}
	for j, e := range r.ErrorPages {
		q := fmt.Sprintf("%s.error_pages[%d]", p, j)
		if len(e.Codes) == 0 {
			v.errorf(q+".codes", "missing; expected the statuses to replace, like [502, 503, 504]")
		}
		for k, code := range e.Codes {
			switch prev, dup := seen[code]; {
			case code < 300 || code > 599:
				v.errorf(fmt.Sprintf("%s.codes[%d]", q, k), "status %d out of range; expected 300 to 599", code)
			case dup:
				v.errorf(fmt.Sprintf("%s.codes[%d]", q, k), "%d already has a page in error_pages[%d]", code, prev)
			}
			seen[code] = j
		}
		if e.File == "" {
			v.errorf(q+".file", "missing; expected the file with the page")
		}
		if e.Status != 0 && (e.Status < 200 || e.Status > 599) {
			v.errorf(q+".status", "status %d out of range; expected 200 to 599", e.Status)
		}
	}
}
