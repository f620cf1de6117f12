package translate

import "strings"

// A regex location that keeps clients out (deny all, return 403 or 404)
// but uses PCRE look-around, which RE2 does not have, is matched by the
// same regex without its look-around groups: a superset of its paths, so
// the rules apply to more paths than in nginx, never fewer
// (`location ~ /\.(?!well-known) { deny all; }` refuses /.well-known/ too,
// unless a ^~ or exact route takes those first). A regex location that
// proxies or serves files is not widened this way: it is listed.

// dropLookaround removes (?=...), (?!...), (?<=...) and (?<!...) groups
// from a PCRE expression; ok is false when nothing was removed or the
// expression is not balanced.
func dropLookaround(re string) (string, bool) {
	var b strings.Builder
	removed := false
	for i := 0; i < len(re); {
		switch {
		case re[i] == '\\' && i+1 < len(re):
			b.WriteString(re[i : i+2])
			i += 2
		case re[i] == '[':
			j := classEnd(re, i)
			if j < 0 {
				return "", false
			}
			b.WriteString(re[i : j+1])
			i = j + 1
		case strings.HasPrefix(re[i:], "(?=") || strings.HasPrefix(re[i:], "(?!") || strings.HasPrefix(re[i:], "(?<=") || strings.HasPrefix(re[i:], "(?<!"):
			j := groupEnd(re, i)
			if j < 0 {
				return "", false
			}
			removed = true
			i = j + 1
		default:
			b.WriteByte(re[i])
			i++
		}
	}
	return b.String(), removed
}

// classEnd is the index of the ] closing the class that starts at i.
func classEnd(re string, i int) int {
	j := i + 1
	if j < len(re) && re[j] == '^' {
		j++
	}
	if j < len(re) && re[j] == ']' {
		j++
	}
	for ; j < len(re); j++ {
		switch re[j] {
		case '\\':
			j++
		case ']':
			return j
		}
	}
	return -1
}

// groupEnd is the index of the ) closing the group that starts at i.
func groupEnd(re string, i int) int {
	depth := 0
	for j := i; j < len(re); j++ {
		switch re[j] {
		case '\\':
			j++
		case '[':
			k := classEnd(re, j)
			if k < 0 {
				return -1
			}
			j = k
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}

// keepsOut reports a location whose answer keeps clients out: access
// rules, or a fixed 401, 403, 404 or 444.
func (c *locCtx) keepsOut() bool {
	if c.guard.any() || len(c.protect) > 0 {
		return true
	}
	if rs := c.r.respond; rs != nil {
		switch rs.Status {
		case 401, 403, 404, 444:
			return true
		}
	}
	if c.static != nil && c.pass == nil {
		switch c.static.fixed {
		case 401, 403, 404, 444:
			return true
		}
	}
	return false
}
