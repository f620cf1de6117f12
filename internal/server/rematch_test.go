package server

import (
	"net/http"
	"strings"
	"testing"
)

const rematchConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  # nginx: location ~ ^/static/[0-9a-f]{8}/(.*)$ { rewrite ^/static/[0-9a-f]{8}/(.*)$ /$1 last; }
  - name: versioned
    match: { path: { regex: '^/static/[0-9a-f]{8}/' } }
    rewrite: { regex: '^/static/[0-9a-f]{8}/(.*)$', path: '/$1', rematch: true }
  - { name: api, path: /api/, pool: api }
  - { name: loop, path: /loop/, rewrite: { path: /loop/again, rematch: true } }
  - { name: site, default: true, pool: web }
pools:
  - { name: web, hosts: [ { addr: "{{web}}" } ] }
  - { name: api, hosts: [ { addr: "{{api}}" } ] }
`

// A route whose rewrite rematches hands the request, with its new path,
// to the route of that path (nginx's rewrite ... last): the query stays,
// the backend sees the new path, and a loop ends in a 500, not a hang.
func TestRewriteRematch(t *testing.T) {
	t.Parallel()
	web, api := recordingBackend(t, "127.0.0.1", "web"), recordingBackend(t, "127.0.0.1", "api")
	_, base, _ := startSturdy(t, parseConfig(t, rematchConfig, map[string]string{"web": web.addr(), "api": api.addr()}))
	c := clientFrom("127.0.0.1")
	for _, tt := range []struct {
		path, backend, uri string
	}{
		{"/static/0123abcd/css/a.css?v=1", "web", "/css/a.css?v=1"},
		{"/static/0123abcd/api/users", "api", "/api/users"},
		{"/api/x", "api", "/api/x"},
	} {
		resp, body := do(t, c, "GET", base+tt.path, nil)
		if resp.StatusCode != http.StatusOK || body != tt.backend {
			t.Errorf("GET %s: %d %q, want 200 from %s", tt.path, resp.StatusCode, body, tt.backend)
			continue
		}
		b := web
		if tt.backend == "api" {
			b = api
		}
		if got := b.last(t).RequestURI; got != tt.uri {
			t.Errorf("GET %s: %s got %s, want %s", tt.path, tt.backend, got, tt.uri)
		}
	}
	if resp, _ := do(t, c, "GET", base+"/loop/x", nil); resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("a rewrite that rematches itself: %d, want 500", resp.StatusCode)
	}
}

const rewriteQueryConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  # nginx: location = /ws { proxy_pass http://b/ws?prefix=&$args; }
  - { name: ws, match: { path: { exact: /ws } }, rewrite: { path: /ws, query: 'prefix=&${args}' }, pool: web }
  # nginx: location ~ ^/t/([a-z]+)/ws$ { proxy_pass http://b/ws?prefix=$1; }
  - { name: tenant, match: { path: { regex: '^/t/([a-z]+)/ws$' } }, rewrite: { path: /ws, query: 'prefix=${1}' }, pool: web }
  - { name: site, default: true, pool: web }
pools:
  - { name: web, hosts: [ { addr: "{{web}}" } ] }
`

// rewrite.query replaces the query the backend gets, with the client's
// ($args) and the route's captures; routes without it keep the client's.
func TestRewriteQuery(t *testing.T) {
	t.Parallel()
	web := recordingBackend(t, "127.0.0.1", "web")
	_, base, _ := startSturdy(t, parseConfig(t, rewriteQueryConfig, map[string]string{"web": web.addr()}))
	c := clientFrom("127.0.0.1")
	for path, want := range map[string]string{
		"/ws?q=1":       "/ws?prefix=&q=1",
		"/ws":           "/ws?prefix=&",
		"/t/abc/ws?x":   "/ws?prefix=abc",
		"/other?a=b%20": "/other?a=b%20",
	} {
		if resp, _ := do(t, c, "GET", base+path, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", path, resp.StatusCode)
			continue
		}
		if got := web.last(t).RequestURI; got != want {
			t.Errorf("GET %s: the backend got %s, want %s", path, got, want)
		}
	}
}

const backendHeadersConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  - name: site
    default: true
    request_headers: { set: { X-Route: site } }
    backends:
      - { pool: canary, header: { name: X-Canary, exact: "1" }, request_headers: { set: { X-Release: canary, X-Route: mine } }, host_header: canary }
      - { pool: stable, request_headers: { set: { X-Release: stable } } }
pools:
  - { name: canary, hosts: [ { addr: "{{canary}}" } ] }
  - { name: stable, hosts: [ { addr: "{{stable}}" } ] }
`

// backends[].request_headers go only to that backend's requests, after
// the route's own rules (nginx: proxy_set_header X-Release $pool), and
// backends[].host_header sets only that backend's Host (nginx's default
// Host for proxy_pass http://$pool, the upstream's name).
func TestBackendRequestHeaders(t *testing.T) {
	t.Parallel()
	canary, stable := recordingBackend(t, "127.0.0.1", "canary"), recordingBackend(t, "127.0.0.1", "stable")
	_, base, _ := startSturdy(t, parseConfig(t, backendHeadersConfig, map[string]string{"canary": canary.addr(), "stable": stable.addr()}))
	c := clientFrom("127.0.0.1")
	do(t, c, "GET", base+"/", nil, "X-Canary", "1")
	do(t, c, "GET", base+"/", nil)
	for _, tt := range []struct {
		b                   *recorder
		release, from, host string
	}{{canary, "canary", "mine", "canary"}, {stable, "stable", "site", strings.TrimPrefix(base, "http://")}} {
		got := tt.b.last(t)
		if h := got.Header; h.Get("X-Release") != tt.release || h.Get("X-Route") != tt.from || got.Host != tt.host {
			t.Errorf("%s got X-Release %q, X-Route %q, Host %q; want %q, %q, %q", tt.b.name, h.Get("X-Release"), h.Get("X-Route"), got.Host, tt.release, tt.from, tt.host)
		}
	}
}
