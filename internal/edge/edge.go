// Package edge decides, before any backend is asked, whether a request may
// go on: denied client addresses get 403, malformed request targets get 400
// or are re-encoded and normalised so that the path routed on is the path
// forwarded. Nothing decided here is ever charged to a backend.
//
// net/http accepts raw bytes >= 0x80 in the request target and a proxy that
// forwards them raw hands every backend a request it may choke on: that was
// incident 003.
package edge

import (
	"net/http"
	"net/netip"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/wire/httphead"
)

// Edge is one config's edge rules. It is immutable.
type Edge struct {
	reject  bool // non_ascii: reject
	deny    []netip.Prefix
	trusted []netip.Prefix
	C       *Counters
}

// New builds the rules. deny and trusted are parsed prefixes; c may be
// shared with the previous config's Edge so that counts carry on.
func New(rejectNonASCII bool, deny, trusted []netip.Prefix, c *Counters) *Edge {
	if c == nil {
		c = new(Counters)
	}
	return &Edge{reject: rejectNonASCII, deny: deny, trusted: trusted, C: c}
}

// Check inspects r and may rewrite its URL to the one normalised path that
// everything after it judges, serves and forwards (path.go): merge says
// whether runs of slashes are merged (the listener's merge_slashes). It
// returns 0 when the request may go on, or the status and a reason for the
// client. slashes reports that the path holds an encoded slash or
// backslash (%2F, %5C): the request was routed on the decoded form, and
// only a route that allows encoded slashes may take it (see
// EncodedSlashes).
func (e *Edge) Check(r *http.Request, merge bool) (status int, why string, slashes bool) {
	if len(e.deny) > 0 {
		if ip, ok := ClientIP(r, e.trusted); ok && contains(e.deny, ip) {
			e.C.Add(Denied)
			return http.StatusForbidden, "requests from this address are refused", false
		}
	}
	if r.Method == http.MethodConnect || r.RequestURI == "*" {
		return 0, "", false
	}
	target := r.RequestURI
	if clean(target, merge) {
		return 0, "", false
	}
	reason, why, slashes := e.fix(r, target, merge)
	if why != "" {
		e.C.Add(reason)
		return http.StatusBadRequest, why, false
	}
	return 0, "", slashes
}

// clean reports whether a request target needs no closer look: origin
// form, only printable ASCII, no percent sign or backslash in the path, no
// dot segment, and, when merging, no repeated slash. Most requests are.
// The query plays no part in routing and is forwarded as received: only
// raw bytes outside printable ASCII make it worth a look.
func clean(t string, merge bool) bool {
	if !strings.HasPrefix(t, "/") {
		return false // absolute form: its path is found in fix
	}
	inQuery := false
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c <= 0x20 || c >= 0x7f:
			return false
		case inQuery:
		case c == '?':
			inQuery = true
		case c == '%', c == '\\', c == '.' && i > 0 && t[i-1] == '/':
			return false
		case c == '/' && merge && i > 0 && t[i-1] == '/':
			return false
		}
	}
	return true
}

// fix validates the target and rewrites r.URL to the form that is both
// routed on and forwarded (normalize, in path.go). A refusal comes with
// its reason and a sentence.
func (e *Edge) fix(r *http.Request, target string, merge bool) (Reason, string, bool) {
	// Absolute-form targets (proxies) carry scheme and host; the URL parser
	// already took them apart, so work on path and query alone.
	rawPath, rawQuery, hasQuery := strings.Cut(target, "?")
	if !strings.HasPrefix(rawPath, "/") {
		// Absolute form (scheme://authority/path, or scheme:/path): keep
		// the path; one with none (scheme://authority, or an opaque
		// scheme:x that no path follows) is "/", as it is forwarded.
		rest := rawPath
		if i := strings.Index(rawPath, "://"); i >= 0 {
			rest = rawPath[i+3:]
		} else if i := strings.IndexByte(rawPath, ':'); i >= 0 {
			rest = rawPath[i+1:]
		}
		rawPath = "/"
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			rawPath = rest[j:]
		}
	}
	if i := strings.IndexByte(rawQuery, '#'); i >= 0 {
		rawQuery = rawQuery[:i]
	}
	if reason, why := checkPath(rawPath, e.reject); why != "" {
		return reason, why, false
	}
	if reason, why := checkQuery(rawQuery, e.reject); why != "" {
		return reason, why, false
	}
	lower := strings.ToLower(rawPath)
	slashes := strings.Contains(lower, "%2f") || strings.Contains(lower, "%5c")
	switch {
	case strings.Contains(rawPath, "\\"):
		return RejectSlash, "a backslash in the path is ambiguous (some servers read it as a slash); percent-encode it as %5C", false
	case strings.Contains(lower, "%00"):
		return RejectNUL, "NUL (%00) in the request path", false
	}
	path, pre := reencode(rawPath, pathUnsafe)
	query, qre := reencode(rawQuery, nil)
	if pre || qre {
		e.C.Add(Reencoded)
	}
	resolved := normalize(path, merge)
	if resolved != path {
		e.C.Add(Normalized)
	}
	if slashes {
		// Routed on the decoded form, forwarded encoded: the two must not
		// disagree about the path's segments. Encoded slashes that make a
		// dot segment ("/a/..%2Fadmin") would be resolved one way here and
		// maybe another by the backend.
		if hasDotSegment(strings.ReplaceAll(slashDecoder.Replace(resolved), "\\", "/")) {
			return RejectSlash, "encoded slashes that form dot segments (like ..%2F) are ambiguous", false
		}
	}
	if resolved != rawPath || r.URL.Path == "" {
		decoded, err := unescape(resolved)
		if err != nil {
			return RejectEscape, "invalid percent-encoding in the path", false
		}
		r.URL.Path, r.URL.RawPath, r.URL.Opaque = decoded, resolved, ""
	}
	if hasQuery && qre {
		r.URL.RawQuery = query
	}
	return 0, "", slashes
}

// slashDecoder decodes the encoded slashes alone.
var slashDecoder = strings.NewReplacer("%2f", "/", "%2F", "/", "%5c", "\\", "%5C", "\\")

// EncodedSlashes reports whether path (a URL's EscapedPath or RawPath)
// holds %2F or %5C.
func EncodedSlashes(path string) bool {
	for i := 0; i+2 < len(path); i++ {
		if path[i] == '%' && (path[i+1] == '2' && (path[i+2] == 'f' || path[i+2] == 'F') || path[i+1] == '5' && (path[i+2] == 'c' || path[i+2] == 'C')) {
			return true
		}
	}
	return false
}

// checkQuery refuses in the query only what no backend should get: raw
// control bytes, and raw non-ASCII bytes in reject mode. Percent signs
// pass as they came, stray or not, as nginx passes them: the query is not
// routed on, and decoding it is the application's business.
func checkQuery(s string, rejectNonASCII bool) (Reason, string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c < 0x20 || c == 0x7f:
			return RejectControl, "control characters in the request target"
		case c >= 0x80 && rejectNonASCII:
			return RejectNonASCII, "raw non-ASCII bytes in the request target; percent-encode them"
		}
	}
	return 0, ""
}

// checkPath rejects control bytes and broken percent-encodings in the
// path, and raw non-ASCII bytes in reject mode.
func checkPath(s string, rejectNonASCII bool) (Reason, string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c < 0x20 || c == 0x7f:
			return RejectControl, "control characters in the request target"
		case c >= 0x80 && rejectNonASCII:
			return RejectNonASCII, "raw non-ASCII bytes in the request target; percent-encode them"
		case c == '%':
			if i+2 >= len(s) || !ishex(s[i+1]) || !ishex(s[i+2]) {
				return RejectEscape, "invalid percent-encoding in the request path"
			}
		}
	}
	return 0, ""
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// reencode percent-encodes raw bytes >= 0x80, spaces and the bytes in
// unsafe.
func reencode(s string, unsafe *[256]bool) (string, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x80 || c == ' ' || unsafe != nil && unsafe[c] {
			n++
		}
	}
	if n == 0 {
		return s, false
	}
	const hexdigits = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 || c == ' ' || unsafe != nil && unsafe[c] {
			b = append(b, '%', hexdigits[c>>4], hexdigits[c&15])
			continue
		}
		b = append(b, c)
	}
	return string(b), true
}

// pathUnsafe are the printable bytes that net/url escapes in a path: a
// raw path holding one is not forwarded as it is but escaped again from
// its decoded form, which would lose the escapes it must keep (%2F), so
// the edge encodes them first.
var pathUnsafe = func() *[256]bool {
	var t [256]bool
	for _, c := range []byte("\"#<>^`{|}") {
		t[c] = true
	}
	return &t
}()

// unescape decodes percent-encodings (validated before).
func unescape(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' {
			if i+2 >= len(s) || !ishex(s[i+1]) || !ishex(s[i+2]) {
				return "", errBadEscape
			}
			b = append(b, byte(httphead.Unhex(s[i+1])<<4|httphead.Unhex(s[i+2])))
			i += 2
			continue
		}
		b = append(b, s[i])
	}
	return string(b), nil
}

type escapeError struct{}

func (escapeError) Error() string { return "invalid percent-encoding" }

var errBadEscape error = escapeError{}

// ClientIP is the client's address: the peer, or, when the peer is a
// trusted proxy, the nearest untrusted address in X-Forwarded-For.
func ClientIP(r *http.Request, trusted []netip.Prefix) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	ip := ap.Addr().Unmap()
	if !contains(trusted, ip) {
		return ip, true
	}
	xff := strings.Join(r.Header["X-Forwarded-For"], ",")
	for xff != "" {
		i := strings.LastIndexByte(xff, ',')
		hop := strings.TrimSpace(xff[i+1:])
		xff = xff[:max(i, 0)]
		a, err := netip.ParseAddr(hop)
		if err != nil {
			break
		}
		ip = a.Unmap()
		if !contains(trusted, ip) {
			break
		}
		if i < 0 {
			break
		}
	}
	return ip, true
}

func contains(ps []netip.Prefix, ip netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
