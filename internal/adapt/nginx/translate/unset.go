package translate

import (
	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
)

// A `set $v ...` anywhere declares $v for the whole configuration; where
// no set on a request's way gave it a value, nginx uses the empty string
// (Jitsi Meet's `proxy_pass http://127.0.0.1:5280/xmpp-websocket?prefix=$prefix&$args`
// in the location that serves the main domain, while the locations of
// sub-paths set $prefix first).

// settable are nginx's own variables that set may change: their value is
// not empty where no set ran.
var settable = map[string]bool{"limit_rate": true, "args": true, "uri": true, "query_string": true}

// unsetHere reports whether $name is declared only by set directives off
// the way of this location's requests: in other locations or servers, not
// in the location that answers, the one requests match, their servers,
// nor the if blocks inside them.
func (c *locCtx) unsetHere(name string) bool {
	if settable[name] || c.sp == nil || c.sp.srv == nil {
		return false
	}
	var top *nginx.Scope
	for s := c.sp.srv.Scope; s != nil; s = s.Parent {
		if s.Dir != nil {
			top = s
		}
	}
	if top == nil {
		return false
	}
	declared := false
	nginx.Walk(top.Dir.Children, func(d *nginx.Directive) bool {
		declared = declared || d.Name == "set" && d.Arg(0) == "$"+name
		return !declared
	})
	if !declared {
		return false
	}
	for _, l := range []*nginx.Location{c.loc, c.content} {
		if l == nil {
			continue
		}
		for s := l.Scope; s != nil; s = s.Parent {
			if setsIn(s.Local("set"), name) {
				return false
			}
			for _, d := range s.Local("if") {
				found := false
				nginx.Walk(d.Children, func(d *nginx.Directive) bool {
					found = found || d.Name == "set" && d.Arg(0) == "$"+name
					return !found
				})
				if found {
					return false
				}
			}
		}
	}
	return true
}

func setsIn(ds []*nginx.Directive, name string) bool {
	for _, d := range ds {
		if d.Arg(0) == "$"+name {
			return true
		}
	}
	return false
}
