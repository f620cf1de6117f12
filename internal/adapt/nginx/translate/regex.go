package translate

import (
	"regexp"
	"regexp/syntax"
	"strings"
)

// compileRegex compiles an nginx location regex with Go's engine; ok is
// false for PCRE that RE2 does not take (lookarounds, backreferences).
// covers reports that regex a matches every path regex b matches, as far
// as their written form shows: the same expression but for its groups, or
// b with a trailing $ that a leaves out.
func covers(a, b string) bool {
	bare := func(s string) string {
		re, err := syntax.Parse(s, syntax.Perl)
		if err != nil {
			return "\x00" + s // never equal to a parsed one
		}
		var strip func(*syntax.Regexp) *syntax.Regexp
		strip = func(r *syntax.Regexp) *syntax.Regexp {
			for r.Op == syntax.OpCapture {
				r = r.Sub[0]
			}
			for i, s := range r.Sub {
				r.Sub[i] = strip(s)
			}
			return r
		}
		return strip(re.Simplify()).String()
	}
	x := bare(a)
	return x == bare(b) || x == bare(strings.TrimSuffix(b, "$"))
}

func compileRegex(re string, fold bool) (*regexp.Regexp, bool) {
	if fold {
		re = "(?i)" + re
	}
	m, err := regexp.Compile(re)
	return m, err == nil
}
