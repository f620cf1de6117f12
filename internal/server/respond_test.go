package server

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const respondConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  - { name: healthz, match: { path: { exact: /healthz } }, respond: { body: "ok\n" } }
  - name: matrix
    match: { path: { exact: /.well-known/matrix/server } }
    respond: { body: '{"m.server": "chat.example:443"}', content_type: application/json }
    response_headers: { set: { Access-Control-Allow-Origin: "*" } }
  - { name: gone, path: /old/, respond: { status: 410, body: "gone\n" } }
  - { name: empty, path: /empty, respond: { status: 204 } }
  - { name: inside, path: /inside, respond: { body: "secret\n" }, access: [ { allow: 127.0.0.5 }, { deny: all } ] }
  - { name: site, default: true, pool: web }
pools:
  - { name: web, hosts: [ { addr: "{{b}}" } ] }
`

// A fixed answer needs no pool: it comes with the route's status, body,
// content type and response headers, HEAD gets the headers only, and the
// route's access controls still apply.
func TestRespond(t *testing.T) {
	t.Parallel()
	b := recordingBackend(t, "127.0.0.1", "b")
	s, base, _ := startSturdy(t, parseConfig(t, respondConfig, map[string]string{"b": b.addr()}))
	cases := []struct {
		client, method, path string
		status               int
		body, ctype, cors    string
	}{
		{"127.0.0.1", "GET", "/healthz", 200, "ok\n", "text/plain", ""},
		{"127.0.0.1", "POST", "/healthz", 200, "ok\n", "text/plain", ""},
		{"127.0.0.1", "HEAD", "/healthz", 200, "", "text/plain", ""},
		{"127.0.0.1", "GET", "/.well-known/matrix/server", 200, `{"m.server": "chat.example:443"}`, "application/json", "*"},
		{"127.0.0.1", "GET", "/old/page?x=1", 410, "gone\n", "text/plain", ""},
		{"127.0.0.1", "GET", "/empty", 204, "", "", ""},
		{"127.0.0.1", "GET", "/inside", 403, "", "", ""},
		{"127.0.0.5", "GET", "/inside", 200, "secret\n", "text/plain", ""},
	}
	for _, tc := range cases {
		resp, body := do(t, clientFrom(tc.client), tc.method, base+tc.path, nil)
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s from %s: status %d, want %d", tc.method, tc.path, tc.client, resp.StatusCode, tc.status)
			continue
		}
		if tc.status == 403 {
			continue // sturdy's own refusal page
		}
		if body != tc.body || resp.Header.Get("Content-Type") != tc.ctype || resp.Header.Get("Access-Control-Allow-Origin") != tc.cors {
			t.Errorf("%s %s: body %q, Content-Type %q, CORS %q; want %q, %q, %q", tc.method, tc.path, body, resp.Header.Get("Content-Type"), resp.Header.Get("Access-Control-Allow-Origin"), tc.body, tc.ctype, tc.cors)
		}
		if tc.method == "HEAD" && resp.Header.Get("Content-Length") != "3" {
			t.Errorf("HEAD %s: Content-Length %q, want the GET body's 3", tc.path, resp.Header.Get("Content-Length"))
		}
	}
	if n := b.count(); n != 0 {
		t.Fatalf("the backend received %d requests; fixed answers need no upstream", n)
	}
	if got := s.Status().Routes[2].Requests["4xx"]; got != 1 {
		t.Errorf("route gone counted %d 4xx answers, want 1", got)
	}
}

// A config that names no pool serves: its routes answer fixed bodies,
// files and redirects, the instance is ready, and the status JSON lists no
// pools (an empty list, not null).
func TestConfigWithoutPoolsServes(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "index.html"), []byte("home\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := parseConfig(t, `
admin: { listen: "127.0.0.1:0" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  - { name: ping, match: { path: { exact: /ping } }, respond: { body: "pong\n" } }
  - { name: old, path: /old/, redirect: { path: /new/, status: 301 } }
  - { name: files, default: true, static: { root: "{{root}}" } }
`, map[string]string{"root": root})
	if len(cfg.Pools) != 0 {
		t.Fatalf("the config has %d pools", len(cfg.Pools))
	}
	s, base, _ := startSturdy(t, cfg)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range []struct{ path, want string }{{"/ping", "200 pong\n"}, {"/", "200 home\n"}, {"/old/x", "301 "}} {
		resp, body := do(t, noRedirect, "GET", base+c.path, nil)
		if got := fmt.Sprintf("%d %s", resp.StatusCode, body); !strings.HasPrefix(got, c.want) {
			t.Errorf("GET %s: %q, want %q", c.path, got, c.want)
		}
	}
	if code, body := adminGet(t, s, "/readyz"); code != 200 {
		t.Errorf("/readyz: %d %s", code, body)
	}
	if st := s.Status(); st.Pools == nil || len(st.Pools) != 0 {
		t.Errorf("status pools: %#v, want an empty list", st.Pools)
	}
}
