package server

import (
	"bufio"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// pathConfig protects three prefixes in the three ways a route can (an
// allow/deny list, basic auth, forward auth) on both front ends, with an
// open twin of each route on two more listeners, which say which route
// took a request (X-Route) and let the backend show the path it got.
const pathConfig = `
admin: { listen: "off" }
listeners:
  - { name: guard-native, listen: "127.0.0.1:0", frontend: native }
  - { name: guard-nethttp, listen: "127.0.0.1:0", frontend: net/http }
  - { name: open-native, listen: "127.0.0.1:0", frontend: native }
  - { name: open-nethttp, listen: "127.0.0.1:0", frontend: net/http }
routes:
  - { name: admin, path: /admin/, pool: web, listeners: [guard-native, guard-nethttp], access: [ { deny: all } ] }
  - { name: staff, path: /staff/, pool: web, listeners: [guard-native, guard-nethttp], basic_auth: { htpasswd: "{{htpasswd}}" } }
  - name: fa
    path: /fa/
    pool: web
    listeners: [guard-native, guard-nethttp]
    forward_auth: { url: "http://auth.internal/check", pool: auth }
  - { name: site, default: true, pool: web, listeners: [guard-native, guard-nethttp] }
  - { name: open-admin, path: /admin/, pool: web, listeners: [open-native, open-nethttp], response_headers: { set: { X-Route: admin } } }
  - { name: open-staff, path: /staff/, pool: web, listeners: [open-native, open-nethttp], response_headers: { set: { X-Route: staff } } }
  - { name: open-fa, path: /fa/, pool: web, listeners: [open-native, open-nethttp], response_headers: { set: { X-Route: fa } } }
  - { name: open-site, path: /, pool: web, listeners: [open-native, open-nethttp], response_headers: { set: { X-Route: site } } }
pools:
  - { name: web, hosts: [ { addr: "{{b}}" } ] }
  - { name: auth, hosts: [ { addr: "{{auth}}" } ] }
`

// pathSite is a running pathConfig: the backend answers with the target
// it received in X-Got; the auth service lets a request through unless
// its X-Forwarded-Uri is under /fa/private/, and remembers what it saw.
type pathSite struct {
	s        *Server
	hits     atomic.Int64 // requests the backend got
	authSeen sync.Map     // X-Forwarded-Uri values the auth service got
	basic    string       // a valid Authorization header for /staff/
}

func startPathSite(t testing.TB) *pathSite {
	t.Helper()
	ps := &pathSite{}
	dir := t.TempDir()
	hash, _ := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	htpasswd := filepath.Join(dir, "htpasswd")
	os.WriteFile(htpasswd, []byte("ops:"+string(hash)+"\n"), 0o644)
	ps.basic = "Basic " + base64.StdEncoding.EncodeToString([]byte("ops:s3cret"))
	b := backend(t, "127.1.30.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ps.hits.Add(1)
		w.Header().Set("X-Got", r.RequestURI)
	}))
	auth := backend(t, "127.1.30.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uri := r.Header.Get("X-Forwarded-Uri")
		ps.authSeen.Store(uri, true)
		if strings.HasPrefix(uri, "/fa/private/") {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	ps.s, _, _ = startSturdy(t, parseConfig(t, pathConfig, map[string]string{"b": addr(b), "auth": addr(auth), "htpasswd": htpasswd}))
	return ps
}

// rawClient sends request heads written byte for byte on one kept-alive
// connection from a given address, and dials again when the server
// closed it.
type rawClient struct {
	t          testing.TB
	from, addr string
	c          net.Conn
	br         *bufio.Reader
}

// get sends GET target with Host site.test and the extra header lines,
// and returns the status and header of the answer (0 when none came).
func (rc *rawClient) get(target string, extra ...string) (int, http.Header) {
	rc.t.Helper()
	for attempt := 0; ; attempt++ {
		if rc.c == nil {
			rc.c = rawDial(rc.t, rc.from, rc.addr)
			rc.br = bufio.NewReader(rc.c)
		}
		rc.c.SetDeadline(time.Now().Add(10 * time.Second))
		head := "GET " + target + " HTTP/1.1\r\nHost: site.test\r\n"
		for _, h := range extra {
			head += h + "\r\n"
		}
		_, err := io.WriteString(rc.c, head+"\r\n")
		var resp *http.Response
		if err == nil {
			resp, err = http.ReadResponse(rc.br, nil)
		}
		if err != nil {
			rc.close()
			if attempt == 0 {
				continue // the server had closed the kept-alive connection
			}
			return 0, nil
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.Close {
			rc.close()
		}
		return resp.StatusCode, resp.Header
	}
}

func (rc *rawClient) close() {
	if rc.c != nil {
		rc.c.Close()
		rc.c = nil
	}
}

func (ps *pathSite) client(t testing.TB, from, listener string) *rawClient {
	rc := &rawClient{t: t, from: from, addr: ps.s.Addr(listener)}
	t.Cleanup(rc.close)
	return rc
}

// spellings are ways of writing /P/x that a backend which merges slashes
// and resolves dot segments (most do, nginx does) reads as /P/x.
var spellings = []string{
	"//P/x", "///P/x", "//P//x", "/./P/x", "/x/../P/x", "/%2e/P/x", "/%2E%2e/P/x",
	"/.//P/x", "/x/..//P/x", "/%2e//P/x", "/x/%2e%2e//P/x", "//P/./x", "/P//x",
	"http://site.test//P/x", "http://site.test/x/..//P/x",
}

// A protected path stays protected however it is written: the route that
// judges a request is the one for the path the backend would get, on both
// front ends, from any client. Before the path was normalised once at the
// edge, //admin/x took the default route (and the backend, merging the
// slashes, served /admin/x).
func TestProtectedPathsHoldWhateverTheSpelling(t *testing.T) {
	t.Parallel()
	ps := startPathSite(t)
	want := map[string]int{"admin": 403, "staff": 401, "fa/private": 403}
	n := 0
	for _, ln := range []string{"guard-native", "guard-nethttp"} {
		var clients []*rawClient
		for i := range 4 {
			clients = append(clients, ps.client(t, "127.0.30."+strconv.Itoa(i+2), ln))
		}
		for p, status := range want {
			for _, sp := range spellings {
				target := strings.Replace(sp, "P", p, 1)
				c := clients[n%len(clients)]
				n++
				before := ps.hits.Load()
				got, _ := c.get(target)
				if got != status || ps.hits.Load() != before {
					t.Errorf("%s from %s: GET %s: %d, the backend asked %d times; want %d and no backend", ln, c.from, target, got, ps.hits.Load()-before, status)
				}
			}
		}
	}
	// Let through, each gets the path that was judged: the auth service
	// and the backend alike.
	for _, ln := range []string{"guard-native", "guard-nethttp"} {
		c := ps.client(t, "127.0.30.9", ln)
		for _, tc := range []struct{ target, got string }{
			{"//staff//x?q=a//b", "/staff/x?q=a//b"},
			{"/%73taff/./x/../y", "/staff/y"},
			{"http://site.test//staff/x", "/staff/x"},
		} {
			if st, h := c.get(tc.target, "Authorization: "+ps.basic); st != 200 || h.Get("X-Got") != tc.got {
				t.Errorf("%s: GET %s with the password: %d, the backend got %q; want 200 and %q", ln, tc.target, st, h.Get("X-Got"), tc.got)
			}
		}
		if st, h := c.get("//fa//open/./x"); st != 200 || h.Get("X-Got") != "/fa/open/x" {
			t.Errorf("%s: GET //fa//open/./x: %d, the backend got %q; want 200 and /fa/open/x", ln, st, h.Get("X-Got"))
		}
		if _, ok := ps.authSeen.Load("/fa/open/x"); !ok {
			t.Errorf("%s: the auth service was not asked about /fa/open/x, the path served", ln)
		}
		if _, ok := ps.authSeen.Load("//fa//open/./x"); ok {
			t.Errorf("%s: the auth service was asked about the path as sent, not as served", ln)
		}
	}
}

// A path parameter (";...") stays in the path, as nginx keeps it, unless a
// backend that removes it (servlet containers do) would read a path of
// another route: then the request is refused.
func TestPathParametersThatChangeTheRouteAreRefused(t *testing.T) {
	t.Parallel()
	ps := startPathSite(t)
	for _, ln := range []string{"guard-native", "guard-nethttp"} {
		c := ps.client(t, "127.0.30.10", ln)
		for _, tc := range []struct {
			target string
			status int
			got    string
		}{
			{"/admin;x=1/secret", 400, ""},
			{"/site/..;/admin/secret", 400, ""},
			{"/admin/..;/site", 400, ""},
			{"/shop/cart;jsessionid=42", 200, "/shop/cart;jsessionid=42"},
			{"/admin/x;v=1", 403, ""},
		} {
			before := ps.hits.Load()
			st, h := c.get(tc.target)
			if st != tc.status || h.Get("X-Got") != tc.got || tc.got == "" && ps.hits.Load() != before {
				t.Errorf("%s: GET %s: %d, the backend got %q; want %d and %q", ln, tc.target, st, h.Get("X-Got"), tc.status, tc.got)
			}
		}
	}
}
