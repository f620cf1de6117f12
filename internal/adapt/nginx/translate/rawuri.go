package translate

import (
	"regexp/syntax"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// nginx's idiom for "pass the path as the client sent it" (Gitea's
// sub-path recipe, among others):
//
//	location /app/ {
//	    rewrite ^ $request_uri;
//	    rewrite ^/app(/.*) $1 break;
//	    proxy_pass http://backend$uri;
//	}
//
// The first rewrite makes $uri the client's escaped path with its query,
// so the second strips the prefix without decoding %2F and friends, and
// proxy_pass sends the result, query included. sturdy's prefix rewrite
// replaces characters of the escaped path and keeps the query: the same.

// isRawURIRewrite is `rewrite ^ $request_uri;`.
func isRawURIRewrite(d *nginx.Directive) bool {
	return len(d.Args) == 2 && d.Arg(0) == "^" && d.Arg(1) == "$request_uri"
}

// rawURIRewrite translates the rewrite after `rewrite ^ $request_uri;`
// into a prefix rewrite of the location's prefix; false when it is not
// of the form `rewrite ^PREFIX(.*) REPLACEMENT$1 break;` over every path
// of the location.
func rawURIRewrite(c *locCtx, l *nginx.Location, d *nginx.Directive) (*config.Rewrite, bool) {
	if l.ProxyPass == nil || c.match == nil || c.match.StartsWith == "" || d.Arg(2) != "break" || len(d.Args) != 3 {
		return nil, false
	}
	lit, needSlash, ok := prefixCapture(d.Arg(0))
	if !ok {
		return nil, false
	}
	repl, ok := strings.CutSuffix(d.Arg(1), "$1")
	if !ok {
		repl, ok = strings.CutSuffix(d.Arg(1), "${1}")
	}
	if !ok || strings.ContainsAny(repl, "$?") {
		return nil, false
	}
	// The regex must match every path of the location, capturing the rest.
	s := c.match.StartsWith
	if !strings.HasPrefix(s, lit) || needSlash && !strings.HasPrefix(s, lit+"/") {
		return nil, false
	}
	prefix := repl + s[len(lit):]
	if !strings.HasPrefix(prefix, "/") {
		return nil, false
	}
	return &config.Rewrite{Prefix: &prefix}, true
}

// prefixCapture reads `^LITERAL(.*)` or `^LITERAL(/.*)` (a `$` at the end
// allowed): the literal, and whether the capture must start with a slash.
func prefixCapture(re string) (lit string, needSlash, ok bool) {
	r, err := syntax.Parse(re, syntax.Perl)
	if err != nil {
		return "", false, false
	}
	r = r.Simplify()
	if r.Op != syntax.OpConcat || len(r.Sub) < 2 || r.Sub[0].Op != syntax.OpBeginText && r.Sub[0].Op != syntax.OpBeginLine {
		return "", false, false
	}
	subs := r.Sub[1:]
	if n := len(subs); n > 0 && (subs[n-1].Op == syntax.OpEndText || subs[n-1].Op == syntax.OpEndLine) {
		subs = subs[:n-1]
	}
	if len(subs) == 0 || subs[len(subs)-1].Op != syntax.OpCapture || subs[len(subs)-1].Cap != 1 {
		return "", false, false
	}
	for _, s := range subs[:len(subs)-1] {
		if s.Op != syntax.OpLiteral || s.Flags&syntax.FoldCase != 0 {
			return "", false, false
		}
		lit += string(s.Rune)
	}
	capt := subs[len(subs)-1].Sub[0]
	if capt.Op == syntax.OpConcat && len(capt.Sub) == 2 && capt.Sub[0].Op == syntax.OpLiteral && string(capt.Sub[0].Rune) == "/" {
		needSlash, capt = true, capt.Sub[1]
	}
	if capt.Op != syntax.OpStar || capt.Sub[0].Op != syntax.OpAnyCharNotNL && capt.Sub[0].Op != syntax.OpAnyChar {
		return "", false, false
	}
	return lit, needSlash, true
}
