package translate

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
)

// The older idiom for try_files (Jenkins' /userContent):
//
//	location /userContent {
//	    root /var/lib/ci/;
//	    if (!-f $request_filename) { rewrite (.*) /$1 last; break; }
//	}
//
// serves the file when there is one and hands the rest, rewritten, to the
// location the new URI finds, which proxies. It is try_files [$uri, @pool]
// with that location's pool.

// fileTest translates a location whose only if is such a file test. It
// reports whether it did (c then holds the plan, or its blockers).
func (t *translator) fileTest(c *locCtx, l *nginx.Location, depth int) bool {
	ifs := l.Local("if")
	if depth > 0 || len(ifs) != 1 || l.Get1("try_files") != nil || len(l.Local("rewrite")) > 0 || len(l.Local("return")) > 0 {
		return false
	}
	d := ifs[0]
	cond := strings.NewReplacer("(", "", ")", "", " ", "").Replace(strings.Join(d.Args, " "))
	if cond != "!-f$request_filename" {
		return false
	}
	var rw *nginx.Directive
	for _, x := range d.Children {
		switch {
		case x.Name == "rewrite" && rw == nil && len(x.Args) == 3 && x.Arg(2) == "last":
			rw = x
		case x.Name == "break" && rw != nil:
		default:
			return false
		}
	}
	if rw == nil {
		return false
	}
	re, err := regexp.Compile(rw.Arg(0))
	if err != nil || !rewritesEverything(rw) && !re.MatchString(l.Path) {
		return false
	}
	// The URI nginx looked up again, for one path of the location.
	sample := strings.TrimSuffix(l.Path, "/") + "/x"
	uri := re.ReplaceAllString(sample, nginxToGoRepl(rw.Arg(1)))
	if strings.ContainsAny(uri, "$?") {
		return false
	}
	target, sure := t.locate(c.sp.srv, uri)
	if !sure || target == nil || target == l || target.ProxyPass == nil || target.Target == nil || target.Target.URI != "" || len(target.Local("rewrite")) > 0 || len(target.Local("if")) > 0 {
		return false
	}
	t.use(d)
	t.useTree(d)
	c.content = l
	if !t.staticContent(c, l, l.Scope, nil, depth) {
		return true
	}
	t.content(c, target, depth+1)
	if c.pass == nil {
		if len(c.blockers) == 0 {
			c.blockers.add(NeedStatic, "if (!-f $request_filename) (%s) hands missing files to location %s, which does not proxy", d.Pos(), locationLabel(target))
		}
		return true
	}
	c.static.tryFiles = []string{"$uri", "@pool"}
	c.r.comments = append(c.r.comments, fmt.Sprintf("if (!-f $request_filename) { %s } (%s): files when they exist, else location %s (%s), as try_files $uri @pool", strings.TrimSuffix(rw.String(), ";"), d.Pos(), locationLabel(target), target.Dir.Pos()))
	if uri != sample {
		// nginx proxied the rewritten URI (Jenkins' /$1 doubles the
		// slash to leave the location); sturdy forwards the path it
		// judged, which it never rewrites into a path other routes own.
		c.differs.add(NeedRewrites, "nginx sent the backend the rewritten URI (%s for %s); sturdy sends the request's path, normalised", uri, sample)
	}
	return true
}

// capture is compiled on first use: only import translates, and every
// sturdy command links this package.
var capture = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\$([0-9])`) })

// nginxToGoRepl turns a rewrite replacement's $1 into Go's ${1}.
func nginxToGoRepl(s string) string { return capture().ReplaceAllString(s, `$${$1}`) }
