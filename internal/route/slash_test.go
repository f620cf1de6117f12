package route

import (
	"net/http"
	"net/url"
	"regexp"
	"testing"
)

func slashEntry(name string, kind PathKind, value string, hosts ...string) *Entry[string] {
	e := &Entry[string]{Hosts: hosts, Match: Match{Path: PathMatch{Kind: kind, Value: value}}, SlashRedirect: true, Value: name}
	if kind == Regex {
		e.Match.Path.Re = regexp.MustCompile(value)
	}
	return e
}

// A prefix route ending in "/" takes its path without the slash as a
// redirect, unless a route matches that path more closely: an exact
// path, a regex, a prefix as long; or the route turns it off.
func TestSlashRedirect(t *testing.T) {
	off := slashEntry("off", Prefix, "/off/")
	off.SlashRedirect = false
	withMethod := slashEntry("posts", Prefix, "/posts/")
	withMethod.Match.Methods = []string{"POST"}
	tb := New([]*Entry[string]{
		slashEntry("admin", Prefix, "/admin/"),
		slashEntry("nginx-style", StartsWith, "/static/"),
		slashEntry("exact", Exact, "/docs"), slashEntry("docs", Prefix, "/docs/"),
		slashEntry("regex", Regex, "^/api$"), slashEntry("api", Prefix, "/api/"),
		slashEntry("shop-prefix", Prefix, "/shop"), slashEntry("shop", Prefix, "/shop/"),
		off, withMethod,
		slashEntry("host-admin", Prefix, "/panel/", "a.test"), slashEntry("host-root", Prefix, "/", "a.test"),
		slashEntry("any-panel", Exact, "/panel"),
		slashEntry("root", Prefix, "/"),
	})
	for _, c := range []struct {
		host, method, path, want string
		slash                    bool
	}{
		{"x.test", "GET", "/admin", "admin", true},
		{"x.test", "GET", "/admin/", "admin", false},
		{"x.test", "GET", "/adminx", "root", false},
		{"x.test", "GET", "/static", "nginx-style", true},
		{"x.test", "GET", "/docs", "exact", false},
		{"x.test", "GET", "/api", "regex", false},
		{"x.test", "GET", "/shop", "shop-prefix", false},
		{"x.test", "GET", "/off", "root", false},
		{"x.test", "GET", "/posts", "root", false},
		{"x.test", "POST", "/posts", "posts", true},
		{"a.test", "GET", "/panel", "host-admin", true},
		{"x.test", "GET", "/panel", "any-panel", false},
		{"x.test", "GET", "/", "root", false},
	} {
		r := &http.Request{Method: c.method, Host: c.host, URL: &url.URL{Path: c.path}}
		e, slash, ok := tb.Resolve(r)
		if !ok || e.Value != c.want || slash != c.slash {
			t.Errorf("%s %s%s: route %v, redirect %v; want %s, %v", c.method, c.host, c.path, e.Value, slash, c.want, c.slash)
		}
		// MatchRequest never redirects: what rematching and tools see.
		if m, _ := tb.MatchRequest(r); c.slash && m == e {
			t.Errorf("%s %s%s: MatchRequest gave the redirecting route", c.method, c.host, c.path)
		}
	}
}
