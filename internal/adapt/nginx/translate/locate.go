package translate

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
)

// Which location nginx chooses for a URI, worked out from the config: for
// one URI (locate), and for every URI with a given start (locateAll), as
// try_files fallbacks like /index.php$request_uri need.

// uriTail splits a URI that ends with $request_uri or $uri (both start
// with /) into its literal start; tail is false for any other URI.
func uriTail(uri string) (lit string, tail bool) {
	for _, v := range []string{"$request_uri", "$uri"} {
		if l, ok := strings.CutSuffix(uri, v); ok && !strings.Contains(l, "$") {
			return l, true
		}
	}
	return "", false
}

// locateAll finds the location nginx chooses for every URI that starts
// with prefix: sure is false when some of them could go elsewhere (an
// exact or longer prefix location below prefix, or a regex that matches
// some of them and not all).
func (t *translator) locateAll(srv *nginx.Server, prefix string) (loc *nginx.Location, sure bool) {
	var best *nginx.Location
	for _, l := range srv.Locations {
		switch {
		case l.Named || isRegex(l):
		case strings.HasPrefix(l.Path, prefix) && (l.Modifier == "=" || len(l.Path) > len(prefix)):
			return nil, false
		case l.Modifier != "=" && strings.HasPrefix(prefix, l.Path) && (best == nil || len(l.Path) > len(best.Path)):
			best = l
		}
	}
	if best != nil && best.Modifier == "^~" {
		return best, true
	}
	for _, l := range srv.Locations {
		if !isRegex(l) {
			continue
		}
		if p := l.Scope.Parent; p != srv.Scope && (best == nil || p != best.Scope) {
			continue
		}
		re, ok := compileRegex(l.Path, l.Modifier == "~*")
		if !ok {
			return nil, false
		}
		switch {
		case matchesEvery(re, prefix):
			return l, true
		case !mayMatchPrefixed(l.Path, l.Modifier == "~*", prefix):
		default:
			return nil, false
		}
	}
	return best, true
}

// matchesEvery reports that re matches every string that starts with
// prefix: it finds a match inside prefix whatever comes next (a word
// character, a separator, or nothing the regex could consume).
func matchesEvery(re *regexp.Regexp, prefix string) bool {
	for _, next := range []string{"\x00", "a", "/", "."} {
		m := re.FindStringIndex(prefix + next)
		if m == nil || m[1] > len(prefix) {
			return false
		}
	}
	return true
}

// mayMatchPrefixed reports whether a regex anchored at ^ could match a
// string that starts with prefix; true whenever that is not plain from
// its start (unanchored, or a repetition before prefix ends).
func mayMatchPrefixed(expr string, fold bool, prefix string) bool {
	if fold {
		expr = "(?i)" + expr
	}
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return true
	}
	re = re.Simplify()
	seq := []*syntax.Regexp{re}
	if re.Op == syntax.OpConcat {
		seq = re.Sub
	}
	if len(seq) == 0 || seq[0].Op != syntax.OpBeginText && seq[0].Op != syntax.OpBeginLine {
		return true
	}
	return prefixFits(seq[1:], prefix)
}

// prefixFits reports whether the sequence of regex nodes could match a
// string starting with p.
func prefixFits(seq []*syntax.Regexp, p string) bool {
	if p == "" || len(seq) == 0 {
		return true // the rest is free: nginx's match need not reach the end
	}
	n, rest := seq[0], seq[1:]
	then := func(subs ...*syntax.Regexp) []*syntax.Regexp {
		return append(append([]*syntax.Regexp{}, subs...), rest...)
	}
	c, size := utf8.DecodeRuneInString(p)
	switch n.Op {
	case syntax.OpLiteral:
		for _, r := range n.Rune {
			if p == "" {
				return true
			}
			c, size := utf8.DecodeRuneInString(p)
			if r != c && !(n.Flags&syntax.FoldCase != 0 && unicode.ToLower(r) == unicode.ToLower(c)) {
				return false
			}
			p = p[size:]
		}
		return prefixFits(rest, p)
	case syntax.OpConcat:
		return prefixFits(then(n.Sub...), p)
	case syntax.OpCapture:
		return prefixFits(then(n.Sub[0]), p)
	case syntax.OpAlternate:
		for _, s := range n.Sub {
			if prefixFits(then(s), p) {
				return true
			}
		}
		return false
	case syntax.OpCharClass:
		for i := 0; i+1 < len(n.Rune); i += 2 {
			if c >= n.Rune[i] && c <= n.Rune[i+1] {
				return prefixFits(rest, p[size:])
			}
		}
		return false
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return prefixFits(rest, p[size:])
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpBeginText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return prefixFits(rest, p)
	case syntax.OpEndLine, syntax.OpEndText:
		return false
	case syntax.OpPlus, syntax.OpRepeat:
		if n.Op == syntax.OpPlus || n.Min >= 1 {
			// At least once: p's next character must fit one.
			return prefixFits([]*syntax.Regexp{n.Sub[0]}, p[:size])
		}
	}
	return true // repetitions: not worked out, so maybe
}

// locate finds the location nginx chooses for uri in srv: exact, then the
// longest prefix unless ^~, then the first regex that matches. sure is
// false when a regex that Go cannot evaluate could have matched.
func (t *translator) locate(srv *nginx.Server, uri string) (loc *nginx.Location, sure bool) {
	var best *nginx.Location
	for _, l := range srv.Locations {
		switch {
		case l.Named || l.Modifier == "~" || l.Modifier == "~*":
		case l.Modifier == "=":
			if l.Path == uri {
				return l, true
			}
		case strings.HasPrefix(uri, l.Path) && (best == nil || len(l.Path) > len(best.Path)):
			best = l
		}
	}
	if best != nil && best.Modifier == "^~" {
		return best, true
	}
	for _, l := range srv.Locations {
		if l.Modifier != "~" && l.Modifier != "~*" {
			continue
		}
		if p := l.Scope.Parent; p != srv.Scope && (best == nil || p != best.Scope) {
			continue
		}
		m, ok := compileRegex(l.Path, l.Modifier == "~*")
		if !ok {
			return nil, false
		}
		if m.MatchString(uri) {
			return l, true
		}
	}
	return best, true
}
