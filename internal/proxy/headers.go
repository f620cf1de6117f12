package proxy

import (
	"net/http"
	"net/netip"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/edge"
	"github.com/sturdyproxy/sturdy/internal/edge/certs"
	"golang.org/x/net/http/httpguts"
)

// hopHeaders are meaningful only for one connection (RFC 9110 7.6.1) and
// are never forwarded. Keys are in canonical form.
var hopHeaders = [...]string{
	"Connection",
	"Proxy-Connection", // non-standard, sent by old clients
	"Keep-Alive",
	"Proxy-Authenticate",
	"Proxy-Authorization",
	"Te",      // kept as "trailers" only, below
	"Trailer", // the transport sets it from Request.Trailer
	"Transfer-Encoding",
	"Upgrade",
}

func isHop(k string) bool {
	for _, h := range hopHeaders {
		if k == h {
			return true
		}
	}
	return false
}

// outboundValues is how many values outboundHeader sets at most.
const outboundValues = 6

// via is what sturdy adds to Via; it is shared and must not be modified.
var via = []string{"1.1 sturdy"}

// outboundHeader builds the header for the upstream request: the client's
// fields minus hop-by-hop ones (and those the client named in Connection),
// with X-Forwarded-* and Via set by us. Because the forwarding fields are
// set after the Connection-named ones are dropped, a client cannot use
// "Connection: X-Forwarded-For" to strip ours.
func outboundHeader(r *http.Request, tls, peerTrusted bool, trusted []netip.Prefix, untrusted map[string]struct{}, upgrade string, spare *[outboundValues]string) http.Header {
	in := r.Header
	// Room for the fields set here and by identity (X-Forwarded-*, X-Real-Ip,
	// Via, X-Forwarded-Port, X-Sturdy-Hops): a map that grows on its ninth
	// field costs four allocations more than one sized for it.
	out := make(http.Header, len(in)+8)
	conn := in["Connection"]
	if peerTrusted {
		untrusted = nil
	}
	for k, vv := range in {
		if isHop(k) || (len(conn) > 0 && namedIn(conn, k)) || certs.IdentityHeader(k) {
			continue
		}
		if _, drop := untrusted[k]; drop {
			continue
		}
		out[k] = vv
	}
	if r.TLS != nil {
		// The client certificate's identity, as verified by us; a client
		// cannot send these itself (skipped above).
		certs.AddIdentity(out, r)
	}
	if httpguts.HeaderValuesContainsToken(in["Te"], "trailers") {
		out["Te"] = te
	}
	if upgrade != "" {
		out["Connection"] = []string{"Upgrade"}
		out["Upgrade"] = []string{upgrade}
	}

	// The values set here share spare, allocated with the request's URL.
	vals := spare[:]
	set := func(k, v string) {
		vals[0] = v
		out[k] = vals[0:1:1]
		vals = vals[1:]
	}
	peerIP := hostOf(r.RemoteAddr)
	if peerTrusted {
		// Believe what the trusted proxy in front of us said, and add it.
		if prior := out["X-Forwarded-For"]; len(prior) > 0 {
			set("X-Forwarded-For", strings.Join(prior, ", ")+", "+peerIP)
			// X-Real-IP is the client sturdy itself resolved from that
			// chain, the one its limits and keys judge, not the proxy's
			// address nor a value the proxy passed on beside the chain.
			ip, _ := edge.ClientIP(r, trusted)
			set("X-Real-Ip", ip.String())
		} else {
			set("X-Forwarded-For", peerIP)
		}
		if len(out["X-Forwarded-Host"]) == 0 {
			set("X-Forwarded-Host", r.Host)
		}
		if len(out["X-Forwarded-Proto"]) == 0 {
			out["X-Forwarded-Proto"] = scheme(tls)
		}
	} else {
		// From anyone else these fields are spoofable; replace them.
		delete(out, "Forwarded")
		delete(out, "X-Real-Ip")
		set("X-Forwarded-For", peerIP)
		set("X-Forwarded-Host", r.Host)
		out["X-Forwarded-Proto"] = scheme(tls)
	}
	if len(out["X-Real-Ip"]) == 0 {
		set("X-Real-Ip", peerIP)
	}
	if prior := out["Via"]; len(prior) > 0 {
		out["Via"] = append(prior[:len(prior):len(prior)], via[0])
	} else {
		out["Via"] = via
	}
	// Go's client would otherwise add its own User-Agent when the client
	// sent none.
	if _, ok := out["User-Agent"]; !ok {
		out["User-Agent"] = emptyUA
	}
	return out
}

// Shared header values; never modified.
var (
	te        = []string{"trailers"}
	emptyUA   = []string{""}
	httpProto = []string{"http"}
	tlsProto  = []string{"https"}
)

// hostOf returns the host part of a RemoteAddr without allocating.
func hostOf(remote string) string {
	h := remote
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		h = h[:i]
	}
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}

func scheme(tls bool) []string {
	if tls {
		return tlsProto
	}
	return httpProto
}

// namedIn reports whether the Connection field values name header k.
func namedIn(conn []string, k string) bool {
	for _, v := range conn {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), k) {
				return true
			}
		}
	}
	return false
}

// upgradeType returns the protocol a message switches to, or "".
func upgradeType(h http.Header) string {
	if !httpguts.HeaderValuesContainsToken(h["Connection"], "Upgrade") {
		return ""
	}
	return h.Get("Upgrade")
}

// allowedUpgrade is the first protocol the request asks to upgrade to
// that allowed lists (by name, the version after "/" aside), or "". Only
// that one is forwarded: an upgraded connection is a tunnel the route's
// rules no longer see into, so a client may open one only to a protocol
// the route allows (h2c never: every request in it would pass unjudged).
func allowedUpgrade(h http.Header, allowed []string) string {
	if len(allowed) == 0 || len(h["Upgrade"]) == 0 || !httpguts.HeaderValuesContainsToken(h["Connection"], "Upgrade") {
		return ""
	}
	for _, v := range h["Upgrade"] {
		for tok := range strings.SplitSeq(v, ",") {
			tok = strings.TrimSpace(tok)
			name, _, _ := strings.Cut(tok, "/")
			for _, a := range allowed {
				if strings.EqualFold(name, a) {
					return tok
				}
			}
		}
	}
	return ""
}

// clientAddr parses a RemoteAddr ("1.2.3.4:5678") without allocating.
func clientAddr(remote string) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap(), true
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// removeHopHeaders deletes hop-by-hop fields, and those named in
// Connection, from h in place.
func removeHopHeaders(h http.Header) {
	for _, v := range h["Connection"] {
		for tok := range strings.SplitSeq(v, ",") {
			if tok = strings.TrimSpace(tok); tok != "" {
				delete(h, http.CanonicalHeaderKey(tok))
			}
		}
	}
	for _, k := range hopHeaders {
		delete(h, k)
	}
}

// copyResponseHeader copies the upstream response header to the client's,
// dropping hop-by-hop fields. Values are shared, not copied: the response
// is ours and is not used after this.
func copyResponseHeader(dst, src http.Header) {
	conn := src["Connection"]
	for k, vv := range src {
		if isHop(k) || (len(conn) > 0 && namedIn(conn, k)) {
			continue
		}
		dst[k] = vv
	}
	if _, ok := src["Content-Type"]; !ok {
		// Stop net/http from sniffing a type the backend did not send.
		dst["Content-Type"] = nil
	}
}
