package translate

import (
	"net/http"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/nginx"
)

// Request headers. sturdy passes the client's Host and sets X-Forwarded-For
// (the client address), X-Forwarded-Proto, X-Forwarded-Host, X-Real-IP and
// Via itself; it has no config key to set other request headers yet. nginx
// sends Host: $proxy_host (the upstream's name) unless told otherwise,
// sets no forwarding headers unless told, and replaces the whole list of
// proxy_set_header in a block that sets any.

// forwardedSame lists, per header, the nginx values that give the backend
// what sturdy gives it.
var forwardedSame = map[string][]string{
	"Host":              {"$host", "$http_host"},
	"X-Forwarded-For":   {"$proxy_add_x_forwarded_for", "$remote_addr"},
	"X-Real-Ip":         {"$remote_addr"},
	"X-Forwarded-Proto": {"$scheme"},
	"X-Forwarded-Host":  {"$host", "$http_host"},
}

// hopByHop are headers sturdy manages itself on the upstream connection
// (WebSocket upgrades included); setting them in nginx changes nothing sturdy must copy.
var hopByHop = map[string]bool{"Connection": true, "Upgrade": true, "Keep-Alive": true, "Te": true}

// requestHeaders compares the headers nginx sends from location l with
// what sturdy sends, adding a difference per header.
func (t *translator) requestHeaders(c *locCtx, sc *nginx.Scope, tls bool) {
	set := map[string]*nginx.Directive{}
	for _, d := range sc.Get("proxy_set_header") {
		t.use(d)
		set[http.CanonicalHeaderKey(d.Arg(0))] = d
	}
	if d := set["Host"]; d == nil {
		c.differs.add(NeedHostHeader, "nginx sent Host: %s (its default, $proxy_host); sturdy sends the client's Host", c.proxyHost)
	} else if !sameValue("Host", d.Arg(1), tls) {
		c.differs.add(NeedHostHeader, "nginx sent Host: %s (%s); sturdy sends the client's Host", d.Arg(1), d.Pos())
	}
	for name, d := range set {
		switch {
		case name == "Host" || hopByHop[name]:
		case forwardedSame[name] != nil:
			if !sameValue(name, d.Arg(1), tls) {
				c.differs.add(NeedRequestHeaders, "nginx set %s: %s (%s); sturdy sets its own value", name, d.Arg(1), d.Pos())
			}
		case d.Arg(1) == "":
			c.differs.add(NeedRequestHeaders, "nginx removed the client's %s header (%s); sturdy passes it on", name, d.Pos())
		default:
			c.differs.add(NeedRequestHeaders, "nginx set %s: %s (%s); sturdy does not", name, d.Arg(1), d.Pos())
		}
	}
	var added []string
	for _, name := range []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Real-Ip"} {
		if set[name] == nil {
			added = append(added, name)
		}
	}
	if len(added) > 0 {
		c.differs.add(NeedRequestHeaders, "sturdy adds %s, which nginx did not send here", strings.Join(added, ", "))
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

func sameValue(name, v string, tls bool) bool {
	for _, s := range forwardedSame[name] {
		if v == s {
			return true
		}
	}
	// A fixed X-Forwarded-Proto on a server that only speaks TLS (or only
	// plain HTTP) is what sturdy sends there too.
	return name == "X-Forwarded-Proto" && (v == "https" && tls || v == "http" && !tls)
}
