package translate

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// Server-level allow-lists, the hardening every guide recommends:
//
//	if ($host !~ ^(example.com|www.example.com)$) { return 444; }
//	if ($request_method !~ ^(GET|HEAD|POST)$) { return 405; }
//
// nginx runs them before choosing a location. The host list becomes the
// hosts of the server's routes plus a route for the other hosts with the
// block's answer (respond.close for 444); the method list becomes every
// route's methods, with methods_status the block's status. Both are read
// so that sturdy lets through at most what nginx let through: a host or
// method the regex cannot be shown to match is refused.

// allowIf reads `if ($var !~ REGEX)` or `!~*`: the variable and the
// compiled regex; ok is false for any other condition.
func allowIf(d *nginx.Directive) (v string, re *regexp.Regexp, src string, ok bool) {
	s := strings.TrimSpace(strings.Join(d.Args, " "))
	if !strings.HasPrefix(s, "(") || !strings.HasSuffix(s, ")") {
		return "", nil, "", false
	}
	f := strings.Fields(s[1 : len(s)-1])
	if len(f) != 3 || f[1] != "!~" && f[1] != "!~*" {
		return "", nil, "", false
	}
	src = f[2]
	if len(src) >= 2 && (src[0] == '"' || src[0] == '\'') && src[len(src)-1] == src[0] {
		src = src[1 : len(src)-1]
	}
	re, ok = compileRegex(src, f[1] == "!~*")
	if !ok {
		return "", nil, "", false
	}
	return f[0], re, src, true
}

// allowReturn is the block's only directive, a return that refuses:
// its answer, nil when the block does anything else.
func allowReturn(sc *nginx.Scope, d *nginx.Directive) *config.Respond {
	if len(d.Children) != 1 || d.Children[0].Name != "return" {
		return nil
	}
	code, text, hasText, why := fixedReturn(d.Children[0])
	if why != "" || code < 400 {
		return nil
	}
	return fixedRespond(sc, code, text, hasText)
}

// methodAllowList reads a method allow-list: the methods sturdy lets
// through (those of config.LimitExceptMethods the regex matches) and the
// block's answer, whose status is the methods_status. ok is false when
// the block is not one.
func methodAllowList(sc *nginx.Scope, d *nginx.Directive) (ms []string, rs *config.Respond, ok bool) {
	v, re, _, ok := allowIf(d)
	if !ok || v != "$request_method" {
		return nil, nil, false
	}
	rs = allowReturn(sc, d)
	if rs == nil || rs.Status != 403 && rs.Status != 405 && rs.Status != 444 || rs.Body != errorPage(rs.Status) && !rs.Close {
		return nil, nil, false
	}
	for _, m := range config.LimitExceptMethods {
		if re.MatchString(m) {
			ms = append(ms, m)
		}
	}
	if len(ms) == 0 {
		return nil, nil, false
	}
	return ms, rs, true
}

// hostAllow is a server's host allow-list.
type hostAllow struct {
	dir     *nginx.Directive
	respond *config.Respond
	// allowed are the hosts the routes keep; the others get respond.
	re      *regexp.Regexp
	literal []string // the regex's whole language, nil when it is not finite
}

// hostAllowList reads `if ($host !~ REGEX) { return CODE; }`.
func hostAllowList(sc *nginx.Scope, d *nginx.Directive) *hostAllow {
	v, re, src, ok := allowIf(d)
	if !ok || v != "$host" {
		return nil
	}
	rs := allowReturn(sc, d)
	if rs == nil {
		return nil
	}
	lits, _ := regexHosts(src)
	return &hostAllow{dir: d, respond: rs, re: re, literal: lits}
}

// regexHosts lists the host names a regex matches when it is anchored at
// both ends and its language is small and finite (alternatives, optional
// parts, small classes). An unescaped "." is read as a dot only: the
// hosts listed are among those nginx let through, never more.
func regexHosts(src string) ([]string, bool) {
	re, err := syntax.Parse(src, syntax.Perl)
	if err != nil {
		return nil, false
	}
	re = re.Simplify()
	if re.Op != syntax.OpConcat || len(re.Sub) < 3 || !isBegin(re.Sub[0]) || !isEnd(re.Sub[len(re.Sub)-1]) {
		return nil, false
	}
	body := &syntax.Regexp{Op: syntax.OpConcat, Sub: re.Sub[1 : len(re.Sub)-1]}
	out, ok := language(body, 64)
	if !ok {
		return nil, false
	}
	var hosts []string
	for _, h := range out {
		h = strings.ToLower(h)
		if validHost(h) && !strings.HasPrefix(h, "*.") {
			hosts = appendOnce(hosts, h)
		}
	}
	return hosts, true
}

func isBegin(r *syntax.Regexp) bool { return r.Op == syntax.OpBeginText || r.Op == syntax.OpBeginLine }
func isEnd(r *syntax.Regexp) bool   { return r.Op == syntax.OpEndText || r.Op == syntax.OpEndLine }

// language enumerates the strings r matches, at most limit of them.
func language(r *syntax.Regexp, limit int) ([]string, bool) {
	switch r.Op {
	case syntax.OpEmptyMatch:
		return []string{""}, true
	case syntax.OpLiteral:
		return []string{string(r.Rune)}, true
	case syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		return []string{"."}, true
	case syntax.OpCharClass:
		var out []string
		for i := 0; i+1 < len(r.Rune); i += 2 {
			for c := r.Rune[i]; c <= r.Rune[i+1]; c++ {
				if len(out) >= limit {
					return nil, false
				}
				out = append(out, string(c))
			}
		}
		return out, true
	case syntax.OpCapture:
		return language(r.Sub[0], limit)
	case syntax.OpQuest:
		sub, ok := language(r.Sub[0], limit)
		return append([]string{""}, sub...), ok && len(sub) < limit
	case syntax.OpAlternate:
		var out []string
		for _, s := range r.Sub {
			sub, ok := language(s, limit)
			if !ok || len(out)+len(sub) > limit {
				return nil, false
			}
			out = append(out, sub...)
		}
		return out, true
	case syntax.OpConcat:
		out := []string{""}
		for _, s := range r.Sub {
			sub, ok := language(s, limit)
			if !ok || len(out)*len(sub) > limit {
				return nil, false
			}
			var next []string
			for _, a := range out {
				for _, b := range sub {
					next = append(next, a+b)
				}
			}
			out = next
		}
		return out, true
	}
	return nil, false
}

// serverAllowLists finds the server's allow-lists before its other if
// blocks are read; the ifs they stand for are covered.
func (t *translator) serverAllowLists(sp *serverPlan) {
	sc := sp.srv.Scope
	for _, d := range sp.srv.Local("if") {
		if ms, rs, ok := methodAllowList(sc, d); ok && sp.methodIf == nil {
			sp.methodIf, sp.methods, sp.methodsAnswer = d, ms, rs
			t.use(d)
			t.useTree(d)
			continue
		}
		if ha := hostAllowList(sc, d); ha != nil && sp.hostAllow == nil {
			sp.hostAllow = ha
			t.use(d)
			t.useTree(d)
		}
	}
}

// allowListIf reports an if an allow-list stands for.
func (sp *serverPlan) allowListIf(d *nginx.Directive) bool {
	return d == sp.methodIf || sp.hostAllow != nil && sp.hostAllow.dir == d
}

// methodGuard adds the server's method allow-list to c, for a plan whose
// requests nginx checked it for: all of them, unless the plan is the
// answer of an if that nginx ran before the method check (before: that
// if).
func (sp *serverPlan) methodGuard(c *locCtx, before *nginx.Directive) {
	if sp.methodIf == nil || before != nil && before.Line < sp.methodIf.Line && before.File == sp.methodIf.File {
		return
	}
	o := &c.guard
	if len(o.methods) > 0 {
		o.methods = slices.DeleteFunc(slices.Clone(o.methods), func(m string) bool { return !slices.Contains(sp.methods, m) })
		if len(o.methods) == 0 {
			c.protect.add(NeedMethodRules, "no method passes both the server's if %s (%s) and limit_except", strings.Join(sp.methodIf.Args, " "), sp.methodIf.Pos())
		}
	} else {
		o.methods = slices.Clone(sp.methods)
	}
	o.methodsStatus = sp.methodsAnswer.Status
	o.kept.add("", "nginx answered %d to methods other than %s (if %s, %s)", o.methodsStatus, strings.Join(sp.methods, " "), strings.Join(sp.methodIf.Args, " "), sp.methodIf.Pos())
	if slices.Contains(o.methods, "GET") && !slices.Contains(sp.methods, "HEAD") {
		// methods lets HEAD through with GET, as limit_except; this
		// list did not: a companion route answers HEAD as the if did.
		c.methodAnswers = append(c.methodAnswers, methodAnswer{method: "HEAD", respond: sp.methodsAnswer, dir: sp.methodIf})
	}
}

// splitAllowedHosts narrows sp's variants to the hosts the allow-list
// lets through and returns the plan of the route that answers the other
// hosts, nil when the server has no host allow-list.
func (t *translator) splitAllowedHosts(sp *serverPlan) *locCtx {
	ha := sp.hostAllow
	if ha == nil {
		return nil
	}
	d := ha.dir
	var kept, refused []variant
	for _, v := range sp.variants {
		var allowed []string
		if v.hosts == nil {
			// The default server: every host no other server names.
			if ha.literal == nil {
				sp.differs.add(NeedServerNames, "the server's if %s (%s) let through every host its regex matches; sturdy lists hosts, and lets through only the server's own names the regex matches", strings.Join(d.Args, " "), d.Pos())
				allowed = slices.DeleteFunc(slices.Clone(sp.srv.Names), func(h string) bool { return !validHost(h) || strings.Contains(h, "*") || !ha.re.MatchString(h) })
			} else {
				allowed = slices.Clone(ha.literal)
			}
			allowed = slices.DeleteFunc(allowed, func(h string) bool { return t.namedElsewhere(sp, v.listeners, h) })
			refused = append(refused, variant{listeners: v.listeners, tag: "other-hosts"})
		} else {
			var out []string
			for _, h := range v.hosts {
				switch {
				case strings.HasPrefix(h, "*."):
					sp.differs.add(NeedServerNames, "the server's if %s (%s) let through the names of %s its regex matches; sturdy cannot tell which, and answers them all as the if did", strings.Join(d.Args, " "), d.Pos(), h)
					out = append(out, h)
				case ha.re.MatchString(h):
					allowed = append(allowed, h)
				default:
					out = append(out, h)
				}
			}
			if len(out) > 0 {
				refused = append(refused, variant{listeners: v.listeners, hosts: out, tag: "other-hosts"})
			}
		}
		if len(allowed) > 0 {
			v.hosts = allowed
			kept = append(kept, v)
		}
	}
	sp.variants = kept
	if len(refused) == 0 {
		return nil
	}
	psp := *sp
	psp.variants = refused
	c := &locCtx{sp: &psp, paths: []string{"/"}, match: &config.PathMatch{StartsWith: "/"}}
	c.r.respond = ha.respond
	what := "closed the connection"
	if !ha.respond.Close {
		what = fmt.Sprintf("answered %d", ha.respond.Status)
	}
	c.r.comments = []string{fmt.Sprintf("%s: if %s { %s } (%s), before any location: nginx %s for every other host", sp.label, strings.Join(d.Args, " "), strings.TrimSuffix(d.Children[0].String(), ";"), d.Pos(), what)}
	sp.methodGuard(c, d)
	return c
}

// namedElsewhere reports a host another server names on one of the
// listeners: nginx sent it there, not to the default server.
func (t *translator) namedElsewhere(sp *serverPlan, listeners []string, h string) bool {
	for _, srv := range t.site.Servers {
		if srv == sp.srv || !slices.Contains(srv.Names, h) {
			continue
		}
		for _, l := range srv.Listens {
			if ln := t.listenerOf[l.Addr]; ln != nil && slices.Contains(listeners, ln.name) {
				return true
			}
		}
	}
	return false
}
