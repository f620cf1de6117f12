package server

import (
	"slices"
	"strings"
	"testing"
)

const matchConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  - { name: exact, match: { path: { exact: /login } }, pool: web, response_headers: { set: { X-Route: exact } } }
  - { name: php, match: { path: { regex: '\.php$' } }, pool: web, response_headers: { set: { X-Route: php } } }
  - { name: static, match: { path: { starts_with: /static/, before_regex: true } }, pool: web, response_headers: { set: { X-Route: static } } }
  - { name: img, match: { path: { regex: '\.(png|jpg)$', case_insensitive: true } }, pool: web, response_headers: { set: { X-Route: img } } }
  - { name: post, match: { path: { prefix: /api }, methods: [POST] }, pool: web, response_headers: { set: { X-Route: post } } }
  - { name: canary, match: { path: { prefix: /api }, headers: [ { name: X-Canary, exact: "1" } ] }, pool: web, response_headers: { set: { X-Route: canary } } }
  - { name: debug, match: { path: { prefix: /api }, query: [ { name: debug, present: true } ] }, pool: web, response_headers: { set: { X-Route: debug } } }
  - { name: api, path: /api, pool: web, response_headers: { set: { X-Route: api } } }
  - { name: site, default: true, pool: web, response_headers: { set: { X-Route: site } } }
pools:
  - { name: web, hosts: [ { addr: "{{b}}" } ] }
`

// One precedence, end to end: exact path, the longest prefix marked
// before_regex, regexes, then prefixes; among equal paths a method beats
// headers, headers beat query parameters.
func TestRouteMatchingPrecedence(t *testing.T) {
	t.Parallel()
	b := recordingBackend(t, "127.0.0.1", "b")
	_, base, _ := startSturdy(t, parseConfig(t, matchConfig, map[string]string{"b": b.addr()}))
	c := clientFrom("127.0.0.1")
	cases := []struct {
		method, path string
		hdr          []string
		want         string
	}{
		{"GET", "/login", nil, "exact"},
		{"GET", "/login/", nil, "site"},
		{"GET", "/login.php", nil, "php"},
		{"GET", "/api.php", nil, "php"},
		{"GET", "/static/logo.png", nil, "static"},
		{"GET", "/images/LOGO.PNG", nil, "img"},
		{"GET", "/api/users", nil, "api"},
		{"GET", "/apix", nil, "site"},
		{"POST", "/api/users", []string{"X-Canary", "1"}, "post"},
		{"GET", "/api/users", []string{"X-Canary", "1"}, "canary"},
		{"GET", "/api/users?debug", nil, "debug"},
		{"GET", "/api/users?debug=1", []string{"X-Canary", "1"}, "canary"},
		{"GET", "/api/users", []string{"X-Canary", "2"}, "api"},
	}
	for _, tc := range cases {
		resp, _ := do(t, c, tc.method, base+tc.path, nil, tc.hdr...)
		if got := resp.Header.Get("X-Route"); got != tc.want || resp.StatusCode != 200 {
			t.Errorf("%s %s %v: route %q (status %d), want %q", tc.method, tc.path, tc.hdr, got, resp.StatusCode, tc.want)
		}
	}
}

const redirectConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  - { name: to-https, hosts: [old.example], redirect: { scheme: https, status: 301 } }
  - { name: moved, path: /old/, redirect: { prefix: /new/, status: 308 } }
  - { name: docs, path: /docs, redirect: { prefix: /manual } }
  - { name: user, match: { path: { regex: '^/u/(?P<name>[a-z]+)$' } }, redirect: { url: "https://$host/users/${name}$is_args$args", status: 303 } }
  - { name: elsewhere, path: /port, redirect: { host: other.example, port: 8443, path: /p, status: 307 } }
  - { name: site, default: true, pool: web }
pools:
  - { name: web, hosts: [ { addr: "{{b}}" } ] }
`

// Redirects answer before any upstream, with the Location Gateway API's
// RequestRedirect describes: the request's parts unless replaced, the
// listener's port unless the scheme changes, the query kept.
func TestRedirects(t *testing.T) {
	t.Parallel()
	b := recordingBackend(t, "127.0.0.1", "b")
	s, base, _ := startSturdy(t, parseConfig(t, redirectConfig, map[string]string{"b": b.addr()}))
	hostport := strings.TrimPrefix(base, "http://")
	c := noFollow()
	cases := []struct {
		path, host string
		status     int
		want       string
	}{
		{"/a/b?x=1", "old.example", 301, "https://old.example/a/b?x=1"},
		{"/a/b", "OLD.example:8080", 301, "https://OLD.example/a/b"},
		{"/old/a%20b?q", "", 308, "http://" + hostport + "/new/a%20b?q"},
		{"/docs/x", "", 302, "http://" + hostport + "/manual/x"},
		{"/docs", "", 302, "http://" + hostport + "/manual"},
		{"/u/bob?x=1", "", 303, "https://127.0.0.1/users/bob?x=1"},
		{"/port", "", 307, "http://other.example:8443/p"},
	}
	for _, tc := range cases {
		var hdr []string
		if tc.host != "" {
			hdr = []string{"Host", tc.host}
		}
		resp, _ := do(t, c, "GET", base+tc.path, nil, hdr...)
		if resp.StatusCode != tc.status || resp.Header.Get("Location") != tc.want {
			t.Errorf("GET %s (Host %q): %d %q, want %d %q", tc.path, tc.host, resp.StatusCode, resp.Header.Get("Location"), tc.status, tc.want)
		}
	}
	if n := b.count(); n != 0 {
		t.Fatalf("the backend received %d requests; redirects must answer before any upstream", n)
	}
	if got := s.Status().Routes[0].Requests["3xx"]; got != 2 {
		t.Errorf("route to-https counted %d 3xx answers, want 2", got)
	}
}

const rewriteConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  - { name: gateway, path: /foo, rewrite: { prefix: /xyz }, pool: web }
  - { name: strip, path: /strip/, rewrite: { prefix: "" }, pool: web }
  - { name: nginx, match: { path: { starts_with: /api/ } }, rewrite: { prefix: /v1/ }, pool: web }
  - { name: chars, match: { path: { starts_with: /app } }, rewrite: { prefix: /application }, pool: web }
  - { name: posts, match: { path: { regex: '^/users/([0-9]+)/posts/(.*)$' } }, rewrite: { path: /v2/posts/$2/by/$1 }, pool: web }
  - { name: legacy, path: /legacy/, rewrite: { regex: '^/legacy/(.*)\.html$', path: /$1 }, pool: web }
  - { name: full, match: { path: { exact: /full } }, rewrite: { path: /replaced }, pool: web }
  - { name: site, default: true, pool: web }
pools:
  - { name: web, hosts: [ { addr: "{{b}}" } ] }
`

// What the backend receives is exactly what docs/routing.md says: prefix
// replacement by whole segments for prefix matches (Gateway API's table),
// by characters for starts_with (nginx's proxy_pass with a URI), regex
// captures, the query and the client's encoding kept.
func TestRewrites(t *testing.T) {
	t.Parallel()
	b := recordingBackend(t, "127.0.0.1", "b")
	_, base, _ := startSturdy(t, parseConfig(t, rewriteConfig, map[string]string{"b": b.addr()}))
	c := clientFrom("127.0.0.1")
	cases := []struct{ path, want string }{
		{"/foo/bar?q=1&r", "/xyz/bar?q=1&r"},
		{"/foo", "/xyz"},
		{"/foo/", "/xyz/"},
		{"/foo/caf%C3%A9/a%3Db", "/xyz/caf%C3%A9/a%3Db"},
		{"/strip/a/b", "/a/b"},
		{"/strip/", "/"},
		{"/api/users?x=1", "/v1/users?x=1"},
		{"/appx/y", "/applicationx/y"},
		{"/users/42/posts/hello%20world", "/v2/posts/hello%20world/by/42"},
		{"/legacy/a/b.html?v=2", "/a/b?v=2"},
		{"/legacy/img.png", "/legacy/img.png"},
		{"/full?keep=me", "/replaced?keep=me"},
		{"/other", "/other"},
	}
	for _, tc := range cases {
		resp, _ := do(t, c, "GET", base+tc.path, nil)
		if got := b.last(t).RequestURI; resp.StatusCode != 200 || got != tc.want {
			t.Errorf("GET %s: the backend got %q (status %d), want %q", tc.path, got, resp.StatusCode, tc.want)
		}
	}
}

const hostHeaderConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  - { name: client, path: /client, pool: web }
  - { name: literal, path: /literal, host_header: api.internal, pool: web }
  - { name: proxy, path: /proxy, host_header: $proxy_host, pool: web }
  - { name: host, path: /host, host_header: "$host", pool: web }
  - { name: pool, path: /pool, pool: named }
  - { name: site, default: true, pool: web }
pools:
  - { name: web, hosts: [ { addr: "{{b}}" } ] }
  - { name: named, host_header: named.internal, hosts: [ { addr: "{{b}}" } ] }
`

// sturdy passes the client's Host unless told otherwise; a route or a
// pool can send a name, the client's host without port, or each
// backend's address (nginx's $proxy_host). X-Forwarded-Host stays the
// client's.
func TestHostHeader(t *testing.T) {
	t.Parallel()
	b := recordingBackend(t, "127.0.0.1", "b")
	_, base, _ := startSturdy(t, parseConfig(t, hostHeaderConfig, map[string]string{"b": b.addr()}))
	c := clientFrom("127.0.0.1")
	for path, want := range map[string]string{
		"/client": "Shop.Example:8080", "/literal": "api.internal", "/proxy": b.addr(),
		"/host": "shop.example", "/pool": "named.internal",
	} {
		do(t, c, "GET", base+path, nil, "Host", "Shop.Example:8080")
		got := b.last(t)
		if got.Host != want {
			t.Errorf("%s: the backend got Host %q, want %q", path, got.Host, want)
		}
		if xfh := got.Header.Get("X-Forwarded-Host"); xfh != "Shop.Example:8080" {
			t.Errorf("%s: X-Forwarded-Host %q, want the client's Host", path, xfh)
		}
	}
}

const headerRulesConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  - name: item
    match: { path: { regex: '^/item/(?P<id>[0-9]+)$' } }
    pool: web
    request_headers: { set: { X-Item: "item-${id}", X-First: "$1" } }
  - name: site
    default: true
    pool: web
    request_headers:
      set: { X-Real-Host: "$host", X-Client: "$remote_addr", X-Original-URI: "$request_uri", X-Scheme: "$scheme", X-Static: fixed, X-UA: "ua=$http_user_agent" }
      add: { X-Multi: extra }
      remove: [ X-Remove-Me ]
    response_headers:
      set:
        Strict-Transport-Security: "max-age=31536000; includeSubDomains"
        X-Content-Type-Options: nosniff
        X-Frame-Options: DENY
        Referrer-Policy: strict-origin-when-cross-origin
      add: { X-Served-By: sturdy }
      remove: [ Server ]
    hide_response_headers: [ X-Powered-By ]
pools:
  - { name: web, hosts: [ { addr: "{{b}}" } ] }
`

// Header rules change what the backend receives and what the client gets,
// with substitutions; sturdy's forwarding headers are still there.
func TestHeaderRules(t *testing.T) {
	t.Parallel()
	b := recordingBackend(t, "127.0.0.1", "b")
	_, base, _ := startSturdy(t, parseConfig(t, headerRulesConfig, map[string]string{"b": b.addr()}))
	c := clientFrom("127.0.0.1")
	resp, _ := do(t, c, "GET", base+"/a%20b?x=1", nil, "Host", "Shop.Example", "X-Multi", "client", "X-Remove-Me", "1", "User-Agent", "curl/8")
	got := b.last(t).Header
	want := map[string][]string{
		"X-Real-Host": {"shop.example"}, "X-Client": {"127.0.0.1"}, "X-Original-Uri": {"/a%20b?x=1"},
		"X-Scheme": {"http"}, "X-Static": {"fixed"}, "X-Ua": {"ua=curl/8"}, "X-Multi": {"client", "extra"},
		"X-Forwarded-For": {"127.0.0.1"}, "X-Forwarded-Host": {"Shop.Example"},
	}
	for k, v := range want {
		if !slices.Equal(got[k], v) {
			t.Errorf("backend got %s %q, want %q", k, got[k], v)
		}
	}
	if _, ok := got["X-Remove-Me"]; ok {
		t.Error("X-Remove-Me reached the backend")
	}
	for k, v := range map[string]string{
		"Strict-Transport-Security": "max-age=31536000; includeSubDomains", "X-Content-Type-Options": "nosniff",
		"X-Frame-Options": "DENY", "Referrer-Policy": "strict-origin-when-cross-origin", "X-Served-By": "sturdy", "X-Backend": "b",
	} {
		if resp.Header.Get(k) != v {
			t.Errorf("client got %s %q, want %q", k, resp.Header.Get(k), v)
		}
	}
	for _, k := range []string{"Server", "X-Powered-By"} {
		if v, ok := resp.Header[k]; ok {
			t.Errorf("client got %s %q; the rules remove it", k, v)
		}
	}
	// The same rules apply to sturdy's own answers.
	resp, _ = do(t, c, "GET", base+"/x", nil, "X-Answer-Status", "503")
	if resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("a backend's 503 lost the response rules: %v", resp.Header)
	}

	do(t, c, "GET", base+"/item/42", nil)
	if h := b.last(t).Header; h.Get("X-Item") != "item-42" || h.Get("X-First") != "42" {
		t.Errorf("captures: X-Item %q, X-First %q; want item-42, 42", h.Get("X-Item"), h.Get("X-First"))
	}
}
