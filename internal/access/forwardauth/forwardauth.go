// Package forwardauth asks an auth service about each request before it
// goes upstream (nginx's auth_request, Traefik's forwardAuth, Caddy's
// forward_auth). The sub-request is a GET to the configured URL carrying
// the original method, URI, host and scheme in X-Forwarded-* (and
// X-Original-*) headers and the chosen client headers (Cookie and
// Authorization by default); it has no body.
//
// A 2xx answer lets the request through, with the configured headers of
// the answer (X-Auth-Request-User, ...) set on the upstream request in
// place of anything the client sent under those names. 401 and 403 go back
// to the client with their Location, WWW-Authenticate and Set-Cookie
// headers and body; so does a 3xx, which is how oauth2-proxy and its kin
// send a client to sign in. Anything else, a timeout or a connection
// failure is a 5xx from sturdy whose body says the auth service failed: the
// protected content is never served on a failed check.
package forwardauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/wire/plain"
)

// Upstream sends the sub-request: an *http.Transport, or the proxy's
// health-checked pool of auth hosts.
type Upstream interface {
	RoundTrip(*http.Request) (*http.Response, error)
}

// maxBody bounds the auth answer's body passed back to the client.
const maxBody = 64 << 10

// Auth is one route's compiled forward_auth. Safe for concurrent use.
type Auth struct {
	route   string
	url     *url.URL
	up      Upstream
	timeout time.Duration
	request []string // canonical names of client headers sent
	all     bool     // every client header is sent (request_headers: ["*"])
	nginx   bool     // statuses: nginx
	host    string   // host_header: "", "$host", "$http_host" or a name
	copy    []string // canonical names of answer headers set upstream
	C       *Counters
}

// Counters count one route's sub-request outcomes since start.
type Counters struct {
	Allowed    atomic.Uint64 // 2xx
	Denied     atomic.Uint64 // 401, 403
	Redirected atomic.Uint64 // 3xx
	Failed     atomic.Uint64 // another status, a failed connection
	Timeouts   atomic.Uint64
}

// Compile builds the route's check. up sends the sub-requests (for
// forward_auth.pool, the pool; otherwise a transport for the URL's host).
// path names the key in errors ("routes[2].forward_auth"); prev hands over
// the counters on reload.
func Compile(path, route string, cfg *config.ForwardAuth, up Upstream, prev *Auth) (*Auth, error) {
	if cfg == nil {
		return nil, nil
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s.url: %q is not an http or https URL with a host", path, cfg.URL)
	}
	if up == nil {
		return nil, fmt.Errorf("%s: no upstream to send the sub-request through", path)
	}
	a := &Auth{route: route, url: u, up: up, timeout: cfg.Timeout.D()}
	if a.timeout <= 0 {
		a.timeout = config.DefaultForwardAuthTimeout
	}
	hs := cfg.RequestHeaders
	if hs == nil {
		hs = config.DefaultForwardAuthRequestHeaders
	}
	for _, h := range hs {
		if h == "*" {
			a.all = true
			continue
		}
		a.request = append(a.request, textproto.CanonicalMIMEHeaderKey(h))
	}
	a.nginx = cfg.Statuses == config.ForwardAuthStatusesNginx
	a.host = cfg.HostHeader
	for _, h := range cfg.CopyHeaders {
		a.copy = append(a.copy, textproto.CanonicalMIMEHeaderKey(h))
	}
	if prev != nil {
		a.C = prev.C
	} else {
		a.C = new(Counters)
	}
	return a, nil
}

// Origin is what the proxy decided about the request's client.
type Origin struct {
	// ClientIP is the client's address (behind trusted proxies), sent as
	// X-Forwarded-For and X-Real-IP.
	ClientIP string
	// Proto is "https" or "http": the scheme the client used.
	Proto string
}

// Verdict is the auth service's answer about one request.
type Verdict struct {
	// OK lets the request through; Apply the Verdict to the upstream
	// request's headers.
	OK bool
	// Status, Header and Body are the answer for the client when !OK.
	Status int
	Header http.Header
	Body   []byte

	set http.Header // the copy headers of a 2xx answer
	del []string
	why string // what failed, for sturdy's own answer
}

// Apply sets the headers of a 2xx answer on the upstream request's h,
// first removing whatever the client sent under those names, so that a
// client cannot claim to be a user the auth service did not name.
func (v *Verdict) Apply(h http.Header) {
	for _, k := range v.del {
		delete(h, k)
	}
	for k, vs := range v.set {
		h[k] = vs
	}
}

// Write sends the answer for a request that may not pass.
func (v *Verdict) Write(w http.ResponseWriter) {
	h := w.Header()
	for k, vs := range v.Header {
		h[k] = vs
	}
	h["Content-Length"] = []string{strconv.Itoa(len(v.Body))}
	h["Cache-Control"] = []string{"no-store"}
	w.WriteHeader(v.Status)
	_, _ = w.Write(v.Body)
}

// hostOnly is nginx's $host of a Host field: lower case, without port
// (an IPv6 literal keeps its brackets, as a Host needs them).
func hostOnly(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		h = h[:i]
	}
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// notSent are the client headers request_headers: ["*"] leaves out: those
// of the client's connection and body (the sub-request is a GET without
// one, on its own connection).
var notSent = map[string]bool{"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true, "Content-Length": true, "Expect": true, "Http2-Settings": true}

// passBack are the answer headers a refusal or redirect carries to the
// client.
var passBack = []string{"Location", "Www-Authenticate", "Set-Cookie", "Content-Type", "Retry-After"}

// Check asks the auth service about r.
func (a *Auth) Check(r *http.Request, o Origin) Verdict {
	ctx, cancel := context.WithTimeout(r.Context(), a.timeout)
	defer cancel()
	sub := (&http.Request{
		Method:     http.MethodGet,
		URL:        a.url,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     make(http.Header, len(a.request)+8),
		Host:       a.url.Host,
	}).WithContext(ctx)
	switch a.host {
	case "":
	case "$host":
		sub.Host = hostOnly(r.Host)
	case "$http_host":
		sub.Host = r.Host
	default:
		sub.Host = a.host
	}
	if a.all {
		for k, vs := range r.Header {
			if !notSent[k] {
				sub.Header[k] = vs
			}
		}
	}
	for _, k := range a.request {
		if vs := r.Header[k]; len(vs) > 0 {
			sub.Header[k] = vs
		}
	}
	// The path the route judged and the backend gets (normalised at the
	// edge), not the target as sent: the auth service must decide about
	// the request that is served.
	uri := r.URL.RequestURI()
	proto := o.Proto
	if proto == "" {
		proto = "http"
		if r.TLS != nil {
			proto = "https"
		}
	}
	h := sub.Header
	h["X-Forwarded-Method"] = []string{r.Method}
	h["X-Original-Method"] = []string{r.Method}
	h["X-Forwarded-Uri"] = []string{uri}
	h["X-Original-Uri"] = []string{uri}
	h["X-Original-Url"] = []string{proto + "://" + r.Host + uri}
	h["X-Forwarded-Host"] = []string{r.Host}
	h["X-Forwarded-Proto"] = []string{proto}
	if o.ClientIP != "" {
		h["X-Forwarded-For"] = []string{o.ClientIP}
		h["X-Real-Ip"] = []string{o.ClientIP}
	}
	v := a.ask(ctx, r, sub)
	if a.nginx && !v.OK && v.Status != 401 && v.Status != 403 && v.Status != 499 {
		// nginx's auth_request: whatever else the sub-request ended in
		// (a redirect, another status, a failure) is its 500.
		why := v.why
		if why == "" {
			why = "the auth service answered " + strconv.Itoa(v.Status)
		}
		return a.failed(http.StatusInternalServerError, why+", which nginx's auth_request reads as an error (statuses: nginx)")
	}
	if a.nginx && !v.OK && v.Status != 499 {
		// nginx answered a refusal with its own page and only the
		// challenge of a 401: the auth service's body and cookies never
		// reached the client.
		body := strconv.Itoa(v.Status) + " " + http.StatusText(v.Status) + "\n"
		h := http.Header{}
		plain.Header(h, len(body))
		if c := v.Header["Www-Authenticate"]; v.Status == http.StatusUnauthorized && len(c) > 0 {
			h["Www-Authenticate"] = c
		}
		return Verdict{Status: v.Status, Header: h, Body: []byte(body)}
	}
	return v
}

// ask sends the sub-request and reads its answer.
func (a *Auth) ask(ctx context.Context, r, sub *http.Request) Verdict {
	resp, err := a.up.RoundTrip(sub)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || ctx.Err() == context.DeadlineExceeded {
			a.C.Timeouts.Add(1)
			return a.failed(http.StatusGatewayTimeout, "the auth service did not answer within "+a.timeout.String())
		}
		if r.Context().Err() != nil {
			return Verdict{Status: 499, Body: []byte("client closed the request\n")}
		}
		a.C.Failed.Add(1)
		return a.failed(http.StatusBadGateway, "the auth service could not be reached")
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	resp.Body.Close()
	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
		a.C.Allowed.Add(1)
		v := Verdict{OK: true, del: a.copy}
		for _, k := range a.copy {
			if vs := resp.Header[k]; len(vs) > 0 {
				if v.set == nil {
					v.set = make(http.Header, len(a.copy))
				}
				v.set[k] = vs
			}
		}
		return v
	case err != nil && ctx.Err() == context.DeadlineExceeded:
		a.C.Timeouts.Add(1)
		return a.failed(http.StatusGatewayTimeout, "the auth service did not finish its answer within "+a.timeout.String())
	case s == http.StatusUnauthorized || s == http.StatusForbidden || s >= 300 && s < 400 && s != http.StatusNotModified:
		if s < 400 {
			a.C.Redirected.Add(1)
		} else {
			a.C.Denied.Add(1)
		}
		v := Verdict{Status: s, Header: make(http.Header, len(passBack)), Body: body}
		for _, k := range passBack {
			if vs := resp.Header[k]; len(vs) > 0 {
				v.Header[k] = vs
			}
		}
		return v
	default:
		a.C.Failed.Add(1)
		return a.failed(http.StatusBadGateway, fmt.Sprintf("the auth service answered %d, which is neither a permission (2xx) nor a refusal (401, 403, 3xx)", s))
	}
}

func (a *Auth) failed(status int, why string) Verdict {
	body := strconv.Itoa(status) + " " + http.StatusText(status) + ": route " + strconv.Quote(a.route) + ": " + why + "; the request was not passed on.\n"
	h := http.Header{}
	plain.Header(h, len(body))
	return Verdict{Status: status, Body: []byte(body), Header: h, why: why}
}
