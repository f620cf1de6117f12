package server

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
)

const slashRedirectConfig = `
admin: { listen: "off" }
listeners:
  - { name: native, listen: "127.0.0.1:0", frontend: native }
  - { name: nethttp, listen: "127.0.0.1:0", frontend: net/http }
routes:
  - { name: admin, path: /admin/, pool: web, access: [ { deny: all } ] }
  - { name: docs-page, match: { path: { exact: /docs } }, pool: web, response_headers: { set: { X-Route: docs-page } } }
  - { name: docs, path: /docs/, pool: web }
  - { name: api-root, match: { path: { regex: '^/api$' } }, pool: web, response_headers: { set: { X-Route: api-root } } }
  - { name: api, path: /api/, pool: web }
  - { name: open, path: /open/, pool: web, trailing_slash_redirect: false }
  - { name: site, default: true, pool: web, response_headers: { set: { X-Route: site } } }
pools:
  - { name: web, hosts: [ { addr: "{{b}}" } ] }
`

// GET /admin, for a route on /admin/, is redirected to /admin/ (query
// kept), as nginx redirects for a prefix location ending in "/", instead
// of reaching the default route unprotected. An exact or regex route for
// /admin itself still takes it; trailing_slash_redirect: false turns the
// redirect off.
func TestPrefixWithoutItsSlashIsRedirected(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	b := backend(t, "127.1.32.1", http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	s, _, _ := startSturdy(t, parseConfig(t, slashRedirectConfig, map[string]string{"b": addr(b)}))
	for i, ln := range []string{"native", "nethttp"} {
		c := &rawClient{t: t, from: "127.0.32." + strconv.Itoa(i+2), addr: s.Addr(ln)}
		t.Cleanup(c.close)
		for _, tc := range []struct {
			target   string
			status   int
			location string
			route    string
		}{
			{"/admin?next=%2Fx&y=1", 301, "http://site.test/admin/?next=%2Fx&y=1", ""},
			{"/admin", 301, "http://site.test/admin/", ""},
			{"//admin", 301, "http://site.test/admin/", ""},
			{"/x/../admin", 301, "http://site.test/admin/", ""},
			{"http://site.test/admin", 301, "http://site.test/admin/", ""},
			{"/admin/", 403, "", ""},
			{"/docs", 200, "", "docs-page"},
			{"/api", 200, "", "api-root"},
			{"/open", 200, "", "site"},
			{"/adminx", 200, "", "site"},
		} {
			before := hits.Load()
			st, h := c.get(tc.target)
			if st != tc.status || h.Get("Location") != tc.location || h.Get("X-Route") != tc.route {
				t.Errorf("%s: GET %s: %d Location %q route %q; want %d %q %q", ln, tc.target, st, h.Get("Location"), h.Get("X-Route"), tc.status, tc.location, tc.route)
			}
			if tc.status != 200 && hits.Load() != before {
				t.Errorf("%s: GET %s reached the backend", ln, tc.target)
			}
		}
	}
}
