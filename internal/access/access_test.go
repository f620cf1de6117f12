package access

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/access/forwardauth"
	"github.com/sturdyproxy/sturdy/internal/config"
)

func serve(t *testing.T, addr string, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String()
}

// stack is sturdy's request path in miniature: route by path prefix, run
// the route's Policy exactly as the proxy will, then reverse-proxy to a
// backend that echoes what it received.
type stack struct {
	front   string
	access  *Compiled
	release chan struct{} // /hold/ requests wait on it at the backend
	held    chan struct{} // one value per request arriving at /hold/
	mu      sync.Mutex
	got     []http.Header // headers the backend saw
}

const yamlBase = `
listeners: [ { name: web, listen: 127.0.0.1:0 } ]
pools: [ { name: web, hosts: [ { addr: 127.0.0.1:9 } ] }, { name: auth, hosts: [ { addr: 127.0.0.1:9 } ] } ]
`

func newStack(t *testing.T, yaml string) *stack {
	t.Helper()
	dir := t.TempDir()
	yaml = strings.ReplaceAll(yaml, "DIR", dir)
	os.WriteFile(filepath.Join(dir, "htpasswd"), []byte("alice:$2y$05$6KfVJl2.i/7wZw8Ey8a59Oy8H2RU4aPVlb2pMcT5j3dpbwkEFKYp.\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "office.txt"), []byte("# the office\n127.0.0.0/24\n"), 0o600)
	cfg, err := config.Parse([]byte(yamlBase+yaml), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{release: make(chan struct{}), held: make(chan struct{}, 16)}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	s.access, err = Compile(cfg, Options{ForwardAuthUpstream: func(int, *config.ForwardAuth) (forwardauth.Upstream, error) { return tr, nil }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	backend := serve(t, "127.1.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.got = append(s.got, r.Header.Clone())
		s.mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/hold/") {
			s.held <- struct{}{}
			<-s.release
		}
		fmt.Fprintf(w, "content of %s for %s\n", r.URL.Path, r.Header.Get("X-Auth-Request-User"))
	}))
	bu, _ := url.Parse(backend)
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(bu) }}
	s.front = serve(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := -1
		for j, rt := range cfg.Routes { // longest prefix
			if strings.HasPrefix(r.URL.Path, rt.Path) && (i < 0 || len(rt.Path) > len(cfg.Routes[i].Path)) {
				i = j
			}
		}
		p := s.access.Route(i)
		if p == nil {
			rp.ServeHTTP(w, r)
			return
		}
		ap, _ := netip.ParseAddrPort(r.RemoteAddr)
		adm, _, ok := p.Admit(w, r, Client{IP: ap.Addr(), Key: ap.Addr().String(), Proto: "http"}, time.Now())
		if !ok {
			return
		}
		defer adm.Done()
		r = r.Clone(r.Context())
		adm.Apply(r.Header)
		rp.ServeHTTP(w, r)
	}))
	return s
}

func (s *stack) lastSeen() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got[len(s.got)-1]
}

// from is a client on its own loopback address.
func from(t *testing.T, addr string) *http.Client {
	tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}}).DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func do(t *testing.T, c *http.Client, method, u string, header ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, u, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func TestAllowDenyAndMethodsOverRealSockets(t *testing.T) {
	s := newStack(t, `
routes:
  - { name: site, default: true, pool: web }
  - name: admin
    path: /admin/
    pool: web
    methods: [GET]
    access: [ { deny: 127.0.0.66 }, { allow_file: DIR/office.txt }, { deny: all } ]
`)
	office, intruder, outside := from(t, "127.0.0.7"), from(t, "127.0.0.66"), from(t, "127.3.0.1")
	if resp, body := do(t, office, "GET", s.front+"/admin/users"); resp.StatusCode != 200 || body != "content of /admin/users for \n" {
		t.Fatalf("office GET: %d %q", resp.StatusCode, body)
	}
	if resp, _ := do(t, office, "HEAD", s.front+"/admin/users"); resp.StatusCode != 200 {
		t.Fatalf("office HEAD: %d (GET implies HEAD)", resp.StatusCode)
	}
	resp, body := do(t, office, "DELETE", s.front+"/admin/users")
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, HEAD" || body != `405 Method Not Allowed: route "admin": method "DELETE" is not allowed here.`+"\n" {
		t.Fatalf("office DELETE: %d %q Allow=%q", resp.StatusCode, body, resp.Header.Get("Allow"))
	}
	for _, c := range []*http.Client{intruder, outside} {
		for _, m := range []string{"GET", "DELETE"} {
			resp, body := do(t, c, m, s.front+"/admin/users")
			if resp.StatusCode != 403 || resp.Header.Get("Allow") != "" || body != `403 Forbidden: route "admin": requests from this address are refused.`+"\n" {
				t.Fatalf("denied %s: %d %q", m, resp.StatusCode, body)
			}
		}
	}
	if resp, _ := do(t, outside, "GET", s.front+"/"); resp.StatusCode != 200 {
		t.Fatalf("a route without controls: %d", resp.StatusCode)
	}
	s.mu.Lock()
	n := len(s.got)
	s.mu.Unlock()
	if n != 3 {
		t.Fatalf("the backend saw %d requests, want 3: refusals never reach it", n)
	}
}

// methods_status: 403 answers a refused method as nginx's limit_except
// does: 403, without Allow; allowed methods still reach the backend.
func TestMethodsStatus403OverRealSockets(t *testing.T) {
	s := newStack(t, `
routes:
  - { name: site, default: true, pool: web }
  - { name: upload, path: /upload, pool: web, methods: [POST], methods_status: 403 }
`)
	c := from(t, "127.0.0.7")
	resp, body := do(t, c, "GET", s.front+"/upload")
	if resp.StatusCode != 403 || resp.Header.Get("Allow") != "" || body != `403 Forbidden: route "upload": method "GET" is not allowed here.`+"\n" {
		t.Fatalf("GET: %d %q Allow=%q, want 403 without Allow", resp.StatusCode, body, resp.Header.Get("Allow"))
	}
	if resp, _ := do(t, c, "POST", s.front+"/upload"); resp.StatusCode != 200 {
		t.Fatalf("POST: %d, want the backend's 200", resp.StatusCode)
	}
}

// One client over its rate gets 429 with Retry-After; the others keep
// their own budgets; a client that attribution holds responsible gets the
// stricter limit.
func TestRateLimitPerClientOverRealSockets(t *testing.T) {
	s := newStack(t, `
rate_limit_zones: [ { name: per_ip, rate: 30r/m, attributed: { rate: 1r/m } } ]
routes:
  - name: api
    default: true
    pool: web
    rate_limit: [ { zone: per_ip, burst: 2, nodelay: true } ]
`)
	greedy, calm := from(t, "127.0.0.9"), from(t, "127.0.0.10")
	var got []int
	for range 4 {
		resp, _ := do(t, greedy, "GET", s.front+"/x")
		got = append(got, resp.StatusCode)
		if resp.StatusCode == 429 && resp.Header.Get("Retry-After") != "2" {
			t.Fatalf("Retry-After %q, want 2 (one slot at 30r/m)", resp.Header.Get("Retry-After"))
		}
	}
	if fmt.Sprint(got) != "[200 200 200 429]" {
		t.Fatalf("greedy client: %v, want three passed (1 + burst 2) then 429", got)
	}
	if resp, _ := do(t, calm, "GET", s.front+"/x"); resp.StatusCode != 200 {
		t.Fatalf("another client: %d", resp.StatusCode)
	}
	st, zones := s.access.Rate.Stats()
	if len(st) != 1 || st[0].Allowed != 4 || st[0].Rejected != 1 || st[0].KeyKind != "client_ip" || zones[0].Keys != 2 {
		t.Fatalf("stats %+v %+v", st, zones)
	}

	// The same policy, for a client attribution holds responsible.
	p := s.access.Route(0)
	rec := func(addr string, attributed bool) int {
		w := &recorder{h: http.Header{}}
		r, _ := http.NewRequest("GET", "/x", nil)
		_, status, _ := p.Admit(w, r, Client{IP: netip.MustParseAddr(addr), Key: addr, Attributed: attributed}, time.Now())
		return status
	}
	if a, b := rec("192.0.2.66", true), rec("192.0.2.66", true); a != 0 || b != 429 {
		t.Fatalf("attributed client: %d then %d, want passed then 429 (1r/m, no burst)", a, b)
	}
}

// Requests in flight per client: the second concurrent request of one
// client is refused, another client's is not, and the slot comes back.
func TestConnLimitOverRealSockets(t *testing.T) {
	s := newStack(t, `
conn_limit_zones: [ { name: conns } ]
routes:
  - { name: dl, default: true, pool: web, conn_limit: [ { zone: conns, max: 1 } ] }
`)
	a, b := from(t, "127.0.0.11"), from(t, "127.0.0.12")
	done := make(chan int)
	go func() {
		resp, err := a.Get(s.front + "/hold/1")
		if err != nil {
			done <- -1
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	<-s.held // the first request is at the backend
	resp, body := do(t, a, "GET", s.front+"/other")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" || !strings.Contains(body, "too many requests from this client at once") {
		t.Fatalf("second request in flight: %d %q", resp.StatusCode, body)
	}
	go func() { <-s.held }()
	resp2 := make(chan int)
	go func() {
		r, err := b.Get(s.front + "/hold/2")
		if err == nil {
			r.Body.Close()
			resp2 <- r.StatusCode
		} else {
			resp2 <- -1
		}
	}()
	close(s.release)
	if code := <-done; code != 200 {
		t.Fatalf("held request: %d", code)
	}
	if code := <-resp2; code != 200 {
		t.Fatalf("another client's request: %d", code)
	}
	if resp, _ := do(t, a, "GET", s.front+"/after"); resp.StatusCode != 200 {
		t.Fatalf("after the first ended: %d", resp.StatusCode)
	}
}

// A delayed request waits for its slot and then passes; a client that
// leaves while waiting is not passed on.
func TestDelayedRequestsPassAfterTheirSlot(t *testing.T) {
	s := newStack(t, `
rate_limit_zones: [ { name: per_ip, rate: 2r/s } ]
routes:
  - { name: api, default: true, pool: web, rate_limit: [ { zone: per_ip, burst: 3 } ] }
`)
	c := from(t, "127.0.0.40")
	for range 2 { // the second waits up to 500ms for its slot
		if resp, _ := do(t, c, "GET", s.front+"/x"); resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if st, _ := s.access.Rate.Stats(); st[0].Delayed != 1 || st[0].Allowed != 1 {
		t.Fatalf("stats %+v, want one passed at once and one delayed", st)
	}
	p := s.access.Route(0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, _ := http.NewRequestWithContext(ctx, "GET", "/x", nil)
	for range 2 { // a new key's first request passes at once
		if _, status, _ := p.Admit(&recorder{h: http.Header{}}, r, Client{Key: "192.0.2.1"}, time.Now()); status == 499 {
			return
		}
	}
	t.Fatal("a client that left while delayed was not reported as 499")
}

type recorder struct {
	h      http.Header
	status int
}

func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) Write(p []byte) (int, error) { return len(p), nil }
func (r *recorder) WriteHeader(s int)           { r.status = s }

func TestCompileReportsEveryFileError(t *testing.T) {
	cfg, err := config.Parse([]byte(yamlBase+`
routes:
  - { name: a, default: true, pool: web, access: [ { allow_file: /nonexistent/list } ] }
  - { name: b, path: /b/, pool: web, basic_auth: { htpasswd: /nonexistent/htpasswd } }
  - { name: c, path: /c/, pool: web, forward_auth: { url: "http://127.0.0.1:1/" } }
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Compile(cfg, Options{}, nil)
	msg := fmt.Sprint(err)
	for _, want := range []string{
		"routes[0].access[0].allow_file: cannot read the address list",
		"routes[1].basic_auth.htpasswd: cannot read the password file",
		"routes[2].forward_auth: no upstream for the auth service",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
}

// A reload keeps a limited client limited and re-reads the files.
func TestReloadKeepsStateAndRereadsFiles(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "deny.txt")
	os.WriteFile(list, []byte("192.0.2.1\n"), 0o600)
	yaml := yamlBase + `
rate_limit_zones: [ { name: z, rate: 1r/m } ]
routes: [ { name: a, default: true, pool: web, rate_limit: [ { zone: z } ], access: [ { deny_file: ` + list + ` } ] } ]
`
	cfg, _ := config.Parse([]byte(yaml), "t.yaml")
	old, err := Compile(cfg, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	admit := func(c *Compiled, addr string) int {
		r, _ := http.NewRequest("GET", "/", nil)
		_, status, _ := c.Route(0).Admit(&recorder{h: http.Header{}}, r, Client{IP: netip.MustParseAddr(addr), Key: addr}, time.Now())
		return status
	}
	if admit(old, "192.0.2.1") != 403 || admit(old, "192.0.2.2") != 0 {
		t.Fatal("first config")
	}
	os.WriteFile(list, []byte("192.0.2.3\n"), 0o600)
	cfg2, _ := config.Parse([]byte(yaml), "t.yaml")
	next, err := Compile(cfg2, Options{}, old)
	if err != nil {
		t.Fatal(err)
	}
	if got := admit(next, "192.0.2.2"); got != 429 {
		t.Fatalf("limited client after reload: %d, want still 429", got)
	}
	if admit(next, "192.0.2.1") != 0 || admit(next, "192.0.2.3") != 403 {
		t.Fatal("the deny file was not re-read")
	}
}
