// Package limitkey turns a request into the key a limit counts it under:
// the client's address, a header, a cookie or the route. It reads the
// request without allocating; a request that lacks the header or cookie
// has no key and, as in nginx, is not limited.
package limitkey

import (
	"net/http"
	"net/textproto"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// Key is a compiled zone key (config.ParseLimitKey).
type Key struct {
	kind string
	name string // canonical header name, or cookie name
}

// Parse compiles a key written as in the config: client_ip, route,
// header:NAME or cookie:NAME.
func Parse(s string) (Key, error) {
	kind, name, err := config.ParseLimitKey(s)
	if err != nil {
		return Key{}, err
	}
	if kind == config.KeyHeader {
		name = textproto.CanonicalMIMEHeaderKey(name)
	}
	return Key{kind: kind, name: name}, nil
}

// Kind is client_ip, route, header or cookie: the label metrics use.
func (k Key) Kind() string { return k.kind }

func (k Key) String() string {
	if k.name == "" {
		return k.kind
	}
	return k.kind + ":" + k.name
}

// Of returns r's key. client is the client's address as the proxy decided
// it (behind trusted proxies and the PROXY protocol); route is the route's
// name. ok is false when the request has no value for the key.
func (k Key) Of(r *http.Request, client, route string) (key string, ok bool) {
	switch k.kind {
	case config.KeyClientIP:
		return client, client != ""
	case config.KeyRoute:
		return route, true
	case config.KeyHeader:
		if v := r.Header[k.name]; len(v) > 0 && v[0] != "" {
			return v[0], true
		}
	case config.KeyCookie:
		return Cookie(r.Header, k.name)
	}
	return "", false
}

// Cookie returns the value of the first cookie called name in h's Cookie
// headers, without allocating (net/http's Request.Cookie parses every
// cookie into a new slice). Surrounding double quotes are removed.
func Cookie(h http.Header, name string) (string, bool) {
	for _, line := range h["Cookie"] {
		for line != "" {
			var part string
			part, line, _ = strings.Cut(line, ";")
			part = strings.TrimLeft(part, " \t")
			n, v, ok := strings.Cut(part, "=")
			if !ok || strings.TrimRight(n, " \t") != name {
				continue
			}
			v = strings.TrimSpace(v)
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			return v, v != ""
		}
	}
	return "", false
}
