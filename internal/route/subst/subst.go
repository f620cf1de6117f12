// Package subst expands the small set of variables that route rules may
// use in header values, redirects, rewrites and the Host override:
//
//	$host          the request's host: lower case, without port (nginx's $host)
//	$http_host     the Host header as the client sent it, port included
//	$request_uri   the request target as received: path and query, still encoded
//	$uri           the request path, decoded
//	$args          the raw query, without "?" ($query_string is the same)
//	$is_args       "?" when there is a query, else nothing
//	$scheme        http or https, as the client connected
//	$remote_addr   the client's address, after trusted_proxies
//	$server_port   the port the client connected to (of the listener)
//	$request_id    the request's id (routes with request_id)
//	$request_method
//	$http_NAME     a request header, "-" in NAME written "_" ($http_user_agent)
//	$cookie_NAME   a request cookie's value ($cookie_session)
//	$proxy_host    the backend's address (only in host_header)
//	$1 ... $9      captures of the route's regular expression
//	$NAME, ${NAME} named captures; braces also end a variable: ${uri}x
//	$$             a dollar sign
//
// Templates are parsed once, at load; a template without variables expands
// to its text without allocating. In a URL (redirects, rewrites) values are
// inserted escaped for where they go; in a header value, control
// characters in values are dropped so that no value can end a header
// early.
package subst

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/route"
)

// Context is where an expanded template goes.
type Context uint8

// Contexts.
const (
	Header Context = iota // a header value
	URL                   // a Location or an escaped path
)

type kind uint8

const (
	lit kind = iota
	vHost
	vHTTPHost
	vRequestURI
	vURI
	vArgs
	vIsArgs
	vScheme
	vRemoteAddr
	vRequestID
	vMethod
	vServerPort
	vHTTP
	vCookie
	vProxyHost
	vCapture
)

var names = map[string]kind{
	"host": vHost, "http_host": vHTTPHost, "request_uri": vRequestURI, "uri": vURI,
	"args": vArgs, "query_string": vArgs, "is_args": vIsArgs, "scheme": vScheme,
	"remote_addr": vRemoteAddr, "request_id": vRequestID, "request_method": vMethod,
	"server_port": vServerPort, "proxy_host": vProxyHost,
}

// Variables lists the variable names a template may use, for messages.
func Variables() []string {
	out := []string{"http_NAME", "cookie_NAME"}
	for n := range names {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

type part struct {
	kind kind
	text string // the literal, or the header name of $http_
	n    int    // capture index
}

// Template is a parsed template. The zero value expands to "".
type Template struct {
	src   string
	parts []part
	ctx   Context
	// uses records what expansion needs, so that callers can skip work.
	captures  bool
	proxyHost bool
}

// Options say what a template may refer to.
type Options struct {
	Context Context
	// Regex is the expression whose captures $1..$9 and named captures
	// refer to; nil means none.
	Regex *regexp.Regexp
	// ProxyHost allows $proxy_host.
	ProxyHost bool
	// RequestID allows $request_id.
	RequestID bool
}

// Parse parses s. Errors name the variable and what is allowed.
func Parse(s string, o Options) (*Template, error) {
	t := &Template{src: s, ctx: o.Context}
	var b strings.Builder
	flush := func() {
		if b.Len() > 0 {
			t.parts = append(t.parts, part{kind: lit, text: b.String()})
			b.Reset()
		}
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c != '$' {
			b.WriteByte(c)
			i++
			continue
		}
		i++
		if i < len(s) && s[i] == '$' {
			b.WriteByte('$')
			i++
			continue
		}
		var name string
		switch {
		case i < len(s) && s[i] == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return nil, fmt.Errorf("%q: ${ without a closing }", s)
			}
			name, i = s[i+1:i+end], i+end+1
		case i < len(s) && '1' <= s[i] && s[i] <= '9':
			name, i = s[i:i+1], i+1 // $1..$9: one digit, as in nginx
		default:
			j := i
			for j < len(s) && isNameByte(s[j]) {
				j++
			}
			name, i = s[i:j], j
		}
		p, err := resolve(name, o)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
		flush()
		t.parts = append(t.parts, p)
		t.captures = t.captures || p.kind == vCapture
		t.proxyHost = t.proxyHost || p.kind == vProxyHost
	}
	flush()
	return t, nil
}

func isNameByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func resolve(name string, o Options) (part, error) {
	if name == "" {
		return part{}, errors.New("a $ without a variable name; write $$ for a dollar sign")
	}
	if n, err := strconv.Atoi(name); err == nil {
		if o.Regex == nil {
			return part{}, fmt.Errorf("$%s: there is no regular expression to capture from (a regex path match or rewrite.regex)", name)
		}
		if n < 1 || n > 9 || n > o.Regex.NumSubexp() {
			return part{}, fmt.Errorf("$%s: the regular expression %q has %d capture groups", name, o.Regex.String(), o.Regex.NumSubexp())
		}
		return part{kind: vCapture, n: n}, nil
	}
	if k, ok := names[name]; ok {
		switch {
		case k == vProxyHost && !o.ProxyHost:
			return part{}, errors.New("$proxy_host is only known in host_header")
		case k == vRequestID && !o.RequestID:
			return part{}, errors.New("$request_id needs request_id on this route")
		}
		return part{kind: k}, nil
	}
	if c, ok := strings.CutPrefix(name, "cookie_"); ok && c != "" {
		return part{kind: vCookie, text: c}, nil
	}
	if h, ok := strings.CutPrefix(name, "http_"); ok && h != "" {
		return part{kind: vHTTP, text: http.CanonicalHeaderKey(strings.ReplaceAll(h, "_", "-"))}, nil
	}
	if o.Regex != nil {
		if n := o.Regex.SubexpIndex(name); n > 0 {
			return part{kind: vCapture, n: n}, nil
		}
	}
	return part{}, fmt.Errorf("unknown variable $%s; known: $%s, $1..$9 and named captures", name, strings.Join(Variables(), ", $"))
}

// String returns the template as written.
func (t *Template) String() string { return t.src }

// Static returns the text of a template without variables.
func (t *Template) Static() (string, bool) {
	switch {
	case len(t.parts) == 0:
		return "", true
	case len(t.parts) == 1 && t.parts[0].kind == lit:
		return t.parts[0].text, true
	}
	return "", false
}

// UsesProxyHost reports whether the template depends on the backend.
func (t *Template) UsesProxyHost() bool { return t.proxyHost }

// UsesCaptures reports whether the template needs the regex captures.
func (t *Template) UsesCaptures() bool { return t.captures }

// Vars are the values of one request. Fill what the templates use; the
// captures are computed on first use from Regex and Subject.
type Vars struct {
	R          *http.Request
	Scheme     string
	RemoteAddr string
	RequestID  string
	ProxyHost  string
	// Regex and Subject give the captures; Subject is usually the path.
	Regex   *regexp.Regexp
	Subject string

	idx []int // FindStringSubmatchIndex of Subject, once computed
	did bool
}

func (v *Vars) capture(n int) string {
	if !v.did {
		v.did = true
		if v.Regex != nil {
			v.idx = v.Regex.FindStringSubmatchIndex(v.Subject)
		}
	}
	if 2*n+1 >= len(v.idx) || v.idx[2*n] < 0 {
		return ""
	}
	return v.Subject[v.idx[2*n]:v.idx[2*n+1]]
}

// Expand returns the template's value for one request.
func (t *Template) Expand(v *Vars) string {
	if s, ok := t.Static(); ok {
		return s
	}
	if len(t.parts) == 1 && t.ctx == Header {
		if s := t.value(&t.parts[0], v); clean(s) {
			return s // one variable: its value, without a copy
		}
	}
	return string(t.Append(make([]byte, 0, 64), v))
}

// Append appends the template's value to b.
func (t *Template) Append(b []byte, v *Vars) []byte {
	for i := range t.parts {
		p := &t.parts[i]
		if p.kind == lit {
			b = append(b, p.text...)
			continue
		}
		s := t.value(p, v)
		if t.ctx == URL {
			b = appendURL(b, p.kind, s)
		} else {
			b = appendHeaderValue(b, s)
		}
	}
	return b
}

func (t *Template) value(p *part, v *Vars) string {
	r := v.R
	switch p.kind {
	case lit:
		return p.text
	case vHost:
		return route.NormalizeHost(r.Host)
	case vHTTPHost:
		return r.Host
	case vRequestURI:
		if r.RequestURI != "" {
			return r.RequestURI
		}
		return r.URL.RequestURI()
	case vURI:
		if t.ctx == URL {
			return r.URL.EscapedPath()
		}
		return r.URL.Path
	case vArgs:
		return r.URL.RawQuery
	case vIsArgs:
		if r.URL.RawQuery != "" {
			return "?"
		}
		return ""
	case vScheme:
		return v.Scheme
	case vRemoteAddr:
		return v.RemoteAddr
	case vRequestID:
		return v.RequestID
	case vMethod:
		return r.Method
	case vServerPort:
		return serverPort(r)
	case vProxyHost:
		return v.ProxyHost
	case vHTTP:
		vv := r.Header[p.text]
		switch len(vv) {
		case 0:
			return ""
		case 1:
			return vv[0]
		}
		return strings.Join(vv, ", ")
	case vCookie:
		if c, err := r.Cookie(p.text); err == nil {
			return c.Value
		}
		return ""
	case vCapture:
		return v.capture(p.n)
	}
	return ""
}

// serverPort is the port of the connection's local address, nginx's
// $server_port: the listener's, whatever the Host names.
func serverPort(r *http.Request) string {
	switch a := r.Context().Value(http.LocalAddrContextKey).(type) {
	case *net.TCPAddr:
		return strconv.Itoa(a.Port)
	case net.Addr:
		if _, p, err := net.SplitHostPort(a.String()); err == nil {
			return p
		}
	}
	if r.TLS != nil {
		return "443"
	}
	return "80"
}

// appendURL inserts a value into a URL: variables that are already
// escaped ($request_uri, $args, $uri in a URL) go in as they are; decoded
// ones (captures of the decoded path, headers, the host) are escaped.
func appendURL(b []byte, k kind, s string) []byte {
	switch k {
	case vRequestURI, vArgs, vIsArgs, vURI, vScheme, vServerPort:
		return appendHeaderValue(b, s)
	case vHost:
		if strings.IndexByte(s, ':') >= 0 {
			return append(append(append(b, '['), escapeHost(s)...), ']') // an IPv6 literal
		}
		return append(b, escapeHost(s)...)
	case vHTTPHost, vProxyHost:
		return append(b, escapeHost(s)...)
	}
	return append(b, EscapePath(s)...)
}

// EscapePath escapes a decoded path for a URL, keeping "/".
func EscapePath(s string) string {
	return (&url.URL{Path: s}).EscapedPath()
}

func escapeHost(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`/?#@\"<>`, c) >= 0 {
			return url.PathEscape(s)
		}
	}
	return s
}

// clean reports whether s can go in a header value as it is.
func clean(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func appendHeaderValue(b []byte, s string) []byte {
	if clean(s) {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= ' ' || c == '\t' {
			if c != 0x7f {
				b = append(b, c)
			}
		}
	}
	return b
}
