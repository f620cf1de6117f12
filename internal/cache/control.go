package cache

import (
	"net/http"
	"strings"
	"time"
)

// absent marks a delta-seconds directive that was not present.
const absent time.Duration = -1

// maxDelta is the largest delta-seconds value honoured; RFC 9111 1.2.2 says
// larger values are to be taken as 2^31 seconds.
const maxDelta = (1 << 31) * time.Second

// directives is a parsed Cache-Control header (request or response). Only the
// directives this cache acts on are kept; unknown ones are ignored, as RFC
// 9111 5.2.3 requires.
type directives struct {
	noStore, noCache, private, public bool
	mustRevalidate, proxyRevalidate   bool

	maxAge, sMaxAge, minFresh time.Duration // absent when not present
	staleWhileRevalidate      time.Duration // RFC 5861; absent when not present
	staleIfError              time.Duration // RFC 5861; absent when not present
}

// forbidsStale reports whether the response may never be served stale, not
// even under stale-if-error (RFC 9111 4.2.4). s-maxage implies
// proxy-revalidate for a shared cache, but an explicit RFC 5861 directive is
// the origin's more specific permission, so it is handled by the callers.
func (d *directives) forbidsStale() bool {
	return d.mustRevalidate || d.proxyRevalidate || d.noCache
}

// parseDirectives parses all Cache-Control field lines. The first occurrence
// of a repeated directive wins (RFC 9111 4.2.1). Qualified forms such as
// private="Set-Cookie" or no-cache="X" are treated as their unqualified,
// stricter form.
func parseDirectives(lines []string) directives {
	d := directives{maxAge: absent, sMaxAge: absent, minFresh: absent,
		staleWhileRevalidate: absent, staleIfError: absent}
	for _, line := range lines {
		for len(line) > 0 {
			var name, value string
			name, value, line = nextDirective(line)
			d.set(name, value)
		}
	}
	return d
}

func (d *directives) set(name, value string) {
	switch strings.ToLower(name) {
	case "no-store":
		d.noStore = true
	case "no-cache":
		d.noCache = true
	case "private":
		d.private = true
	case "public":
		d.public = true
	case "must-revalidate":
		d.mustRevalidate = true
	case "proxy-revalidate":
		d.proxyRevalidate = true
	case "max-age":
		setDelta(&d.maxAge, value, 0)
	case "s-maxage":
		setDelta(&d.sMaxAge, value, 0)
	case "min-fresh":
		setDelta(&d.minFresh, value, absent)
	case "stale-while-revalidate":
		setDelta(&d.staleWhileRevalidate, value, absent)
	case "stale-if-error":
		setDelta(&d.staleIfError, value, absent)
	}
}

// setDelta stores a delta-seconds value unless one was already seen. An
// invalid value becomes onInvalid: 0 for freshness directives (treat the
// response as stale, the safe reading) and absent for permissions such as
// stale-if-error (grant nothing).
func setDelta(dst *time.Duration, value string, onInvalid time.Duration) {
	if *dst != absent {
		return
	}
	v, ok := parseDelta(value)
	if !ok {
		*dst = onInvalid
		return
	}
	*dst = v
}

func parseDelta(s string) (time.Duration, bool) {
	if s == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
		if n >= 1<<31 {
			return maxDelta, true
		}
	}
	return time.Duration(n) * time.Second, true
}

// nextDirective splits the first directive off a Cache-Control line,
// honouring quoted-string values that may contain commas.
func nextDirective(s string) (name, value, rest string) {
	s = strings.TrimLeft(s, " \t,")
	i := 0
	for i < len(s) && s[i] != '=' && s[i] != ',' {
		i++
	}
	name = strings.TrimSpace(s[:i])
	if i == len(s) || s[i] == ',' {
		return name, "", s[i:]
	}
	s = strings.TrimLeft(s[i+1:], " \t")
	if strings.HasPrefix(s, `"`) {
		var b strings.Builder
		j := 1
		for ; j < len(s) && s[j] != '"'; j++ {
			if s[j] == '\\' && j+1 < len(s) {
				j++
			}
			b.WriteByte(s[j])
		}
		if j < len(s) {
			j++ // closing quote
		}
		return name, b.String(), s[j:]
	}
	j := 0
	for j < len(s) && s[j] != ',' {
		j++
	}
	return name, strings.TrimSpace(s[:j]), s[j:]
}

// requestDirectives parses a request's Cache-Control, falling back to
// "Pragma: no-cache" when there is no Cache-Control (RFC 9111 5.4).
func requestDirectives(h http.Header) directives {
	cc := h["Cache-Control"]
	d := parseDirectives(cc)
	if len(cc) == 0 {
		for _, p := range h["Pragma"] {
			if strings.Contains(strings.ToLower(p), "no-cache") {
				d.noCache = true
			}
		}
	}
	return d
}
