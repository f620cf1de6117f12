package cache

import (
	"net/http"
	"strconv"
	"strings"
)

// cacheName identifies this cache in Cache-Status.
const cacheName = "sturdy"

// Values of the RFC 9211 fwd parameter used here.
const (
	fwdBypass   = "bypass"   // policy or method: the cache was not used
	fwdURIMiss  = "uri-miss" // nothing stored for the URI
	fwdVaryMiss = "vary-miss"
	fwdStale    = "stale"   // a stored response existed but had to be validated
	fwdRequest  = "request" // the client asked for validation (no-cache, max-age)
)

// cacheStatus is one RFC 9211 Cache-Status list member.
type cacheStatus struct {
	hit       bool
	fwd       string
	fwdStatus int // 0: no response from the next hop
	ttl       int64
	hasTTL    bool
	stored    bool
	collapsed bool
	detail    string
}

func (s *cacheStatus) String() string {
	b := make([]byte, 0, 64)
	b = append(b, cacheName...)
	if s.hit {
		b = append(b, "; hit"...)
	}
	if s.fwd != "" {
		b = append(b, "; fwd="...)
		b = append(b, s.fwd...)
	}
	if s.fwdStatus != 0 {
		b = append(b, "; fwd-status="...)
		b = strconv.AppendInt(b, int64(s.fwdStatus), 10)
	}
	if s.hasTTL {
		b = append(b, "; ttl="...)
		b = strconv.AppendInt(b, s.ttl, 10)
	}
	if s.stored {
		b = append(b, "; stored"...)
	}
	if s.collapsed {
		b = append(b, "; collapsed"...)
	}
	if s.detail != "" {
		b = append(b, "; detail="...)
		b = appendTokenOrString(b, s.detail)
	}
	return string(b)
}

// appendTokenOrString writes v as a structured-field token when it is one,
// otherwise as a quoted sf-string (RFC 8941) with unprintables dropped.
func appendTokenOrString(b []byte, v string) []byte {
	if isToken(v) {
		return append(b, v...)
	}
	b = append(b, '"')
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c >= 0x20 && c < 0x7f:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

func isToken(v string) bool {
	if v == "" || !(v[0] >= 'a' && v[0] <= 'z' || v[0] >= 'A' && v[0] <= 'Z' || v[0] == '*') {
		return false
	}
	for i := 1; i < len(v); i++ {
		c := v[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// setCacheStatus appends ours to whatever Cache-Status the upstream sent,
// as one comma-separated list with ours last (RFC 9211 2).
func setCacheStatus(h http.Header, s *cacheStatus) {
	h["Cache-Status"] = []string{cacheStatusValue(h["Cache-Status"], s)}
}

// cacheStatusValue is the Cache-Status field value with s appended to prev.
func cacheStatusValue(prev []string, s *cacheStatus) string {
	ours := s.String()
	if len(prev) > 0 {
		ours = strings.Join(prev, ", ") + ", " + ours
	}
	return ours
}
