package translate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/nginx"
)

// Access rules. sturdy has no per-route access control yet, so a location
// nginx restricts (allow lists, deny all, auth_basic, auth_request,
// limit_except, internal, if ... return 403) is never opened: it becomes a
// refusal route, whose only host refuses connections, so that it answers
// with its sorry page (503) and never reaches a backend. Deny lists (deny
// ADDR without deny all) become the edge deny list, which applies to every
// route: narrower than nginx, never wider.

// refusalAddr is the refusal pool's only host: connecting to port 0 is
// refused at once, so the route answers with its sorry page.
const refusalAddr = "127.0.0.1:0"

// accessRules returns the allow and deny directives in effect at sc, in
// file order: nginx's access module inherits them as one list, replaced as
// a whole by any block that has either.
func accessRules(sc *nginx.Scope) []*nginx.Directive {
	for c := sc; c != nil; c = c.Parent {
		var out []*nginx.Directive
		for _, d := range c.Local("allow") {
			out = append(out, d)
		}
		for _, d := range c.Local("deny") {
			out = append(out, d)
		}
		if len(out) > 0 {
			slices.SortFunc(out, func(a, b *nginx.Directive) int {
				if a.File != b.File {
					return strings.Compare(a.File, b.File)
				}
				return a.Line - b.Line
			})
			return out
		}
	}
	return nil
}

func isAll(a string) bool { return a == "all" || a == "0.0.0.0/0" || a == "::/0" }

// protections returns how nginx restricts access at sc: what is in effect
// there (inherited), and, for locations, what the block itself holds.
func (t *translator) protections(sc *nginx.Scope, location bool) notes {
	var ns notes
	rules := accessRules(sc)
	if slices.ContainsFunc(rules, func(d *nginx.Directive) bool { return d.Name == "deny" && isAll(d.Arg(0)) }) {
		var allowed []string
		for _, d := range rules {
			t.use(d)
			if d.Name == "allow" {
				allowed = append(allowed, d.Arg(0))
			}
		}
		if len(allowed) > 0 {
			ns.add(NeedAccessRules, "nginx allowed only %s (%s)", strings.Join(allowed, ", "), rules[0].Pos())
		} else {
			ns.add(NeedAccessRules, "nginx denied everyone (%s)", rules[0].Pos())
		}
	}
	if d := sc.Get1("auth_basic"); d != nil && d.Arg(0) != "off" {
		t.use(d)
		if f := sc.Get1("auth_basic_user_file"); f != nil {
			t.use(f)
		}
		ns.add(NeedBasicAuth, "nginx asked for a password (auth_basic, %s)", d.Pos())
	}
	if d := sc.Get1("auth_request"); d != nil && d.Arg(0) != "off" {
		t.use(d)
		for _, s := range sc.Get("auth_request_set") {
			t.use(s)
		}
		ns.add(NeedAuthRequest, "nginx asked %s whether to let each request in (auth_request, %s)", d.Arg(0), d.Pos())
	}
	for _, name := range []string{"access_by_lua_block", "access_by_lua", "access_by_lua_file"} {
		if d := sc.Get1(name); d != nil {
			t.use(d)
			ns.add(NeedLua, "nginx ran Lua to decide access (%s, %s)", d.Name, d.Pos())
		}
	}
	if len(ns) > 0 {
		if d := sc.Get1("satisfy"); d != nil {
			t.use(d)
		}
	}
	if !location {
		return ns
	}
	for _, d := range sc.Local("limit_except") {
		t.use(d)
		t.useTree(d)
		ns.add(NeedMethodRules, "nginx refused methods other than %s (limit_except, %s)", strings.Join(d.Args, " "), d.Pos())
	}
	for _, d := range sc.Local("if") {
		if code := ifRefuses(d); code != "" {
			t.use(d)
			t.useTree(d)
			ns.add(NeedConditions, "nginx answered %s when %s (%s)", code, strings.Join(d.Args, " "), d.Pos())
		}
	}
	return ns
}

// edge carries nginx's deny lists (deny ADDR without deny all) over to
// the edge deny list, which sturdy applies to every route.
func (t *translator) edge() {
	scopes := []*nginx.Scope{}
	if t.site.HTTP != nil {
		scopes = append(scopes, t.site.HTTP)
	}
	for _, srv := range t.site.Servers {
		scopes = append(scopes, srv.Scope)
		for _, l := range srv.Locations {
			scopes = append(scopes, l.Scope)
		}
	}
	for _, sc := range scopes {
		for _, d := range sc.Local("deny") {
			a := d.Arg(0)
			if isAll(a) {
				continue // an allow list or deny all: a protection (see protections)
			}
			if _, err := config.ParsePrefix(a); err != nil {
				t.skip(d, "not an address or CIDR sturdy can deny")
				continue
			}
			t.use(d)
			if !slices.Contains(t.deny, a) {
				t.deny = append(t.deny, a)
			}
			if sc != t.site.HTTP {
				t.denyNotes = appendOnce(t.denyNotes, fmt.Sprintf("%s: nginx denied it only at %s; sturdy denies it everywhere", a, d.Pos()))
			}
		}
		for _, d := range sc.Local("allow") {
			t.use(d)
		}
	}
}
