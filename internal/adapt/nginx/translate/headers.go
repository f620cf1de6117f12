package translate

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// Request headers. sturdy passes the client's Host and sets X-Forwarded-For
// (the client address), X-Forwarded-Proto, X-Forwarded-Host, X-Real-IP and
// Via itself. nginx sends Host: $proxy_host (the upstream's name) unless
// told otherwise, sets no forwarding headers unless told, and replaces the
// whole list of proxy_set_header in a block that sets any. Each
// proxy_set_header becomes a request_headers rule (or host_header); the
// forwarding headers nginx did not send are left out with
// forwarding_headers, so the backend gets what nginx's got. (nginx passed a
// client's own X-Forwarded-For or X-Real-IP on unchecked; sturdy drops
// those from peers it does not trust, which is said in a comment, not
// listed: it opens nothing.)

// forwardedSame lists, per header, the nginx values that give the backend
// what sturdy gives it.
var forwardedSame = map[string][]string{
	"X-Forwarded-For":   {"$proxy_add_x_forwarded_for", "$remote_addr"},
	"X-Real-Ip":         {"$remote_addr"},
	"X-Forwarded-Proto": {"$scheme"},
	"X-Forwarded-Host":  {"$http_host"},
}

// hopByHop are headers sturdy manages itself on the upstream connection
// (WebSocket upgrades included); setting them in nginx changes nothing sturdy must copy.
var hopByHop = map[string]bool{"Connection": true, "Upgrade": true, "Keep-Alive": true, "Te": true, "Transfer-Encoding": true, "Trailer": true, "Proxy-Connection": true}

// headerRule is one header and its value (a sturdy template).
type headerRule struct{ name, value string }

// requestHeaders turns the proxy_set_header in effect at the location into
// the route's request rules and Host.
func (t *translator) requestHeaders(c *locCtx, sc *nginx.Scope, tls bool) {
	set := map[string]*nginx.Directive{}
	var order []string
	for _, d := range sc.Get("proxy_set_header") {
		t.use(d)
		if !validFieldName(d.Arg(0)) || len(d.Args) != 2 {
			c.differs.add(NeedRequestHeaders, "%s (%s) is not a header and value sturdy can set", strings.TrimSuffix(d.String(), ";"), d.Pos())
			continue
		}
		n := http.CanonicalHeaderKey(d.Arg(0))
		if set[n] == nil {
			order = append(order, n)
		}
		set[n] = d
	}
	// nginx passes a client's Upgrade on only when the location sets it
	// for the backend (hop-by-hop, it is not forwarded otherwise): without
	// it no backend ever answered 101 through nginx.
	if d := set["Upgrade"]; d == nil || d.Arg(1) == "" {
		c.r.noUpgrade = true
	}
	x := &varCtx{c: c, re: c.regex()}
	var kept []string // sturdy's forwarding headers nginx sent with the same value
	if d := set["Host"]; d == nil && c.noDefaultHost {
		c.r.hostHeader = c.mapHost // "" where each backend sends its own
	} else if d == nil {
		// nginx's default, $proxy_host: the name written in proxy_pass,
		// which is sturdy's $proxy_host for an address (or a socket).
		c.r.hostHeader = c.proxyHost
		if c.target != nil && c.target.Upstream == nil {
			c.r.hostHeader = "$proxy_host"
		}
	} else if v := d.Arg(1); v != "$http_host" {
		hx := &varCtx{c: c, re: x.re, proxyHost: true}
		if tpl, why, ok := hx.template(v); ok && tpl != "" {
			c.r.hostHeader = tpl
			x.requestID = x.requestID || hx.requestID
		} else {
			if tpl == "" && ok {
				why = "an empty Host"
			}
			c.differs.add(NeedHostHeader, "nginx sent Host: %s (%s); %s, so sturdy sends the client's Host", v, d.Pos(), why)
		}
	}
	for _, name := range order {
		d := set[name]
		v := d.Arg(1)
		switch {
		case name == "Host" || hopByHop[name] || name == "Content-Length":
			// Content-Length is the framing sturdy keeps itself (nginx clears it with proxy_pass_request_body off).
		case slices.Contains(forwardedSame[name], v) || name == "X-Forwarded-Proto" && (v == "https" && tls || v == "http" && !c.sp.tls):
			// sturdy sends the same value itself.
			kept = append(kept, name)
		case v == "":
			c.r.reqRemove = append(c.r.reqRemove, name)
		case v == "$request_id" && strings.EqualFold(name, config.DefaultRequestIDHeader):
			x.requestID = true
		case c.mapVar != "" && wholeVar(v) == c.mapVar:
			// The variable that chose the backend: each backend's value.
			c.mapHeaders = append(c.mapHeaders, name)
			if len(c.r.backends) == 0 {
				c.r.reqSet = append(c.r.reqSet, headerRule{name, strings.ReplaceAll(c.mapValue, "$", "$$")})
			}
			for i := range c.r.backends {
				b := &c.r.backends[i]
				b.headers = append(b.headers, headerRule{name, strings.ReplaceAll(b.value, "$", "$$")})
			}
		default:
			tpl, why, ok := x.template(v)
			if !ok {
				if slices.Contains(config.SetForwardingHeaders, name) {
					// sturdy's own value is the nearest it has.
					kept = append(kept, name)
					c.differs.add(NeedRequestHeaders, "nginx set %s: %s (%s); %s, so sturdy sends its own", name, v, d.Pos(), why)
					continue
				}
				// The client's own value must not reach the backend in
				// nginx's place: a backend may trust the header.
				c.r.reqRemove = append(c.r.reqRemove, name)
				c.differs.add(NeedRequestHeaders, "nginx set %s: %s (%s); %s, so sturdy removes the client's %s and sets none", name, v, d.Pos(), why, name)
				continue
			}
			c.r.reqSet = append(c.r.reqSet, headerRule{name, tpl})
		}
	}
	if x.requestID {
		// nginx's $request_id is always a new one, and is not sent back.
		f := false
		id := &config.RequestID{Accept: "none", Response: &f}
		for name, d := range set {
			if d.Arg(1) == "$request_id" {
				id.Header = name
			}
		}
		c.r.requestID = id
	}
	var unsent []string
	for _, name := range config.SetForwardingHeaders {
		if set[name] == nil {
			unsent = append(unsent, name)
		}
	}
	if len(kept) < len(config.SetForwardingHeaders) {
		// Those nginx set otherwise are request_headers rules, which win.
		c.r.forwarding = append([]string{}, kept...)
	}
	if len(unsent) > 0 {
		c.r.comments = append(c.r.comments, fmt.Sprintf("nginx sent no %s here (and passed a client's own on unchecked); sturdy sends none either, and drops a client's own", strings.Join(unsent, ", ")))
	}
	for _, name := range []string{"proxy_pass_request_headers", "proxy_pass_request_body", "proxy_method"} {
		if d := sc.Get1(name); d != nil {
			t.use(d)
			if d.Arg(0) != "on" {
				c.differs.add(NeedRequestRewrite, "%s (%s): sturdy forwards the request as the client sent it", strings.TrimSuffix(d.String(), ";"), d.Pos())
			}
		}
	}
}

// regex is the location's compiled regex, nil for other locations.
func (c *locCtx) regex() *regexp.Regexp {
	if c.match == nil || c.match.Regex == "" {
		return nil
	}
	re, _ := compileRegex(c.match.Regex, c.match.CaseInsensitive)
	return re
}

// validFieldName reports an HTTP field name (RFC 9110 token).
func validFieldName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
