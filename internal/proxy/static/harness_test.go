package static

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/proxy/compress"
)

// route describes one route of a test config.
type route struct {
	path   string // default /
	pool   bool   // the route has a pool
	static string // the static block's keys, in YAML flow style, without braces
}

// compile parses a config with the route and compiles its handler.
func compile(t testing.TB, rt route) (*Handler, []config.Error) {
	t.Helper()
	if rt.path == "" {
		rt.path = "/"
	}
	var b strings.Builder
	b.WriteString("listeners: [ { name: web, listen: 127.0.0.1:8080 } ]\nroutes:\n")
	fmt.Fprintf(&b, "  - name: r\n    default: true\n    path: %q\n    static: { %s }\n", rt.path, rt.static)
	if rt.pool {
		b.WriteString("    pool: app\n")
	}
	b.WriteString("pools: [ { name: app, hosts: [ { addr: 127.0.0.1:9001 } ] } ]\n")
	c, err := config.Parse([]byte(b.String()), "test.yaml")
	if err != nil {
		t.Fatalf("config:\n%s\n%v", b.String(), err)
	}
	h, warnings, err := Compile(c, 0)
	if err != nil {
		t.Fatal(err)
	}
	return h, warnings
}

// poolBody is what the stand-in for the route's pool answers, so that
// tests can tell a fall-through from a file.
const poolBody = "answered by the pool\n"

// start serves h on loopback, with an optional compression policy in
// front as the proxy will wire it, and returns the base URL.
func start(t testing.TB, h *Handler, p *compress.Policy) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cw := compress.Wrap(w, r, p); cw != nil {
			defer cw.Close()
			w = cw
		}
		if !h.Serve(w, r, r.URL.Path) {
			io.WriteString(w, poolBody)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// client never decodes on its own and never follows redirects, so that
// tests see what was sent.
var client = &http.Client{
	Transport:     &http.Transport{DisableCompression: true},
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

type reply struct {
	status int
	header http.Header
	body   string
}

// get sends a request with the given header lines ("Range: bytes=0-9").
func get(t testing.TB, method, url string, headers ...string) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header, string(body)}
}

// raw sends a request line as written, bypassing every client-side
// cleaning, and returns the status and body.
func raw(t *testing.T, base, target string) (int, string) {
	t.Helper()
	addr := strings.TrimPrefix(base, "http://")
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n", target)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s: %v", target, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// tree writes files (name → content) under dir; a name ending in "/" is a
// directory.
func tree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func configParse(s string) (*config.Config, error) { return config.Parse([]byte(s), "test.yaml") }
