package config

import (
	"fmt"
	"net/textproto"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Defaults of the settings that keep the client's faults the client's.
const (
	DefaultBufferRequestBody = 64 << 10
	DefaultClientBodyTimeout = 30 * time.Second
	DefaultClientSendTimeout = 30 * time.Second
	DefaultClientBodyTempMax = 1 << 30
)

// ClientBodyTemp is the directory where request bodies wait on disk.
type ClientBodyTemp struct {
	// Path is the directory: made with mode 0700 if missing, refused when
	// another user owns it; each body is a file of mode 0600, unlinked as
	// soon as it is made. Default: sturdy-client-body-UID in the system's
	// temporary directory ($TMPDIR, else /tmp).
	Path string `yaml:"path"`
	// MaxSize bounds the bytes of all the bodies waiting there at once; a
	// request whose body would pass it gets 503 with Retry-After, as one
	// that meets a full disk. Default 1GiB.
	MaxSize Size `yaml:"max_size"`
}

// DefaultClientBodyTempPath is client_body_temp.path's default.
func DefaultClientBodyTempPath() string {
	return filepath.Join(os.TempDir(), "sturdy-client-body-"+strconv.Itoa(os.Geteuid()))
}

// DefaultUntrustedHeaders are the header fields dropped from requests of
// peers that are not trusted proxies (edge.untrusted_headers). Frameworks
// believe them for routing (X-Original-URL rewrites the path in some), for
// the client's identity (True-Client-IP) or for the links they build
// (X-Forwarded-Port, -Prefix); only a proxy in front of sturdy may set
// them. Forwarded, X-Forwarded-For, -Host, -Proto and X-Real-IP are
// replaced by sturdy's own in any case, and so is X-Forwarded-Port.
func DefaultUntrustedHeaders() []string {
	return []string{
		// Scheme, host, port and prefix of the URL the client used.
		"X-Forwarded-Port", "X-Forwarded-Prefix", "X-Forwarded-Scheme", "X-Forwarded-Ssl",
		"X-Forwarded-Server", "X-Forwarded-Uri", "X-Forwarded-Path", "X-Url-Scheme", "Front-End-Https",
		"X-Original-Host", "X-Host",
		// The path, as rewritten by a proxy in front (IIS, Symfony, ...).
		"X-Original-URL", "X-Rewrite-URL", "X-Original-URI", "X-Envoy-Original-Path",
		// The client's address, as CDNs and load balancers pass it on.
		"True-Client-IP", "X-Client-IP", "Client-IP", "CF-Connecting-IP", "Fastly-Client-IP",
		"X-Cluster-Client-IP", "X-Original-Forwarded-For", "X-Envoy-External-Address", "Forwarded-For", "X-Forwarded",
		"X-Originating-IP", "X-Remote-IP", "X-Remote-Addr", "X-ProxyUser-Ip",
	}
}

// EdgeRoute is the route label of answers given before any route was
// chosen (edge refusals, loops, no route, redirects to HTTPS).
const EdgeRoute = "_edge"

// framingFields are never dropped: without them a request is not one.
var framingFields = map[string]bool{"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true}

func (c *Config) setFaultDefaults() {
	if c.Edge.UntrustedHeaders == nil && !c.Has("edge.untrusted_headers") {
		c.Edge.UntrustedHeaders = DefaultUntrustedHeaders()
	}
	if c.ClientBodyTemp.Path == "" {
		c.ClientBodyTemp.Path = DefaultClientBodyTempPath()
	}
	if c.ClientBodyTemp.MaxSize == 0 && !c.Has("client_body_temp.max_size") {
		c.ClientBodyTemp.MaxSize = DefaultClientBodyTempMax
	}
	for i := range c.Routes {
		r := &c.Routes[i]
		p := fmt.Sprintf("routes[%d].", i)
		if r.BufferRequestBody == 0 && !c.Has(p+"buffer_request_body") {
			r.BufferRequestBody = DefaultBufferRequestBody
		}
		if !c.Has(p + "request_buffering") {
			r.RequestBuffering = true
		}
		if r.Timeouts.ClientBody == 0 && !c.Has(p+"timeouts.client_body") {
			r.Timeouts.ClientBody = Duration(DefaultClientBodyTimeout)
		}
		if r.Timeouts.ClientSend == 0 && !c.Has(p+"timeouts.client_send") {
			r.Timeouts.ClientSend = Duration(DefaultClientSendTimeout)
		}
	}
}

func (v *validator) faults() {
	c := v.c
	for i, h := range c.Edge.UntrustedHeaders {
		p := fmt.Sprintf("edge.untrusted_headers[%d]", i)
		if !validFieldName(h) {
			v.errorf(p, "%q is not a header field name", h)
		} else if framingFields[textproto.CanonicalMIMEHeaderKey(h)] {
			v.errorf(p, "%s frames the request and cannot be dropped", h)
		}
	}
	if c.ClientBodyTemp.MaxSize <= 0 {
		v.errorf("client_body_temp.max_size", "must be positive; request_buffering: false on a route streams its bodies instead")
	}
	if !filepath.IsAbs(c.ClientBodyTemp.Path) {
		v.errorf("client_body_temp.path", "%q is not an absolute path", c.ClientBodyTemp.Path)
	}
	for i, r := range c.Routes {
		p := fmt.Sprintf("routes[%d]", i)
		if r.Name == EdgeRoute {
			v.errorf(p+".name", "%s is reserved: metrics count the answers given before any route is chosen under it", EdgeRoute)
		}
		if r.BufferRequestBody < 0 {
			v.errorf(p+".buffer_request_body", "must not be negative; 0 streams every body")
		} else if r.BufferRequestBody > r.MaxBodyBytes && r.MaxBodyBytes > 0 && c.Has(p+".buffer_request_body") {
			v.errorf(p+".buffer_request_body", "%s is more than max_body_bytes %s; no body that large is accepted", r.BufferRequestBody, r.MaxBodyBytes)
		}
		if r.Timeouts.ClientBody < 0 {
			v.errorf(p+".timeouts.client_body", "must not be negative; 0s means no limit")
		}
		if r.Timeouts.ClientSend < 0 {
			v.errorf(p+".timeouts.client_send", "must not be negative; 0s means no limit")
		}
	}
}

// validFieldName reports whether s is an HTTP token.
func validFieldName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '!' || c == '#' || c == '$' || c == '%' || c == '&' || c == '\'' || c == '*' || c == '+' || c == '-' || c == '.' || c == '^' || c == '_' || c == '`' || c == '|' || c == '~':
		default:
			return false
		}
	}
	return true
}
