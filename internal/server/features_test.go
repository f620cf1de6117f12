package server

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

const featuresConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
rate_limit_zones: [ { name: perclient, rate: 1r/m } ]
routes:
  - name: assets
    path: /assets/
    static: { root: "{{root}}", cache_control: "public, max-age=60" }
    compress: {}
  - name: app
    path: /app/
    pool: web
    static: { root: "{{root}}", try_files: [ "$uri", "@pool" ] }
  - name: limited
    path: /limited/
    pool: web
    rate_limit: [ { zone: perclient, burst: 2, nodelay: true } ]
  - name: private
    path: /private/
    pool: web
    access: [ { allow: 127.0.0.5 }, { deny: all } ]
    basic_auth: { htpasswd: "{{htpasswd}}" }
  - name: sso
    path: /sso/
    pool: web
    forward_auth: { url: "http://auth.internal/check", pool: auth, copy_headers: [ X-Auth-Request-User ] }
  - { name: site, default: true, pool: web }
pools:
  - { name: web, hosts: [ { addr: "{{b}}" } ] }
  - { name: auth, hosts: [ { addr: "{{auth}}" } ] }
`

// Files, compression and access control are route features of the one
// request path: files answer before the pool, a fallthrough reaches it,
// limits and auth refuse before any backend is asked.
func TestRouteFeaturesThroughTheServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root := filepath.Join(dir, "www")
	os.MkdirAll(filepath.Join(root, "assets"), 0o755)
	os.MkdirAll(filepath.Join(root, "app"), 0o755)
	page := strings.Repeat("<p>hello, compressed world</p>\n", 200)
	os.WriteFile(filepath.Join(root, "assets", "site.html"), []byte(page), 0o644)
	os.WriteFile(filepath.Join(root, "app", "logo.txt"), []byte("logo"), 0o644)
	hash, _ := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	htpasswd := filepath.Join(dir, "htpasswd")
	os.WriteFile(htpasswd, []byte("ops:"+string(hash)+"\n"), 0o644)

	var backendHits atomic.Int64
	var seenAuth, seenUser atomic.Value
	b := backend(t, "127.1.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		backendHits.Add(1)
		seenAuth.Store(r.Header.Get("Authorization"))
		seenUser.Store(r.Header.Get("X-Auth-Request-User"))
		fmt.Fprintf(w, "backend %s", r.URL.Path)
	}))
	auth := backend(t, "127.1.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, err := r.Cookie("session"); err == nil && c.Value == "good" {
			w.Header().Set("X-Auth-Request-User", "alice")
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Location", "https://login.example/?rd="+r.Header.Get("X-Forwarded-Uri"))
		w.WriteHeader(http.StatusFound)
	}))
	s, url, _ := startSturdy(t, parseConfig(t, featuresConfig, map[string]string{
		"root": root, "htpasswd": htpasswd, "b": addr(b), "auth": addr(auth),
	}))
	noRedirects := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(ip, method, path string, hdr ...string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		c := clientFrom(ip)
		c.CheckRedirect = noRedirects.CheckRedirect
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		var body []byte
		if resp.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(zr)
		} else {
			body, _ = io.ReadAll(resp.Body)
		}
		resp.Body.Close()
		return resp, string(body)
	}

	// Files, compressed for a client that accepts gzip, with the route's
	// Cache-Control; no backend asked.
	resp, body := do("127.0.0.2", "GET", "/assets/site.html", "Accept-Encoding", "gzip")
	if resp.StatusCode != 200 || body != page || resp.Header.Get("Content-Encoding") != "gzip" ||
		resp.Header.Get("Cache-Control") != "public, max-age=60" || !strings.Contains(resp.Header.Get("Vary"), "Accept-Encoding") {
		t.Errorf("static+gzip: %d %q %v", resp.StatusCode, resp.Header.Get("Content-Encoding"), resp.Header)
	}
	if resp, _ := do("127.0.0.2", "GET", "/assets/missing.css"); resp.StatusCode != 404 {
		t.Errorf("missing file on a files-only route: %d", resp.StatusCode)
	}
	// try_files: the file when it exists, else the pool.
	if _, body := do("127.0.0.2", "GET", "/app/logo.txt"); body != "logo" {
		t.Errorf("app file: %q", body)
	}
	if _, body := do("127.0.0.2", "GET", "/app/orders/7"); body != "backend /app/orders/7" {
		t.Errorf("app fallthrough: %q", body)
	}
	hitsBefore := backendHits.Load()

	// Rate limit: a burst of 2 on top of one request, then 429 with
	// Retry-After, per client.
	for i := range 3 {
		if resp, _ := do("127.0.0.3", "GET", "/limited/x"); resp.StatusCode != 200 {
			t.Fatalf("request %d within the burst: %d", i, resp.StatusCode)
		}
	}
	resp, _ = do("127.0.0.3", "GET", "/limited/x")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("over the burst: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp, _ := do("127.0.0.4", "GET", "/limited/x"); resp.StatusCode != 200 {
		t.Errorf("another client is limited too: %d", resp.StatusCode)
	}
	if n := backendHits.Load() - hitsBefore; n != 4 {
		t.Errorf("%d requests reached the backend, want the 4 allowed", n)
	}
	var rejected uint64
	for _, rl := range s.Status().Access.RateLimits {
		if rl.Route == "limited" {
			rejected += rl.Decisions["rejected"]
		}
	}
	if rejected != 1 {
		t.Errorf("%d rate-limit rejections in the status, want 1", rejected)
	}

	// Allow list then basic auth; the password never reaches the backend.
	if resp, _ := do("127.0.0.6", "GET", "/private/x", "Authorization", "Basic b3BzOnMzY3JldA=="); resp.StatusCode != 403 {
		t.Errorf("denied address: %d", resp.StatusCode)
	}
	if resp, _ := do("127.0.0.5", "GET", "/private/x"); resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "Basic") {
		t.Errorf("no credentials: %d %v", resp.StatusCode, resp.Header)
	}
	if resp, body := do("127.0.0.5", "GET", "/private/x", "Authorization", "Basic b3BzOnMzY3JldA=="); resp.StatusCode != 200 || body != "backend /private/x" {
		t.Errorf("signed in: %d %q", resp.StatusCode, body)
	}
	if a := seenAuth.Load().(string); a != "" {
		t.Errorf("the backend saw Authorization %q", a)
	}

	// Forward auth through the auth pool: redirect to sign in, then the
	// user's name copied upstream (and a client's own copy replaced).
	resp, _ = do("127.0.0.7", "GET", "/sso/inbox", "X-Auth-Request-User", "mallory")
	if resp.StatusCode != 302 || !strings.HasPrefix(resp.Header.Get("Location"), "https://login.example/") {
		t.Errorf("not signed in: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, body := do("127.0.0.7", "GET", "/sso/inbox", "Cookie", "session=good", "X-Auth-Request-User", "mallory"); resp.StatusCode != 200 || body != "backend /sso/inbox" {
		t.Errorf("signed in: %d %q", resp.StatusCode, body)
	}
	if u := seenUser.Load().(string); u != "alice" {
		t.Errorf("the backend saw X-Auth-Request-User %q, want the auth service's alice", u)
	}
}
