package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/edge"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/view"
)

const edgeConfig = `
admin: { listen: "127.0.0.1:0" }
trusted_proxies: [ "127.0.13.100/32" ]
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  - { name: app, default: true, pool: app }
  - { name: gitlab, path: /api/, pool: app, allow_encoded_slashes: true }
pools:
  - name: app
    hosts: [ { addr: "{{r1}}" } ]
`

// spoofed are the identity and URL fields a client could forge; the
// value names the field, so that the recorder's echo shows which passed.
var spoofed = []string{
	"X-Forwarded-Port", "X-Forwarded-Prefix", "X-Original-URL", "X-Rewrite-URL",
	"True-Client-IP", "X-Client-IP", "CF-Connecting-IP", "X-Original-URI",
	"Fastly-Client-IP", "X-Forwarded-Scheme", "X-Forwarded-Uri",
}

// Item 7: from an untrusted peer the identity and URL fields never reach
// the backend, X-Forwarded-Port is sturdy's own; from a trusted proxy
// they pass.
func TestSpoofedIdentityHeadersAreDropped(t *testing.T) {
	t.Parallel()
	rs := recorders(t, 1)
	_, url, _ := startSturdy(t, parseConfig(t, edgeConfig, map[string]string{"r1": rs[0].Addr}))
	addr := strings.TrimPrefix(url, "http://")
	_, port, _ := net.SplitHostPort(addr)
	var head strings.Builder
	for _, h := range spoofed {
		fmt.Fprintf(&head, "%s: forged-%s\r\n", h, strings.ToLower(h))
	}
	// Mixed case and a second value: matching is on the canonical name.
	head.WriteString("x-original-url: forged-lower\r\nTrue-Client-Ip: forged-again\r\n")
	req := "GET /who HTTP/1.1\r\nHost: shop.example\r\n" + head.String() + "Connection: close\r\n\r\n"
	for _, from := range []string{"127.0.13.1", "127.0.13.2", "127.0.13.3"} {
		r := rawSend(t, from, addr, req, 5*time.Second)
		if r.first() != 200 {
			t.Fatalf("from %s: %q", from, r.text)
		}
		if strings.Contains(r.text, "forged") {
			t.Errorf("from untrusted %s, forged fields reached the backend:\n%s", from, r.text)
		}
		if !strings.Contains(r.text, "Got-X-Forwarded-Port: "+port+"\n") {
			t.Errorf("from %s, X-Forwarded-Port is not the listener's port %s:\n%s", from, port, r.text)
		}
	}
	r := rawSend(t, "127.0.13.100", addr, req, 5*time.Second)
	for _, h := range []string{"X-Original-Url", "True-Client-Ip", "X-Forwarded-Prefix", "X-Forwarded-Port"} {
		if !strings.Contains(r.text, "Got-"+h+": forged") {
			t.Errorf("from the trusted proxy, %s did not pass:\n%s", h, r.text)
		}
	}
	if got := rs[0].Received(); strings.Count(got, "forged") != strings.Count(req, "forged") {
		t.Errorf("the backend received %d forged values in all, want only the trusted proxy's %d", strings.Count(got, "forged"), strings.Count(req, "forged"))
	}
}

// Item 10: encoded slashes pass unchanged on a route that allows them and
// get 400 (counted, and no backend asked) on one that does not; the query
// string is forwarded byte for byte, stray '%' and all.
func TestEncodedSlashesAndRawQuery(t *testing.T) {
	t.Parallel()
	rs := recorders(t, 1)
	s, url, _ := startSturdy(t, parseConfig(t, edgeConfig, map[string]string{"r1": rs[0].Addr}))
	addr := strings.TrimPrefix(url, "http://")
	for _, target := range []string{
		"/api/v4/projects/group%2Frepo",
		"/api/v4/projects/group%2frepo/files/a%5Cb?ref=main",
		"/api/vhosts/%2F/queues",
		"/search?q=100%&x=%zz&y=a+b&z=%2F",
		"/plain?%",
	} {
		r := rawSend(t, "127.0.13.10", addr, "GET "+target+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 5*time.Second)
		if r.first() != 200 {
			t.Errorf("%s: %q", target, r.text)
		}
		if !strings.Contains(rs[0].Received(), "GET "+target+" HTTP/1.1\r\n") {
			t.Errorf("%s did not reach the backend unchanged:\n%s", target, rs[0].Received())
		}
	}
	before := len(rs[0].Received())
	for _, target := range []string{"/@scope%2fpkg", "/files/a%5Cb", "/x/..%2F..%2Fetc"} {
		r := rawSend(t, "127.0.13.11", addr, "GET "+target+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 5*time.Second)
		if r.first() != 400 {
			t.Errorf("%s on a route without allow_encoded_slashes: %q", target, r.text)
		}
	}
	if len(rs[0].Received()) != before {
		t.Errorf("a refused encoded slash reached the backend:\n%s", rs[0].Received()[before:])
	}
	if n := s.edge.Count(edge.RejectSlash); n != 3 {
		t.Errorf("encoded_slash counted %d, want 3", n)
	}
	hostsClean(t, s)
}

// Item 9: what the edge decided is in /metrics and /api/status by reason,
// and its answers are in sturdy_requests_total under route _edge.
func TestEdgeDecisionsAreExported(t *testing.T) {
	t.Parallel()
	rs := recorders(t, 1)
	s, url, _ := startSturdy(t, parseConfig(t, edgeConfig, map[string]string{"r1": rs[0].Addr}))
	addr := strings.TrimPrefix(url, "http://")
	for i, req := range []string{
		"GET /a%00b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",                                     // nul
		"GET /a%2Fb HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",                                     // encoded_slash (route app)
		chunkedPost("/u", "zz\r\nabc\r\n0\r\n\r\n"),                                                       // malformed_body
		"POST /u HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", // ambiguous_framing
	} {
		if r := rawSend(t, fmt.Sprintf("127.0.13.%d", 20+i), addr, req, 5*time.Second); r.first() != 400 {
			t.Errorf("request %d: %q", i, r.text)
		}
	}
	// Raw non-ASCII bytes are percent-encoded and forwarded.
	if r := rawSend(t, "127.0.13.29", addr, "GET /caf\xc3\xa9 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 5*time.Second); r.first() != 200 {
		t.Errorf("a non-ASCII path: %q", r.text)
	}
	_, body := adminGet(t, s, "/metrics")
	for prefix, want := range map[string]string{
		`sturdy_edge_decisions_total{decision="rejected",reason="nul"}`:                   "1",
		`sturdy_edge_decisions_total{decision="rewritten",reason="reencoded"}`:            "1",
		`sturdy_edge_decisions_total{decision="rejected",reason="encoded_slash"}`:         "1",
		`sturdy_edge_decisions_total{decision="client_fault",reason="malformed_body"}`:    "1",
		`sturdy_edge_decisions_total{decision="client_fault",reason="ambiguous_framing"}`: "1",
		`sturdy_edge_decisions_total{decision="client_fault",reason="body_timeout"}`:      "0",
		`sturdy_requests_total{code_class="4xx",route="_edge"}`:                           "2",
		`sturdy_requests_total{code_class="2xx",route="app"}`:                             "1",
		`sturdy_requests_total{code_class="4xx",route="app"}`:                             "2",
	} {
		if got := metric(t, body, prefix); got != want {
			t.Errorf("%s = %s, want %s", prefix, got, want)
		}
	}
	if strings.Contains(body, "127.0.13.") {
		t.Error("a client address became a label")
	}
	code, js := adminGet(t, s, "/api/status")
	if code != 200 || !strings.Contains(js, `"malformed_body":1`) || !strings.Contains(js, `"ambiguous_framing":1`) {
		t.Errorf("/api/status has no edge decisions: %d %s", code, js)
	}
	if got := rs[0].Received(); strings.Count(got, " HTTP/1.1\r\n") != 1 || !strings.Contains(got, "GET /caf%C3%A9 HTTP/1.1") {
		t.Errorf("the backend should have received the re-encoded request alone:\n%s", got)
	}
}

// Item 8: a pool that points back at sturdy's own listener is answered
// 508 after a couple of passes, not a thousand hops.
func TestLoopIsDetected(t *testing.T) {
	t.Parallel()
	self := freeAddr(t)
	s, _, _ := startSturdy(t, parseConfig(t, `
admin: { listen: "off" }
listeners: [ { name: web, listen: "{{self}}" } ]
routes: [ { name: loop, default: true, pool: self } ]
pools: [ { name: self, hosts: [ { addr: "{{self}}" } ] } ]
`, map[string]string{"self": self}))
	for i := range 3 {
		r := rawSend(t, fmt.Sprintf("127.0.13.%d", 30+i), self, "GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 5*time.Second)
		if r.first() != http.StatusLoopDetected {
			t.Fatalf("a looping request: %q", r.text)
		}
	}
	if n := s.edge.Count(edge.RejectLoop); n != 3 {
		t.Errorf("loops counted %d, want 3 (one per client request)", n)
	}
	// Each client request passed twice through the route, then the third
	// pass was refused at the edge.
	var v view.Route
	s.Runtime().Routes[0].Stats.View(&v)
	if n := v.Requests["5xx"]; n != 6 {
		t.Errorf("the route answered %d requests for 3 looping ones, want 6 (%v)", n, v.Requests)
	}
}

// closingBackend answers each request on a connection, then closes the
// connection without saying so (no Connection: close), as some app
// servers do; a POST it reads whole and then closes without answering,
// when it is not the first request on the connection.
type closingBackend struct {
	addr  string
	gets  atomic.Int64
	posts atomic.Int64
	conns atomic.Int64
}

func newClosingBackend(t *testing.T, ip string) *closingBackend {
	b := &closingBackend{}
	b.addr = rawBackend(t, ip, func(c net.Conn) {
		b.conns.Add(1)
		b.serve(c)
	})
	return b
}

func (b *closingBackend) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	for n := 0; ; n++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		if req.Method == http.MethodPost {
			b.posts.Add(1)
			if n > 0 {
				return // the body was read, and no answer comes
			}
		} else {
			b.gets.Add(1)
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		if req.URL.Path != "/keep" {
			// real: close a moment later: long enough for the proxy to
			// take the connection for its next request, as a busy app
			// server does (the keep-alive race is the kernel's timing).
			time.Sleep(2 * time.Millisecond)
			return
		}
	}
}

// Item 6: a backend that closes each connection right after answering
// costs no 502s: a request that fails on a reused connection before any
// of the response arrived is sent once more on a new one, charged to
// nobody. A POST whose body was sent is never sent twice.
func TestKeepAliveRaceIsRetried(t *testing.T) {
	t.Parallel()
	const cfg = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: app, default: true, pool: app } ]
pools:
  - name: app
    hosts: [ { addr: "{{b}}" } ]
    health: { passive: { window: 30s, min_requests: 5, min_clients: 1 } }
`
	b := newClosingBackend(t, "127.1.13.1")
	s, url, _ := startSturdy(t, parseConfig(t, cfg, map[string]string{"b": b.addr}))
	clients, each := 5, 100
	if testing.Short() {
		each = 40 // the race still happens dozens of times
	}
	var bad atomic.Int64
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := clientFrom(fmt.Sprintf("127.0.13.%d", 40+c))
			for range each {
				resp, err := cl.Get(url + "/x")
				if err != nil {
					bad.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := bad.Load(); n != 0 {
		t.Errorf("%d of %d GETs failed", n, clients*each)
	}
	retried := staleRetries(s)
	t.Logf("%d GETs, %d backend connections, %d sent again after the race", clients*each, b.conns.Load(), retried)
	if retried == 0 {
		t.Error("the race never happened: the test proves nothing")
	}
	// A request sent into the race never reached the backend's
	// application: each GET was served exactly once.
	if got := b.gets.Load(); got != int64(clients*each) {
		t.Errorf("the backend served %d GETs for %d requests", got, clients*each)
	}
	hostsClean(t, s)

	// A POST on a reused connection, whose body the backend read before
	// closing without an answer: it may have been acted on, so it is not
	// sent again, on this host or another. (A host of its own: the one
	// above was seen closing connections, and POSTs to it get new ones.)
	b = newClosingBackend(t, "127.1.13.2")
	_, url, _ = startSturdy(t, parseConfig(t, cfg, map[string]string{"b": b.addr}))
	conn := rawDial(t, "127.0.13.50", strings.TrimPrefix(url, "http://"))
	defer conn.Close()
	io.WriteString(conn, "GET /keep HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(conn)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /keep: %v %v", resp, err)
	}
	io.CopyN(io.Discard, br, 2)
	posts := b.posts.Load()
	io.WriteString(conn, "POST /order HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("a POST the backend dropped after reading: %d, want 502", resp.StatusCode)
	}
	if n := b.posts.Load() - posts; n != 1 {
		t.Errorf("the backend received the POST %d times, want once", n)
	}
}

// staleRetries sums the requests the routes' upstream clients sent again
// after the keep-alive race.
func staleRetries(s *Server) uint64 {
	type counter interface{ StaleRetries() uint64 }
	seen := map[counter]bool{}
	var n uint64
	for _, rt := range s.Runtime().Routes {
		if c, ok := rt.Upstream.(counter); ok && !seen[c] {
			seen[c] = true
			n += c.StaleRetries()
		}
	}
	return n
}

// dyingBackend keeps connections alive, but reads a request for /die and
// closes the connection without an answer: a request that kills
// backends.
type dyingBackend struct {
	addr string
	dies atomic.Int64
}

func newDyingBackend(t *testing.T, ip string) *dyingBackend {
	b := &dyingBackend{}
	b.addr = rawBackend(t, ip, func(c net.Conn) {
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			if req.URL.Path == "/die" {
				b.dies.Add(1)
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	return b
}

// Item 6's limit: the keep-alive race's second send never multiplies a
// request that kills backends. Every connection is warm (reused), so each
// send of /die meets a reused connection first; it goes to the other
// host rather than to the same one again, and each request reaches
// backends at most twice in all, gets 502, and is charged to no host.
func TestKillerRequestIsNotMultipliedByResends(t *testing.T) {
	t.Parallel()
	b1, b2 := newDyingBackend(t, "127.1.13.71"), newDyingBackend(t, "127.1.13.72")
	s, url, _ := startSturdy(t, parseConfig(t, `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: app, default: true, pool: app, retry: { tries: 3 } } ]
pools:
  - name: app
    hosts: [ { addr: "{{b1}}" }, { addr: "{{b2}}" } ]
    health: { passive: { window: 30s, min_requests: 5, min_clients: 1 } }
`, map[string]string{"b1": b1.addr, "b2": b2.addr}))
	const killers = 10
	for i := range killers {
		cl := clientFrom(fmt.Sprintf("127.0.13.%d", 80+i))
		// Warm connections to both hosts.
		for range 4 {
			if resp, _ := get(t, cl, url+"/ok"); resp.StatusCode != 200 {
				t.Fatalf("warm-up: %d", resp.StatusCode)
			}
		}
		if resp, _ := get(t, cl, url+"/die"); resp.StatusCode != http.StatusBadGateway {
			t.Errorf("a request that kills backends: %d, want 502", resp.StatusCode)
		}
	}
	if n := b1.dies.Load() + b2.dies.Load(); n > 2*killers {
		t.Errorf("the killing requests reached backends %d times, at most %d (two each)", n, 2*killers)
	}
	t.Logf("%d killing requests reached backends %d times; %d sent again after a race", killers, b1.dies.Load()+b2.dies.Load(), staleRetries(s))
	// The attempts are counted (they happened) but held against no host:
	// each is the request's.
	for _, h := range s.Runtime().Pools[0].Hosts {
		if h.Mode() != health.Healthy || h.Window(time.Now()).Failures != 0 {
			t.Errorf("host %s: %s, %d failures in its window", h.Addr, h.Mode(), h.Window(time.Now()).Failures)
		}
	}
	if n := s.Monitor().AttributedCount(health.AttrHost); n != 0 {
		t.Errorf("%d failures attributed to hosts", n)
	}
	// Each killing request failed once on each backend: two attempts,
	// both the request's.
	if n := s.Monitor().AttributedCount(health.AttrRequest); n != 2*killers {
		t.Errorf("%d failures attributed to the request, want %d", n, 2*killers)
	}
}
