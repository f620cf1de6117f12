package server

import (
	"testing"
)

const slashesConfig = `
admin: { listen: "off" }
listeners:
  - { name: merged, listen: "127.0.0.1:0" }
  - { name: asis, listen: "127.0.0.1:0", merge_slashes: false }
routes:
  - { name: admin, path: /admin/, pool: web, access: [ { deny: all } ] }
  - { name: site, default: true, pool: web, response_headers: { set: { X-Route: site } } }
pools:
  - { name: web, hosts: [ { addr: "{{b}}" } ] }
`

// By default (merge_slashes) //admin//x is routed as /admin/x (the
// protected route refuses it, as nginx's merge_slashes does) and the
// backend gets the merged path; merge_slashes: false routes and forwards
// the path as sent.
func TestMergeSlashes(t *testing.T) {
	t.Parallel()
	b := recordingBackend(t, "127.0.0.1", "b")
	s, _, _ := startSturdy(t, parseConfig(t, slashesConfig, map[string]string{"b": b.addr()}))
	merged, asis := "http://"+s.Addr("merged"), "http://"+s.Addr("asis")
	c := clientFrom("127.0.0.1")
	if resp, _ := do(t, c, "GET", merged+"//admin//x", nil); resp.StatusCode != 403 {
		t.Errorf("//admin//x by default: status %d, want 403 from the admin route", resp.StatusCode)
	}
	resp, _ := do(t, c, "GET", merged+"/a//b///c?q=1", nil)
	if got := b.last(t); resp.StatusCode != 200 || got.RequestURI != "/a/b/c?q=1" {
		t.Errorf("/a//b///c by default: status %d, the backend got %q, want 200 and /a/b/c?q=1", resp.StatusCode, got.RequestURI)
	}
	resp, _ = do(t, c, "GET", asis+"//admin//x", nil)
	if got := b.last(t); resp.StatusCode != 200 || resp.Header.Get("X-Route") != "site" || got.RequestURI != "//admin//x" {
		t.Errorf("//admin//x with merge_slashes false: status %d, route %q, backend got %q; want the site route and the path as sent", resp.StatusCode, resp.Header.Get("X-Route"), got.RequestURI)
	}
}
