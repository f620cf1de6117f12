package proxy

import (
	"net"
	"net/http"
	"strings"
)

// identity finishes the outbound header's forwarding fields (from a peer
// that is not trusted, outboundHeader left snap.Untrusted's out):
// X-Forwarded-Port is set to the listener's port (a trusted proxy's is
// kept); X-Sturdy-Hops gets this instance's mark, for loop detection.
func (f *forwarder) identity(out http.Header) {
	r := f.r
	if !f.peerTrusted() || len(out["X-Forwarded-Port"]) == 0 {
		out["X-Forwarded-Port"] = f.h.portHeader(r)
	}
	if tok := f.snap.Instance; tok != "" {
		if prior := out[hopsHeader]; len(prior) > 0 {
			out[hopsHeader] = append(prior[:len(prior):len(prior)], tok)
		} else {
			out[hopsHeader] = f.h.hopsValue(tok)
		}
	}
}

// hopsValue is X-Sturdy-Hops' value holding only tok, made once for the
// instance's mark (a new snapshot may bring another).
func (h *Handler) hopsValue(tok string) []string {
	if v := h.hopsHdr.Load(); v != nil && (*v)[0] == tok {
		return *v
	}
	v := []string{tok}
	h.hopsHdr.Store(&v)
	return v
}

// portHeader is X-Forwarded-Port's value: the listener's port, made once,
// or the connection's.
func (h *Handler) portHeader(r *http.Request) []string {
	if h.Port == "" {
		return []string{h.port(r)}
	}
	if v := h.portHdr.Load(); v != nil {
		return *v
	}
	v := []string{h.Port}
	h.portHdr.Store(&v)
	return v
}

// port is the port the client connected to.
func (h *Handler) port(r *http.Request) string {
	if h.Port != "" {
		return h.Port
	}
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if _, p, err := net.SplitHostPort(a.String()); err == nil {
			return p
		}
	}
	if r.TLS != nil {
		return "443"
	}
	return "80"
}

// hopsHeader carries one mark per pass through a sturdy, so that a
// request that comes back to the instance that sent it is recognised.
const hopsHeader = "X-Sturdy-Hops"

// maxSelfPasses is how many times a request may already have passed
// through this instance before it is refused with 508: once is a route
// that proxies to another route of the same sturdy, more is a loop.
const maxSelfPasses = 2

// isLoop reports whether the request carries this instance's mark
// maxSelfPasses times or more.
func isLoop(h http.Header, token string) bool {
	vv := h[hopsHeader]
	if len(vv) == 0 {
		return false
	}
	n := 0
	for _, v := range vv {
		n += strings.Count(v, token)
	}
	return n >= maxSelfPasses
}

// peerTrusted tells whether the connection's peer is one of the trusted
// proxies. The address is parsed once per request, however many steps ask.
func (f *forwarder) peerTrusted() bool {
	if f.peer == peerUnknown {
		f.peer = peerUntrusted
		if a, _ := clientAddr(f.r.RemoteAddr); isTrusted(a, f.snap.Trusted) {
			f.peer = peerIsTrusted
		}
	}
	return f.peer == peerIsTrusted
}

// What a forwarder knows of its peer.
const (
	peerUnknown uint8 = iota
	peerUntrusted
	peerIsTrusted
)
