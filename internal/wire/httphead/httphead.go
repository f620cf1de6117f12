// Package httphead reads HTTP/1.1 field lines strictly and in place: the
// rules sturdy's own HTTP/1.1 readers share (the upstream client's for
// responses, the native front end's for requests, the framing follower's
// Content-Length).
//
// A field line is a token, a colon, and a value of visible characters,
// spaces, tabs and obs-text, with optional whitespace around the value.
// Nothing is repaired: whitespace before the colon, a line starting with
// whitespace (obs-fold) or a control character is refused, because two
// parsers that repair differently disagree on where a message ends.
package httphead

import (
	"bytes"
	"net/http"
	"net/textproto"
)

// Span is a half-open range of offsets into a head's bytes.
type Span struct{ A, B int32 }

// Field is one field line: name and value (whitespace trimmed) as spans,
// and the kind of the name when it is one the framing depends on.
type Field struct {
	Name, Value Span
	Kind        Kind
}

// Kind names the fields a parser treats specially.
type Kind uint8

const (
	Other Kind = iota
	ContentLength
	TransferEncoding
	Connection
	Trailer
	Host
	Expect
	Upgrade
	KeepAlive
)

// ParseField parses the field line l (without its CRLF) found at offset
// base of a head. It returns why the line is refused, or "".
func ParseField(l []byte, base int) (Field, string) {
	if len(l) == 0 || l[0] == ' ' || l[0] == '\t' {
		return Field{}, "obs-fold or whitespace before a field name"
	}
	colon := -1
	for i, c := range l {
		if c == ':' {
			colon = i
			break
		}
		if !TokenByte(c) {
			return Field{}, "invalid byte in field name"
		}
	}
	if colon <= 0 {
		return Field{}, "field line without name or colon"
	}
	i, j := colon+1, len(l)
	for i < j && (l[i] == ' ' || l[i] == '\t') {
		i++
	}
	for j > i && (l[j-1] == ' ' || l[j-1] == '\t') {
		j--
	}
	for _, c := range l[i:j] {
		if !ValueByte(c) {
			return Field{}, "invalid byte in field value"
		}
	}
	f := Field{Name: Span{int32(base), int32(base + colon)}, Value: Span{int32(base + i), int32(base + j)}}
	f.Kind = kindOf(l[:colon])
	return f, ""
}

func kindOf(name []byte) Kind {
	switch len(name) {
	case 4:
		if EqualFold(name, "host") {
			return Host
		}
	case 6:
		if EqualFold(name, "expect") {
			return Expect
		}
	case 7:
		if EqualFold(name, "trailer") {
			return Trailer
		}
		if EqualFold(name, "upgrade") {
			return Upgrade
		}
	case 10:
		if EqualFold(name, "connection") {
			return Connection
		}
		if EqualFold(name, "keep-alive") {
			return KeepAlive
		}
	case 14:
		if EqualFold(name, "content-length") {
			return ContentLength
		}
	case 17:
		if EqualFold(name, "transfer-encoding") {
			return TransferEncoding
		}
	}
	return Other
}

// ContentLengthValue parses a Content-Length value: 1 to 18 digits, nothing
// else (no sign, no list, no whitespace).
func ContentLengthValue(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// Put adds the value v under key to h, taking the one-element slice for
// a new key from spare (which has room for every field of the head), so
// that a whole header costs two allocations: the map and spare.
func Put(h http.Header, spare *[]string, key, v string) {
	if vv, ok := h[key]; ok {
		h[key] = append(vv, v)
		return
	}
	sp := *spare
	sp[0] = v
	h[key] = sp[:1:1]
	*spare = sp[1:]
}

// CanonicalKey returns the canonical form of the name at sp, a slice of s
// (whose bytes are b): s itself when the name was canonical already, a
// shared constant for common names, and an allocated string otherwise.
func CanonicalKey(s string, b []byte, sp Span) string {
	name := b[sp.A:sp.B]
	upper := true
	canonical := true
	for _, c := range name {
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			canonical = false
			break
		}
		upper = c == '-'
	}
	if canonical {
		return s[sp.A:sp.B]
	}
	var tmp [64]byte
	if len(name) > len(tmp) {
		return textproto.CanonicalMIMEHeaderKey(s[sp.A:sp.B])
	}
	k := tmp[:len(name)]
	upper = true
	for i, c := range name {
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		} else if !upper && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		k[i] = c
		upper = c == '-'
	}
	if v, ok := common[string(k)]; ok {
		return v
	}
	return string(k)
}

// common interns frequent field names of requests and responses, so that
// a peer sending them in lower case costs no allocation.
var common = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"Accept", "Accept-Encoding", "Accept-Language", "Accept-Ranges",
		"Access-Control-Allow-Credentials", "Access-Control-Allow-Headers",
		"Access-Control-Allow-Methods", "Access-Control-Allow-Origin", "Access-Control-Expose-Headers",
		"Access-Control-Max-Age", "Age", "Allow", "Alt-Svc", "Authorization", "Cache-Control",
		"Connection", "Content-Disposition", "Content-Encoding", "Content-Language",
		"Content-Length", "Content-Location", "Content-Range", "Content-Security-Policy",
		"Content-Type", "Cookie", "Date", "Etag", "Expires", "If-Match", "If-Modified-Since",
		"If-None-Match", "Keep-Alive", "Last-Modified", "Link", "Location", "Origin", "Pragma",
		"Range", "Referer", "Referrer-Policy", "Retry-After", "Server", "Set-Cookie",
		"Strict-Transport-Security", "Trailer", "Transfer-Encoding", "User-Agent", "Vary", "Via",
		"Www-Authenticate", "X-Content-Type-Options", "X-Forwarded-For", "X-Forwarded-Host",
		"X-Forwarded-Proto", "X-Frame-Options", "X-Powered-By", "X-Real-Ip", "X-Request-Id",
		"X-Requested-With", "X-Xss-Protection",
	} {
		m[k] = k
	}
	return m
}()

// TokenByte reports whether c may appear in a token (RFC 9110 5.6.2).
func TokenByte(c byte) bool { return tokenTable[c] }

// ValueByte reports whether c may appear in a field value or reason
// phrase: visible characters, SP, HTAB and obs-text; no CTL.
func ValueByte(c byte) bool { return c >= 0x20 && c != 0x7f || c == '\t' }

var tokenTable = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// EqualFold compares b with the lower-case ASCII string s, ignoring the
// case of b.
func EqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// HasToken reports whether the comma-separated list v holds token (lower
// case), ignoring case and optional whitespace.
func HasToken(v []byte, token string) bool {
	for len(v) > 0 {
		var elem []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			elem, v = v[:i], v[i+1:]
		} else {
			elem, v = v, nil
		}
		elem = bytes.Trim(elem, " \t")
		if EqualFold(elem, token) {
			return true
		}
	}
	return false
}

// KeepAliveTimeout is the timeout=N parameter of a Keep-Alive field value
// ("timeout=5, max=100": the HTTP/1.0 keep-alive extension, RFC 2068
// section 19.7.1.1), in seconds, or -1 when it has none or it does not
// parse.
func KeepAliveTimeout(v []byte) int {
	for len(v) > 0 {
		var elem []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			elem, v = v[:i], v[i+1:]
		} else {
			elem, v = v, nil
		}
		elem = bytes.Trim(elem, " \t")
		name, val, ok := bytes.Cut(elem, []byte("="))
		if !ok || !EqualFold(bytes.TrimRight(name, " \t"), "timeout") {
			continue
		}
		val = bytes.Trim(bytes.TrimLeft(val, " \t"), `"`)
		if len(val) == 0 || len(val) > 9 {
			return -1
		}
		n := 0
		for _, c := range val {
			if c < '0' || c > '9' {
				return -1
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	return -1
}

// Unhex is the value of the hexadecimal digit c (either case), or -1: for
// chunk sizes and percent-encodings.
func Unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}
