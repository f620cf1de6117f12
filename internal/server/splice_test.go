package server

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

// Large fixed-length bodies move from the backend's socket to the
// client's without a copy through sturdy (splice on Linux). These tests
// hold that path to the same rules as the copy: the bytes arrive whole,
// the backend connection is reused, a client that goes away is not the
// backend's fault, and a backend that breaks mid-body is.
func TestLargeBodiesPassWholeAndAreChargedRight(t *testing.T) {
	t.Parallel()
	body := bytes.Repeat([]byte("0123456789abcdef"), (4<<20)/16) // 4 MiB
	var conns sync.Map                                           // the backend's client addresses
	cut := make(chan struct{})                                   // the client has the half: end the connection
	be := backend(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		n = min(max(n, 0), len(body))
		conns.Store(r.RemoteAddr, true)
		switch r.URL.Path {
		case "/whole":
			w.Header().Set("Content-Length", strconv.Itoa(n))
			w.Write(body[:n])
		case "/short", "/reset":
			// Promise n bytes, send half, then end the connection:
			// closed early, or reset.
			c, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			fmt.Fprintf(brw, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", n)
			brw.Write(body[:n/2])
			brw.Flush()
			select {
			case <-cut:
			case <-time.After(10 * time.Second): // a bound should the test fail first
			}
			if r.URL.Path == "/reset" {
				c.(*net.TCPConn).SetLinger(0)
			}
			c.Close()
		}
	}))
	cfg := parseConfig(t, `
admin: { listen: "off" }
listeners: [ { name: web, listen: 127.0.0.1:0 } ]
routes: [ { name: site, default: true, pool: web } ]
pools:
  - name: web
    hosts: [ { addr: "{{be}}" } ]
    health: { passive: { min_requests: 1000 } }
`, map[string]string{"be": addr(be)})
	s, base, _ := startSturdy(t, cfg)
	attempts := func() map[string]uint64 { return s.Status().Pools[0].Hosts[0].Attempts }

	c := clientFrom("127.0.0.2")
	for _, n := range []int{100 << 10, 4 << 20, 17 << 10, 1 << 10} {
		resp, got := get(t, c, base+"/whole?n="+strconv.Itoa(n))
		if resp.StatusCode != 200 || sha256.Sum256([]byte(got)) != sha256.Sum256(body[:n]) {
			t.Fatalf("n=%d: status %d, %d bytes, want the %d bytes sent", n, resp.StatusCode, len(got), n)
		}
	}
	n := 0
	conns.Range(func(any, any) bool { n++; return true })
	if n != 1 {
		t.Errorf("backend saw %d connections for 4 sequential requests; want 1 (kept alive)", n)
	}

	// A client that reads 64 KiB of 4 MiB and hangs up.
	cc, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}}).Dial("tcp", s.Addr("web"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(cc, "GET /whole?n=%d HTTP/1.1\r\nHost: x\r\n\r\n", 4<<20)
	resp, err := http.ReadResponse(bufio.NewReader(cc), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("hang-up client: %v %v", resp, err)
	}
	io.CopyN(io.Discard, resp.Body, 64<<10)
	cc.(*net.TCPConn).SetLinger(0)
	cc.Close()
	if !testutil.Eventually(5*time.Second, func() bool { return s.Status().Routes[0].Requests["499"] == 1 }) {
		t.Fatalf("the hang-up was not seen: %v", s.Status().Routes[0].Requests)
	}
	if a := attempts(); a["body_error"] != 0 {
		t.Fatalf("a client that hung up was charged to the backend: %v", a)
	}

	// A backend that closes or resets half-way through a large body.
	for i, path := range []string{"/short", "/reset"} {
		resp, err := c.Get(base + path + "?n=" + strconv.Itoa(2<<20))
		if err != nil {
			t.Fatal(err)
		}
		half := make([]byte, 1<<20)
		if _, err := io.ReadFull(resp.Body, half); err != nil {
			t.Fatalf("%s: the half the backend sent did not arrive: %v", path, err)
		}
		cut <- struct{}{}
		rest, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := append(half, rest...); err == nil || len(got) >= 2<<20 {
			t.Fatalf("%s: the client got %d bytes and no error: a broken body must not look complete", path, len(got))
		}
		if a := attempts(); a["body_error"] != uint64(i+1) {
			t.Fatalf("%s: attempts %v, want body_error %d", path, a, i+1)
		}
	}
}
