// Package forcehttps moves clients to HTTPS: a plain listener's redirect
// of every request (nginx's `return 301 https://$host$request_uri`), which
// lets ACME HTTP-01 challenges through, and the Strict-Transport-Security
// header of TLS listeners.
package forcehttps

import (
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// ChallengePrefix is where ACME HTTP-01 challenges are asked for (RFC 8555
// section 8.3); those requests are never redirected.
const ChallengePrefix = "/.well-known/acme-challenge/"

// Redirect answers every request with a redirect to the same host and
// target over HTTPS, except ACME HTTP-01 challenges, which go to next (the
// ACME handler in front of routing, or the routes themselves when a
// backend answers its own challenges).
func Redirect(r *config.RedirectHTTPS, next http.Handler) http.Handler {
	rd := NewRedirector(r)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !rd.Handle(w, req) {
			next.ServeHTTP(w, req)
		}
	})
}

// Redirector is the redirect of one listener, for a request path that
// looks it up per request (so that a reload can change it) rather than
// wrapping a handler. Build it once per compile; it never changes.
type Redirector struct {
	status int
	port   string // ":8443", or "" for 443
}

// NewRedirector compiles a listener's redirect_https.
func NewRedirector(r *config.RedirectHTTPS) *Redirector {
	port := ""
	if r.Port != 443 {
		port = ":" + strconv.Itoa(r.Port)
	}
	return &Redirector{status: r.Status, port: port}
}

var noBody = []string{"0"}

// Handle answers r with the redirect and reports true, or reports false
// for an ACME HTTP-01 challenge, which the caller routes as usual.
func (h *Redirector) Handle(w http.ResponseWriter, r *http.Request) bool {
	if strings.HasPrefix(r.URL.Path, ChallengePrefix) {
		return false
	}
	host := r.Host
	if hp, _, err := net.SplitHostPort(host); err == nil {
		host = hp
		if strings.Contains(host, ":") {
			host = "[" + host + "]" // an IPv6 literal
		}
	}
	if host == "" {
		http.Error(w, "this listener only redirects to HTTPS, and the request named no host to redirect to", http.StatusBadRequest)
		return true
	}
	// Go's server has already refused Host values with bytes that could
	// break the Location header.
	hdr := w.Header()
	hdr["Location"] = []string{"https://" + host + h.port + r.URL.RequestURI()}
	hdr["Content-Length"] = noBody
	w.WriteHeader(h.status)
	return true
}

// Status is the redirect's status code, for the counts of answers given
// before any route.
func (h *Redirector) Status() int { return h.status }

// HSTSHeader is the header name, in canonical form.
const HSTSHeader = "Strict-Transport-Security"

// HSTS sets Strict-Transport-Security (value from certs.Listener.HSTS) on
// every answer served over TLS before next writes any; a backend's own
// header comes after it, and browsers heed the first (RFC 6797 8.1).
func HSTS(value string, next http.Handler) http.Handler {
	v := []string{value}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil {
			w.Header()[HSTSHeader] = v
		}
		next.ServeHTTP(w, r)
	})
}
