package translate

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
)

// nginx variables in header values, Host, redirects and rewrites become
// sturdy's substitutions (docs/routing.md) where sturdy has the same
// value, or the value itself where the translation knows it (the server's
// name, a set variable); anything else keeps the rule from translating.

// sturdyVars are the nginx variables sturdy's templates have, with the
// same meaning.
var sturdyVars = map[string]bool{
	"host": true, "http_host": true, "request_uri": true, "uri": true, "document_uri": true,
	"args": true, "query_string": true, "is_args": true, "scheme": true,
	"remote_addr": true, "request_method": true, "request_id": true,
}

// varCtx is what a template may refer to where it is used.
type varCtx struct {
	c         *locCtx
	re        *regexp.Regexp // the location's regex, for $1..$9 and named captures
	proxyHost bool           // $proxy_host is allowed (host_header)
	url       bool           // a URL: $request_uri and $args are kept encoded
	// requestID is set when the template used $request_id.
	requestID bool
	// inSet: the template is a set value; sets do not refer to sets.
	inSet bool
}

// template turns nginx's value v into a sturdy template; ok is false, with
// the reason, for a variable sturdy has no value for.
func (x *varCtx) template(v string) (string, string, bool) {
	var b strings.Builder
	for i := 0; i < len(v); {
		ch := v[i]
		if ch != '$' {
			b.WriteByte(ch)
			i++
			continue
		}
		name, next := varName(v, i)
		if name == "" {
			b.WriteString("$$")
			i++
			continue
		}
		i = next
		val, why := x.value(name)
		if why != "" {
			return "", why, false
		}
		b.WriteString(val)
	}
	return b.String(), "", true
}

// varName reads the variable at v[i] ("$name" or "${name}"), returning its
// name and the index after it; name is "" when none starts there.
func varName(v string, i int) (string, int) {
	j := i + 1
	if j < len(v) && v[j] == '{' {
		k := strings.IndexByte(v[j:], '}')
		if k < 0 {
			return "", i + 1
		}
		return v[j+1 : j+k], j + k + 1
	}
	for j < len(v) && (v[j] == '_' || v[j] >= 'a' && v[j] <= 'z' || v[j] >= 'A' && v[j] <= 'Z' || v[j] >= '0' && v[j] <= '9') {
		j++
	}
	return v[i+1 : j], j
}

// value is the sturdy text for nginx's $name: a substitution or a fixed
// value; why says what sturdy lacks.
func (x *varCtx) value(name string) (string, string) {
	c := x.c
	lower := strings.ToLower(name)
	switch {
	case lower == "document_uri":
		return "${uri}", ""
	case lower == "request_id":
		x.requestID = true
		return "${request_id}", ""
	case sturdyVars[lower]:
		return "${" + lower + "}", ""
	case strings.HasPrefix(lower, "http_") && len(lower) > 5:
		return "${" + lower + "}", ""
	case strings.HasPrefix(name, "cookie_") && len(name) > 7:
		return "${" + name + "}", "" // cookie names keep their case
	case lower == "proxy_host":
		// nginx's $proxy_host is the name written in proxy_pass: an
		// upstream's name is known now; sturdy's ${proxy_host} is the
		// address of the backend it picked, which equals nginx's only
		// for a proxy_pass to an address.
		if x.proxyHost && (c.target == nil || c.target.Upstream == nil) {
			return "${proxy_host}", ""
		}
		if c.proxyHost != "" {
			return c.proxyHost, ""
		}
	case lower == "server_name":
		return c.sp.srv.Names[0], ""
	case lower == "https":
		switch {
		case c.sp.allTLS():
			return "on", ""
		case !c.sp.tls:
			return "", ""
		}
	case lower == "server_port":
		if p := c.sp.onePort(); p != "" {
			return p, ""
		}
		return "${server_port}", "" // the listener the request came in on
	case lower == "proxy_add_x_forwarded_for":
		return "", "$proxy_add_x_forwarded_for is sturdy's own X-Forwarded-For"
	}
	if n, err := strconv.Atoi(name); err == nil && x.re != nil && n >= 1 && n <= 9 {
		if n > x.re.NumSubexp() {
			return "", "" // nginx's $N of a group that does not exist is empty
		}
		return "${" + name + "}", ""
	}
	if x.re != nil && x.re.SubexpIndex(name) > 0 {
		return "${" + name + "}", ""
	}
	if v, ok := c.sets[name]; ok && !x.inSet {
		// set $prefix "$1" in the location that rewrote the request: its
		// captures are the route's (x.re, the location's regex).
		y := *x
		y.inSet = true
		val, why, ok := y.template(v)
		if !ok {
			return "", why
		}
		return val, ""
	}
	if val, ok := expandSet(c.scope(), "$"+name); ok {
		return strings.ReplaceAll(val, "$", "$$"), ""
	}
	if d := x.c.mapOf(name); d != nil {
		return "", fmt.Sprintf("$%s is a map (%s), which sturdy has no value for", name, d.Pos())
	}
	if c.unsetHere(name) {
		return "", ""
	}
	return "", fmt.Sprintf("sturdy has no value for $%s", name)
}

// onePort is the port of every listener the server's routes are on, ""
// when they differ.
func (sp *serverPlan) onePort() string {
	p := ""
	for _, v := range sp.variants {
		for _, n := range v.listeners {
			if q := sp.portOf[n]; p != "" && q != p || q == "" {
				return ""
			} else {
				p = q
			}
		}
	}
	return p
}

// mapOf returns the map directive that defines $name, nil when none does.
func (c *locCtx) mapOf(name string) *nginx.Directive {
	var found *nginx.Directive
	for s := c.sp.srv.Scope; s != nil; s = s.Parent {
		for _, d := range s.Local("map") {
			if d.Arg(1) == "$"+name {
				found = d
			}
		}
	}
	return found
}
