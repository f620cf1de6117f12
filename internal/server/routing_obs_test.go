package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

const idsAndPagesConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
trusted_proxies: [ 127.0.0.9 ]
request_id: {}
log:
  access:
    enabled: true
    path: "{{log}}"
    fields: [ time, method, path, query, route, status, upstream_status, request_id, user_agent, bytes_in, upstream_connect_ms, upstream_header_ms, upstream_total_ms ]
routes:
  - name: pages
    path: /pages/
    pool: web
    error_pages:
      - { codes: [502, 504], file: "{{page}}", status: 503 }
      - { codes: [404], file: "{{notfound}}" }
  - { name: broken, path: /broken/, pool: broken, retry: { tries: 1 } }
  - { name: brokenpage, path: /brokenpage/, pool: broken, retry: { tries: 1 }, error_pages: [ { codes: [502], file: "{{page}}" } ] }
  - { name: small, path: /small/, pool: web, max_body_bytes: 10, error_pages: [ { codes: [413], file: "{{page}}" } ] }
  - { name: noid, path: /noid/, pool: web, request_id: { enabled: false } }
  - { name: site, default: true, pool: web }
pools:
  - { name: web, hosts: [ { addr: "{{b}}" } ] }
  - { name: broken, hosts: [ { addr: "{{broken}}" } ] }
`

var hexID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// Request ids travel upstream and back and into error bodies and the
// access log; clients' ids are kept only from trusted peers. Error pages
// replace backends' error answers (and sturdy's own for failed attempts),
// never the proxy's other decisions, and the backend's status is kept in
// the counters and the log.
func TestRequestIDsAndErrorPages(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	page, notfound, logf := filepath.Join(dir, "50x.html"), filepath.Join(dir, "404.txt"), filepath.Join(dir, "access.log")
	os.WriteFile(page, []byte("<h1>We'll be right back</h1>\n"), 0o644)
	os.WriteFile(notfound, []byte("nothing here\n"), 0o644)
	b := recordingBackend(t, "127.0.0.1", "b")
	broken := backend(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // closed without an answer: sturdy answers 502
		}
	}))
	s, base, _ := startSturdy(t, parseConfig(t, idsAndPagesConfig, map[string]string{
		"b": b.addr(), "broken": addr(broken), "page": page, "notfound": notfound, "log": logf,
	}))
	c := clientFrom("127.0.0.1")

	resp, _ := do(t, c, "GET", base+"/x", nil, "X-Request-ID", "from-client")
	id := resp.Header.Get("X-Request-Id")
	if !hexID.MatchString(id) || b.last(t).Header.Get("X-Request-Id") != id {
		t.Errorf("response id %q, backend got %q; want one new 32-hex id in both (the client is not trusted)", id, b.last(t).Header.Get("X-Request-Id"))
	}
	port := strings.TrimPrefix(base, "http://127.0.0.1:")
	trusted := clientFrom("127.0.0.9")
	resp, _ = do(t, trusted, "GET", "http://127.0.0.1:"+port+"/x", nil, "X-Request-ID", "from-proxy")
	if got := resp.Header.Get("X-Request-Id"); got != "from-proxy" || b.last(t).Header.Get("X-Request-Id") != "from-proxy" {
		t.Errorf("a trusted peer's id became %q (backend %q), want it kept", got, b.last(t).Header.Get("X-Request-Id"))
	}
	resp, _ = do(t, c, "GET", base+"/noid/x", nil)
	if _, ok := resp.Header["X-Request-Id"]; ok {
		t.Error("a route with request_id disabled answered with an id")
	}

	// sturdy's own error body names the request.
	resp, body := do(t, c, "GET", base+"/broken/x", nil)
	id = resp.Header.Get("X-Request-Id")
	if resp.StatusCode != 502 || id == "" || !strings.Contains(body, "request id: "+id) {
		t.Errorf("broken: %d, id %q, body %q; want 502 with the id in the body", resp.StatusCode, id, body)
	}

	// Error pages.
	resp, body = do(t, c, "GET", base+"/pages/x?q=1", nil, "X-Answer-Status", "502", "User-Agent", "ua/1")
	pageID := resp.Header.Get("X-Request-Id")
	if resp.StatusCode != 503 || body != "<h1>We'll be right back</h1>\n" || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" ||
		resp.Header.Get("X-Backend") != "" || pageID == "" {
		t.Errorf("502 with a page: %d %q %v; want 503, the page, text/html, no backend header, the id", resp.StatusCode, body, resp.Header)
	}
	if resp, body = do(t, c, "GET", base+"/pages/x", nil, "X-Answer-Status", "404"); resp.StatusCode != 404 || body != "nothing here\n" {
		t.Errorf("404 with a page: %d %q", resp.StatusCode, body)
	}
	if resp, body = do(t, c, "GET", base+"/pages/x", nil, "X-Answer-Status", "500"); resp.StatusCode != 500 || body != "500 from b" {
		t.Errorf("500 without a page: %d %q; want the backend's answer", resp.StatusCode, body)
	}
	if resp, body = do(t, c, "GET", base+"/brokenpage/x", nil); resp.StatusCode != 502 || !strings.HasPrefix(body, "<h1>") {
		t.Errorf("sturdy's 502 with a page: %d %q; want the page", resp.StatusCode, body)
	}
	if resp, body = do(t, c, "POST", base+"/small/x", strings.NewReader(strings.Repeat("x", 100))); resp.StatusCode != 413 || strings.HasPrefix(body, "<h1>") {
		t.Errorf("413 from the body limit: %d %q; the proxy's own decisions keep their bodies", resp.StatusCode, body)
	}
	for _, r := range s.Status().Routes {
		if r.Name == "pages" && (r.Requests["5xx"] != 2 || r.Requests["4xx"] != 1) {
			t.Errorf("route pages counted %v; want the backends' 502 and 500 as 5xx and the 404", r.Requests)
		}
	}

	// The access log has the client's status beside the backend's.
	var rec map[string]any
	ok := testutil.Eventually(5*time.Second, func() bool {
		b, _ := os.ReadFile(logf)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, pageID) {
				return json.Unmarshal([]byte(line), &rec) == nil
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("no access log line for request %s", pageID)
	}
	want := map[string]any{"route": "pages", "status": 503.0, "upstream_status": 502.0, "request_id": pageID, "query": "q=1", "user_agent": "ua/1", "path": "/pages/x", "bytes_in": 0.0}
	for k, v := range want {
		if rec[k] != v {
			t.Errorf("access log %s = %#v, want %#v (line %v)", k, rec[k], v, rec)
		}
	}
	for _, k := range []string{"upstream_connect_ms", "upstream_header_ms", "upstream_total_ms"} {
		if v, ok := rec[k].(float64); !ok || v < 0 {
			t.Errorf("access log %s = %#v, want a duration", k, rec[k])
		}
	}
	if rec["upstream_header_ms"].(float64) > rec["upstream_total_ms"].(float64) {
		t.Errorf("header time %v after total %v", rec["upstream_header_ms"], rec["upstream_total_ms"])
	}
}

const combinedConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
log: { access: { enabled: true, path: "{{log}}", format: combined } }
routes:
  - { name: site, default: true, pool: web }
pools:
  - { name: web, hosts: [ { addr: "{{b}}" } ] }
`

// The combined format is nginx's, for the parsers that read it.
func TestAccessLogCombined(t *testing.T) {
	t.Parallel()
	logf := filepath.Join(t.TempDir(), "access.log")
	b := recordingBackend(t, "127.0.0.1", "b")
	_, base, _ := startSturdy(t, parseConfig(t, combinedConfig, map[string]string{"b": b.addr(), "log": logf}))
	do(t, clientFrom("127.0.0.1"), "GET", base+"/a%20b?y=1", nil, "Referer", "http://ref.example/", "User-Agent", `agent "quoted"`)
	line := regexp.MustCompile(`^127\.0\.0\.1 - - \[\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4}\] "GET /a%20b\?y=1 HTTP/1\.1" 200 1 "http://ref\.example/" "agent \\x22quoted\\x22"$`)
	var got string
	ok := testutil.Eventually(5*time.Second, func() bool {
		b, _ := os.ReadFile(logf)
		got = strings.TrimSpace(string(b))
		return got != ""
	})
	if !ok || !line.MatchString(got) {
		t.Fatalf("access log %q; want a combined line matching %s", got, line)
	}
}

const answeringFeaturesConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
request_id: {}
routes:
  - name: site
    default: true
    pool: web
    response_headers: { set: { X-Frame-Options: DENY } }
    error_pages: [ { codes: [502], file: "{{page}}" } ]
pools:
  - { name: web, hosts: [ { addr: "{{b}}" } ] }
`

// A route that changes answers still streams event streams as they come
// and still splices upgraded connections.
func TestStreamingAndUpgradesThroughRouteRules(t *testing.T) {
	t.Parallel()
	page := filepath.Join(t.TempDir(), "50x.html")
	os.WriteFile(page, []byte("<p>down</p>"), 0o644)
	release := make(chan struct{})
	defer close(release)
	ws := wsEcho()
	b := backend(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ws" {
			ws.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-release
	}))
	_, base, _ := startSturdy(t, parseConfig(t, answeringFeaturesConfig, map[string]string{"b": addr(b), "page": page}))
	resp, err := http.Get(base + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || line != "data: first\n" {
		t.Fatalf("first line %q, %v; want it before the backend finishes", line, err)
	}
	if resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("X-Request-Id") == "" {
		t.Errorf("stream headers %v; want the rules and the id", resp.Header)
	}

	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	br := bufio.NewReader(conn)
	up, err := http.ReadResponse(br, nil)
	if err != nil || up.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", up, err)
	}
	io.WriteString(conn, "ping")
	buf := make([]byte, 4)
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %q %v", buf, err)
	}
}
