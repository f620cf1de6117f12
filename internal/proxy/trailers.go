package proxy

import (
	"net/http"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/edge"
	"github.com/sturdyproxy/sturdy/internal/edge/certs"
	"golang.org/x/net/http/httpguts"
)

// A request's trailer fields come after its body, when whatever reads
// headers has long decided on them, and many backends merge them into the
// header anyway. So only fields that may be trailers go on (RFC 9110
// 6.5.1): never framing, routing, authentication, request modifiers or
// content format (httpguts.ValidTrailerHeader's list: Host,
// Content-Length, Transfer-Encoding, Authorization, If-*, Range,
// Content-Type, Content-Encoding, Trailer, TE, ...), nor the fields that
// name the client, which sturdy sets in the header itself.

// notTrailers are refused in trailers on top of httpguts' list. Keys are
// in canonical form.
var notTrailers = map[string]bool{
	"Cookie": true, "Upgrade": true, "Forwarded": true, "Via": true,
	"X-Forwarded-For": true, "X-Forwarded-Host": true, "X-Forwarded-Proto": true, "X-Forwarded-Port": true,
	"X-Real-Ip": true, hopsHeader: true,
}

// trailerRule decides which of a request's trailer fields are forwarded.
type trailerRule struct {
	untrusted   map[string]struct{} // nil for a trusted peer
	underscores bool                // names with "_" may pass
}

func (tr trailerRule) allows(k string) bool {
	switch {
	case !httpguts.ValidTrailerHeader(k), notTrailers[k], isHop(k), certs.IdentityHeader(k):
		return false
	case !tr.underscores && strings.IndexByte(k, '_') >= 0:
		return false
	}
	_, untrusted := tr.untrusted[k]
	return !untrusted
}

// trailers carries the client's trailer fields to the outbound request's
// once the body has ended: in is the client request's Trailer (filled by
// the server as the body ends), out the outbound request's, which the
// upstream client reads after the body.
type trailers struct {
	in, out http.Header
	rule    trailerRule
	c       *edge.Counters
	dropped bool
}

// outboundTrailer prepares the outbound request's Trailer from the
// fields the client announced: those that may be trailers, without
// values yet (finish copies them).
func (f *forwarder) outboundTrailer(in http.Header) *trailers {
	rule := trailerRule{}
	if !f.peerTrusted() {
		rule.untrusted = f.snap.Untrusted
	}
	if ln := f.snap.Listeners[f.h.Listener]; ln != nil {
		rule.underscores = ln.AllowUnderscores
	}
	t := &trailers{in: in, out: make(http.Header, len(in)), rule: rule, c: f.snap.Edge.C}
	for k := range in {
		if rule.allows(k) {
			t.out[k] = nil
		} else {
			t.dropped = true
		}
	}
	return t
}

// finish copies the values of the fields that may be trailers, once the
// client's body has ended, and counts a request whose trailer lost any.
func (t *trailers) finish() {
	for k, vv := range t.in {
		if t.rule.allows(k) {
			t.out[k] = vv
		} else {
			t.dropped = true
		}
	}
	if t.dropped {
		t.c.Add(edge.DroppedTrailer)
	}
}
