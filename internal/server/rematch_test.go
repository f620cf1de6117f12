package server

import (
	"net/http"
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
