package edge

import (
	"strings"

	"github.com/sturdyproxy/sturdy/internal/wire/httphead"
)

// The normalised path. Check computes it once per request, on both front
// ends, before anything looks at the path: routing, access controls, rate
// limit keys, static files, the cache key, forward auth's X-Forwarded-Uri
// and the path forwarded to the backend all read it, so that no rule ever
// judges a path other than the one served or forwarded. As nginx does
// before it chooses a location:
//
//   - percent-encoded unreserved characters (RFC 3986 section 2.3:
//     letters, digits, "-", ".", "_", "~") are decoded, so that %61dmin is
//     admin and %2e%2e is a dot segment, to the router and the backend
//     alike; every other encoding stays as sent;
//   - runs of slashes are merged (unless the listener sets merge_slashes:
//     false), before dot segments, as nginx merges them: /a//../b is /b;
//   - dot segments are resolved, never above the root (RFC 3986 section
//     5.2.4).
//
// The result is a fixed point: normalising it again changes nothing.

// normalize is the escaped path p (re-encoded, its escapes valid) in the
// form that is routed on and forwarded.
func normalize(p string, merge bool) string {
	p = decodeUnreserved(p)
	if merge {
		p = mergeRuns(p)
	}
	return removeDotSegments(p)
}

// decodeUnreserved decodes the percent-encodings of unreserved
// characters: they mean the same encoded or not (RFC 3986 section
// 6.2.2.2), and a backend that routes on the raw path must see them as
// the router did.
func decodeUnreserved(p string) string {
	var b []byte
	last := 0
	for i := strings.IndexByte(p, '%'); i >= 0 && i+2 < len(p); {
		if ishex(p[i+1]) && ishex(p[i+2]) {
			if c := byte(httphead.Unhex(p[i+1])<<4 | httphead.Unhex(p[i+2])); unreserved(c) {
				if b == nil {
					b = make([]byte, 0, len(p))
				}
				b = append(b, p[last:i]...)
				b = append(b, c)
				last = i + 3
			}
		}
		j := strings.IndexByte(p[i+1:], '%')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	if b == nil {
		return p
	}
	return string(append(b, p[last:]...))
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// mergeRuns replaces each run of slashes in p with one slash.
func mergeRuns(p string) string {
	if !strings.Contains(p, "//") {
		return p
	}
	b := make([]byte, 0, len(p))
	for i := 0; i < len(p); i++ {
		if p[i] == '/' && i > 0 && p[i-1] == '/' {
			continue
		}
		b = append(b, p[i])
	}
	return string(b)
}

func hasDotSegment(p string) bool {
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// removeDotSegments is RFC 3986 section 5.2.4 for an absolute path: "."
// segments go, ".." removes the segment before it, never above the root. A
// trailing "/." or "/.." leaves a trailing slash.
func removeDotSegments(p string) string {
	if !hasDotSegment(p) {
		return p
	}
	segs := strings.Split(p, "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	r := strings.Join(out, "/")
	if !strings.HasPrefix(r, "/") {
		r = "/" + r
	}
	return r
}

// WithoutParams is path (decoded, normalised) as a server that strips
// path parameters reads it: each segment's ";..." removed (Java servlet
// containers do so), then runs of slashes merged and dot segments
// resolved again ("/a/..;/b" is "/b" there). ok is false when path holds
// no ";", and then there is nothing to compare.
func WithoutParams(path string) (p string, ok bool) {
	if strings.IndexByte(path, ';') < 0 {
		return path, false
	}
	b := make([]byte, 0, len(path))
	skip := false
	for i := 0; i < len(path); i++ {
		switch c := path[i]; {
		case c == '/':
			skip = false
		case c == ';':
			skip = true
		}
		if !skip {
			b = append(b, path[i])
		}
	}
	return removeDotSegments(mergeRuns(string(b))), true
}
