package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

const basicConfig = `
admin: { listen: "off" }
trusted_proxies: [ 127.0.0.8 ]
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  - { name: site, default: true, pool: web, timeouts: { connect: 1s, response_header: 2s } }
pools:
  - name: web
    hosts: [ { addr: "{{b1}}" } ]
`

// echoHeaders answers with the request headers as JSON.
func echoHeaders() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Clone()
		h.Set("Host", r.Host)
		w.Header().Set("Connection", "X-Secret")
		w.Header().Set("X-Secret", "backend internal")
		w.Header().Set("Keep-Alive", "timeout=5")
		json.NewEncoder(w).Encode(h)
	})
}

func TestHeaderHygiene(t *testing.T) {
	t.Parallel()
	b := backend(t, "127.1.0.1", echoHeaders())
	_, url, _ := startSturdy(t, parseConfig(t, basicConfig, map[string]string{"b1": addr(b)}))

	decode := func(body string) http.Header {
		var h http.Header
		if err := json.Unmarshal([]byte(body), &h); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		return h
	}
	t.Run("untrusted client", func(t *testing.T) {
		resp, body := get(t, clientFrom("127.0.0.7"), url+"/x",
			"Host", "shop.example.com",
			"Connection", "X-Forwarded-For, X-Drop-Me",
			"X-Drop-Me", "1",
			"X-Forwarded-For", "6.6.6.6",
			"X-Forwarded-Host", "evil.example",
			"X-Real-IP", "6.6.6.6",
			"Forwarded", "for=6.6.6.6",
			"Proxy-Authorization", "Basic secret",
			"Keep-Alive", "300",
			"Via", "1.0 upstream-cdn",
			"User-Agent", "test-agent/1",
		)
		h := decode(body)
		want := map[string]string{
			"X-Forwarded-For":   "127.0.0.7",
			"X-Real-Ip":         "127.0.0.7",
			"X-Forwarded-Host":  "shop.example.com",
			"X-Forwarded-Proto": "http",
			"Host":              "shop.example.com",
		}
		for k, v := range want {
			if got := strings.Join(h[k], ","); got != v {
				t.Errorf("%s = %q, want %q", k, got, v)
			}
		}
		if got := h.Values("Via"); strings.Join(got, ",") != "1.0 upstream-cdn,1.1 sturdy" {
			t.Errorf("Via = %q", got)
		}
		for _, k := range []string{"X-Drop-Me", "Forwarded", "Proxy-Authorization", "Keep-Alive", "Connection"} {
			if _, ok := h[k]; ok {
				t.Errorf("%s was forwarded: %q", k, h[k])
			}
		}
		if got := h.Get("User-Agent"); got != "test-agent/1" {
			t.Errorf("User-Agent = %q, want the client's", got)
		}
		if resp.Header.Get("X-Secret") != "" || resp.Header.Get("Keep-Alive") != "" {
			t.Errorf("response hop-by-hop headers leaked: %v", resp.Header)
		}
		if resp.Header.Get("Via") != "1.1 sturdy" {
			t.Errorf("response Via = %q", resp.Header.Get("Via"))
		}
	})
	t.Run("no user agent added", func(t *testing.T) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if h := decode(string(b)); len(h["User-Agent"]) > 0 && h.Get("User-Agent") != "" {
			t.Errorf("proxy added User-Agent %q", h["User-Agent"])
		}
	})
	t.Run("trusted proxy", func(t *testing.T) {
		_, body := get(t, clientFrom("127.0.0.8"), url+"/x",
			"X-Forwarded-For", "203.0.113.5",
			"X-Forwarded-Proto", "https",
		)
		h := decode(body)
		if got := h.Get("X-Forwarded-For"); got != "203.0.113.5, 127.0.0.8" {
			t.Errorf("X-Forwarded-For = %q", got)
		}
		if got := h.Get("X-Forwarded-Proto"); got != "https" {
			t.Errorf("X-Forwarded-Proto = %q", got)
		}
	})
}

func TestNoContentTypeIsNotSniffed(t *testing.T) {
	t.Parallel()
	b := backend(t, "127.1.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = nil
		io.WriteString(w, "<html><body>hi</body></html>")
	}))
	_, url, _ := startSturdy(t, parseConfig(t, basicConfig, map[string]string{"b1": addr(b)}))
	resp, _ := get(t, http.DefaultClient, url+"/")
	if ct, ok := resp.Header["Content-Type"]; ok {
		t.Fatalf("Content-Type %q was added", ct)
	}
}

func TestStreamingFirstBytesBeforeBackendFinishes(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	b := backend(t, "127.1.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "data: second\n\n")
	}))
	defer close(release)
	_, url, _ := startSturdy(t, parseConfig(t, basicConfig, map[string]string{"b1": addr(b)}))
	resp, err := http.Get(url + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
}

func TestTrailersAreKept(t *testing.T) {
	t.Parallel()
	b := backend(t, "127.1.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Checksum")
		io.WriteString(w, "body")
		w.Header().Set("X-Checksum", "abc123")
	}))
	_, url, _ := startSturdy(t, parseConfig(t, basicConfig, map[string]string{"b1": addr(b)}))
	resp, err := http.Get(url + "/")
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := resp.Trailer.Get("X-Checksum"); got != "abc123" {
		t.Fatalf("trailer = %q, want abc123 (trailers %v)", got, resp.Trailer)
	}
}

// wsEcho accepts an Upgrade: websocket request and echoes raw bytes; the
// framing does not matter to a proxy, only that both directions flow.
func wsEcho() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" {
			http.Error(w, "want upgrade", http.StatusBadRequest)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		brw.Flush()
		io.Copy(conn, brw)
	})
}

func TestWebSocketUpgradeEcho(t *testing.T) {
	t.Parallel()
	b := backend(t, "127.1.0.1", wsEcho())
	_, url, _ := startSturdy(t, parseConfig(t, basicConfig, map[string]string{"b1": addr(b)}))
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Upgrade") != "websocket" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	for _, msg := range []string{"hello", "world"} {
		io.WriteString(conn, msg)
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(br, buf); err != nil || string(buf) != msg {
			t.Fatalf("echo %q: got %q, %v", msg, buf, err)
		}
	}
	// A goroutine dump says which direction of the splice is where.
	var stacks strings.Builder
	pprof.Lookup("goroutine").WriteTo(&stacks, 1)
	for _, f := range []string{"proxy.(*upgraded).copyToBackend", "proxy.(*upgraded).copyFromBackend"} {
		if !strings.Contains(stacks.String(), f) {
			t.Errorf("no goroutine in %s while the splice runs", f)
		}
	}
}

const twoRouteConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  - { name: dead, path: /dead/, pool: dead, timeouts: { connect: 1s } }
  - { name: slow, path: /slow/, pool: slow, timeouts: { response_header: 200ms } }
  - { name: upload, path: /upload/, pool: slow, max_body_bytes: 1KiB }
pools:
  - { name: dead, hosts: [ { addr: "{{dead}}" } ] }
  - { name: slow, hosts: [ { addr: "{{slow}}" } ] }
`

func TestUpstreamErrorsNameRouteAndClass(t *testing.T) {
	t.Parallel()
	slow := backend(t, "127.1.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/upload/" {
			n, err := io.Copy(io.Discard, r.Body)
			fmt.Fprintf(w, "read %d %v", n, err)
			return
		}
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	}))
	resetter := backend(t, "127.1.0.3", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, _ := http.NewResponseController(w).Hijack()
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	}))
	_, url, _ := startSturdy(t, parseConfig(t, twoRouteConfig, map[string]string{"dead": addr(resetter), "slow": addr(slow)}))

	resp, body := get(t, http.DefaultClient, url+"/dead/x")
	if resp.StatusCode != 502 || !strings.Contains(body, `route "dead"`) || !strings.Contains(body, "reset") {
		t.Errorf("dead: %d %q", resp.StatusCode, body)
	}
	if strings.Contains(body, addr(resetter)) || strings.Contains(body, "127.") {
		t.Errorf("error body leaks an internal address: %q", body)
	}
	// The backend answers 200 after 5 s: a 504 for response_timeout can
	// only be the route's 200 ms (the default is 30 s), whatever the
	// machine's speed.
	resp, body = get(t, http.DefaultClient, url+"/slow/x")
	if resp.StatusCode != 504 || !strings.Contains(body, `route "slow"`) || !strings.Contains(body, "response_timeout") {
		t.Errorf("slow: %d %q", resp.StatusCode, body)
	}

	resp, body = get(t, http.DefaultClient, url+"/nowhere", "Host", "unknown.example")
	if resp.StatusCode != 404 || !strings.Contains(body, "no route") {
		t.Errorf("no route: %d %q", resp.StatusCode, body)
	}

	big := strings.Repeat("x", 2048)
	resp, err := http.Post(url+"/upload/", "text/plain", strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Errorf("declared oversize body: %d, want 413", resp.StatusCode)
	}
	// Chunked: the size is only known while reading.
	req, _ := http.NewRequest("POST", url+"/upload/", io.MultiReader(strings.NewReader(big)))
	req.ContentLength = -1
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Errorf("chunked oversize body: %d %q, want 413", resp.StatusCode, b)
	}
	resp, err = http.Post(url+"/upload/", "text/plain", strings.NewReader("small"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "read 5 <nil>" {
		t.Errorf("small body: %d %q", resp.StatusCode, b)
	}
}

func TestConnectFailureIsRetriedOnAnotherHost(t *testing.T) {
	t.Parallel()
	live := backend(t, "127.1.0.1", named("live"))
	cfg := parseConfig(t, `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: site, default: true, pool: web } ]
pools:
  - name: web
    hosts: [ { addr: "{{dead}}" }, { addr: "{{live}}" } ]
`, map[string]string{"dead": deadAddr(t), "live": addr(live)})
	_, url, _ := startSturdy(t, cfg)
	for i := range 20 {
		resp, body := get(t, http.DefaultClient, fmt.Sprintf("%s/%d", url, i))
		if resp.StatusCode != 200 || !strings.HasPrefix(body, "live") {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
	}
	// A POST whose body was never read by anyone is safe to send elsewhere.
	for i := range 5 {
		resp, err := http.Post(fmt.Sprintf("%s/post%d", url, i), "text/plain", strings.NewReader("payload"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("post %d: %d", i, resp.StatusCode)
		}
	}
}

func TestClientCancelReachesBackendAndFreesHost(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 1)
	cancelled := make(chan struct{}, 1)
	b := backend(t, "127.1.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-r.Context().Done()
		cancelled <- struct{}{}
	}))
	s, url, _ := startSturdy(t, parseConfig(t, basicConfig, map[string]string{"b1": addr(b)}))
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/wait", nil)
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("client error %v", err)
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("backend never saw the cancellation")
	}
	host := s.Runtime().Pool("web").Hosts[0]
	testutil.Eventually(5*time.Second, func() bool { return host.InFlight() == 0 })
	if n := host.InFlight(); n != 0 {
		t.Fatalf("host still has %d in flight", n)
	}
}

// A client that hangs up in the middle of a response body is the
// client's doing, whether the body streams through sturdy's buffer
// (chunked, flushed) or is spliced (a declared length): the backend is
// charged nothing, whichever side notices first (the write to the client
// failing, or the front end seeing the client leave and canceling the
// request while the backend's body is being read).
func TestClientHangingUpMidBodyChargesNoHost(t *testing.T) {
	t.Parallel()
	// The backend either sends 2 MB at once, more than the client reads,
	// so that sturdy's write to the client fails, or sends 64 KB and
	// stalls until sturdy, seeing the client leave, cancels it mid-body.
	b := backend(t, "127.1.0.11", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		piece := bytes.Repeat([]byte("s"), 32<<10)
		if strings.HasPrefix(r.URL.Path, "/fixed") {
			w.Header().Set("Content-Length", strconv.Itoa(64*len(piece)))
		}
		for i := range 64 {
			if i == 2 && strings.HasSuffix(r.URL.Path, "/stall") {
				select {
				case <-r.Context().Done():
				case <-time.After(10 * time.Second): // a bound should sturdy never cancel
				}
				return
			}
			if _, err := w.Write(piece); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	s, url, _ := startSturdy(t, parseConfig(t, basicConfig, map[string]string{"b1": addr(b)}))
	hostport := strings.TrimPrefix(url, "http://")
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := []string{"/chunked", "/fixed"}[i%2] + []string{"", "/stall"}[i/2%2]
			c := rawDial(t, fmt.Sprintf("127.0.3.%d", 1+i), hostport)
			defer c.Close()
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			// Each hangs up with unread bytes (a reset).
			buf := make([]byte, 40<<10)
			if _, err := io.ReadFull(c, buf); err != nil {
				t.Errorf("%s: %v", path, err)
			}
		}()
	}
	wg.Wait()
	host := s.Runtime().Pool("web").Hosts[0]
	if !testutil.Eventually(5*time.Second, func() bool { return host.InFlight() == 0 }) {
		t.Fatalf("host still has %d in flight", host.InFlight())
	}
	hostsClean(t, s)
}

func TestHashByHeaderIsSticky(t *testing.T) {
	t.Parallel()
	var backends []string
	for i := 1; i <= 3; i++ {
		backends = append(backends, addr(backend(t, fmt.Sprintf("127.1.0.%d", i), named(fmt.Sprintf("b%d", i)))))
	}
	cfg := parseConfig(t, `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: site, default: true, pool: web } ]
pools:
  - name: web
    balance: hash
    hash_key: header:X-User
    hosts: [ { addr: "{{b1}}" }, { addr: "{{b2}}" }, { addr: "{{b3}}" } ]
`, map[string]string{"b1": backends[0], "b2": backends[1], "b3": backends[2]})
	_, url, _ := startSturdy(t, cfg)
	seen := map[string]bool{}
	for u := range 30 {
		user := fmt.Sprintf("user-%d", u)
		_, first := get(t, http.DefaultClient, url+"/", "X-User", user)
		for range 3 {
			if _, again := get(t, http.DefaultClient, url+"/", "X-User", user); again[:2] != first[:2] {
				t.Fatalf("%s went to %s then %s", user, first[:2], again[:2])
			}
		}
		seen[first[:2]] = true
	}
	if len(seen) != 3 {
		t.Fatalf("30 users landed on %d backends", len(seen))
	}
}
