package translate

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
)

// regexPaths turns a location regex that only names path prefixes into
// those prefixes: "^/(api|feeds)" is /api and /feeds; "^/(?:build|tests)(?:$|/)"
// is /build and /tests as whole segments, exactly sturdy's matching.
// exact reports a regex that matches whole paths ("^/x$"), which a prefix
// cannot express. ok is false for anything else (character classes,
// repetition, unanchored patterns, PCRE syntax Go does not parse).
func regexPaths(re string, fold bool) (paths []string, exact, ok bool) {
	flags := syntax.Perl
	if fold {
		flags |= syntax.FoldCase
	}
	tree, err := syntax.Parse(re, flags)
	if err != nil {
		return nil, false, false
	}
	tree = tree.Simplify()
	subs := []*syntax.Regexp{tree}
	if tree.Op == syntax.OpConcat {
		subs = tree.Sub
	}
	if len(subs) < 2 || subs[0].Op != syntax.OpBeginText {
		return nil, false, false
	}
	subs = subs[1:]
	tail := subs[len(subs)-1]
	segment := false
	switch {
	case tail.Op == syntax.OpEndText:
		exact, subs = true, subs[:len(subs)-1]
	case isEndOrSlash(tail):
		segment, subs = true, subs[:len(subs)-1]
	}
	lits := []string{""}
	for _, s := range subs {
		alts, ok := literals(s)
		if !ok {
			return nil, false, false
		}
		var next []string
		for _, a := range lits {
			for _, b := range alts {
				next = append(next, a+b)
			}
		}
		if len(next) > 32 {
			return nil, false, false
		}
		lits = next
	}
	for _, l := range lits {
		if !strings.HasPrefix(l, "/") || !printable(l) {
			return nil, false, false
		}
		if segment {
			l = strings.TrimSuffix(l, "/")
			if l == "" {
				l = "/"
			}
		}
		if !slices.Contains(paths, l) {
			paths = append(paths, l)
		}
	}
	return paths, exact, true
}

// literals expands a regex without repetition into the strings it matches.
func literals(re *syntax.Regexp) ([]string, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		s := string(re.Rune)
		if re.Flags&syntax.FoldCase != 0 {
			s = strings.ToLower(s)
		}
		return []string{s}, true
	case syntax.OpEmptyMatch:
		return []string{""}, true
	case syntax.OpCapture:
		return literals(re.Sub[0])
	case syntax.OpCharClass:
		// A small class ([xy], or [Aa] under ~*) is a few literals.
		var out []string
		for i := 0; i+1 < len(re.Rune); i += 2 {
			for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
				s := strings.ToLower(string(r))
				if !slices.Contains(out, s) {
					out = append(out, s)
				}
				if len(out) > 8 {
					return nil, false
				}
			}
		}
		return out, len(out) > 0
	case syntax.OpConcat:
		out := []string{""}
		for _, s := range re.Sub {
			alts, ok := literals(s)
			if !ok {
				return nil, false
			}
			var next []string
			for _, a := range out {
				for _, b := range alts {
					next = append(next, a+b)
				}
			}
			if len(next) > 32 {
				return nil, false
			}
			out = next
		}
		return out, true
	case syntax.OpAlternate:
		var out []string
		for _, s := range re.Sub {
			alts, ok := literals(s)
			if !ok {
				return nil, false
			}
			out = append(out, alts...)
		}
		return out, len(out) <= 32
	}
	return nil, false
}

// isEndOrSlash reports ($|/) or (/|$), in any grouping.
func isEndOrSlash(re *syntax.Regexp) bool {
	if re.Op == syntax.OpCapture {
		return isEndOrSlash(re.Sub[0])
	}
	if re.Op != syntax.OpAlternate || len(re.Sub) != 2 {
		return false
	}
	end, slash := false, false
	for _, s := range re.Sub {
		switch {
		case s.Op == syntax.OpEndText:
			end = true
		case s.Op == syntax.OpLiteral && string(s.Rune) == "/":
			slash = true
		}
	}
	return end && slash
}

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
