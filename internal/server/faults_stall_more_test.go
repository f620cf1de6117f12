package server

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/edge"
	"github.com/sturdyproxy/sturdy/internal/outcome"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

const stallMoreConfig = `
admin: { listen: "off" }
log: { aggregate_interval: 1h }
listeners: [ { name: web, listen: "127.0.0.1:0", read_header_timeout: 300ms } ]
routes:
  - { name: app, default: true, pool: app, buffer_request_body: 1KiB, request_buffering: false, timeouts: { client_body: 300ms, client_send: 300ms } }
pools:
  - name: app
    hosts: [ { addr: "{{r1}}" }, { addr: "{{r2}}" } ]
    health: { passive: { window: 30s, min_requests: 5, min_clients: 2 } }
`

// Item 4, the other places a client can stall: in the request head (all
// at once, or a byte at a time), in a chunked body (inside a chunk's data,
// in a size line, before the last chunk, in the trailers), buffered or
// streamed. Each is cut within the timeouts, from several client
// addresses at once; the buffered ones never reach a backend, the
// streamed ones release their backend connection; no host is charged.
func TestStallsEverywhereAreCut(t *testing.T) {
	t.Parallel()
	rs := recorders(t, 2)
	s, url, _ := startSturdy(t, parseConfig(t, stallMoreConfig, map[string]string{"r1": rs[0].Addr, "r2": rs[1].Addr}))
	addr := strings.TrimPrefix(url, "http://")
	big := strings.Repeat("b", 2048)
	cases := []struct {
		name     string
		req      string
		drip     bool // send the rest a byte every 100ms, for ever
		want     int  // status; 0: closed without an answer, -1: net/http's choice (none, 400 or 408)
		streamed bool
	}{
		{name: "head cut short", req: "GET /h HTTP/1.1\r\nHost: x\r\nX-Slow: ", want: -1},
		{name: "head a byte at a time", req: "GET /h HTTP/1.1\r\n", drip: true, want: -1},
		{name: "inside chunk data", req: chunkedPost("/stall", "a\r\nabc"), want: 408},
		{name: "in a size line", req: chunkedPost("/stall", "3\r\nabc\r\n1"), want: 408},
		{name: "before the last chunk", req: chunkedPost("/stall", "3\r\nabc\r\n"), want: 408},
		{name: "in the trailers", req: chunkedPost("/stall", "3\r\nabc\r\n0\r\nX-Sum: 1\r\n"), want: 408},
		{name: "fixed length", req: "POST /stall HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc", want: 408},
		{name: "streamed chunked", req: chunkedPost("/stream", "800\r\n"+big+"\r\n400\r\nabc"), want: 408, streamed: true},
		{name: "streamed fixed length", req: "POST /stream HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + big, want: 408, streamed: true},
	}
	var wg sync.WaitGroup
	errs := make(chan string, 2*len(cases))
	for round := range 2 {
		for i, c := range cases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				conn := rawDial(t, fmt.Sprintf("127.0.13.%d", 70+round*20+i), addr)
				defer conn.Close()
				start := time.Now()
				io.WriteString(conn, c.req)
				if c.drip {
					stop := make(chan struct{})
					defer close(stop)
					go func() {
						for {
							select {
							case <-stop:
								return
							case <-time.After(100 * time.Millisecond):
								if _, err := io.WriteString(conn, "X"); err != nil {
									return
								}
							}
						}
					}()
				}
				r := rawRead(conn, 10*time.Second)
				st := r.first()
				if c.want == -1 && (st == 0 || st == 400 || st == 408) {
					st = -1
				}
				if !r.closed || st != c.want {
					errs <- fmt.Sprintf("%s: status %d (want %d), closed %v after %s: %q", c.name, st, c.want, r.closed, time.Since(start), r.text)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	streamed := 0
	for _, c := range cases {
		if c.streamed {
			streamed++
		}
	}
	for _, r := range rs {
		got, _ := r.Conns()
		for _, b := range got {
			if strings.Contains(b, "/h ") {
				t.Errorf("a stalled head reached a backend: %q", b)
			}
			if strings.Contains(b, "/stall") {
				t.Errorf("a stalled buffered body reached a backend: %q", b)
			}
		}
	}
	if got := s.edge.Count(edge.FaultBodyTimeout); got != uint64(2*(len(cases)-2)) {
		t.Errorf("body_timeout counted %d, want %d", got, 2*(len(cases)-2))
	}
	if got := allAttempts(s, outcome.ClientBodyError); got != uint64(2*streamed) {
		t.Errorf("%d attempts classed client_body_error, want %d (the streamed ones)", got, 2*streamed)
	}
	hostsClean(t, s)
	// Released at once: the recorder counts the close when it reads it, a
	// moment after the client's 408.
	if !testutil.Eventually(5*time.Second, func() bool { return rs[0].Open()+rs[1].Open() == 0 }) {
		t.Errorf("%d backend connections still open after the stalls were cut", rs[0].Open()+rs[1].Open())
	}
}

// Item 4 for files: a client that stops reading a file sturdy serves
// itself (sent with sendfile) is cut after the send timeout too, and
// counted; one that reads slowly but steadily gets the file whole.
func TestStalledFileReadersAreCut(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	const size = 24 << 20
	if err := os.WriteFile(filepath.Join(root, "big.bin"), bytes.Repeat([]byte("f"), size), 0o644); err != nil {
		t.Fatal(err)
	}
	s, url, _ := startSturdy(t, parseConfig(t, `
admin: { listen: "off" }
log: { aggregate_interval: 1h }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  - name: files
    default: true
    static: { root: "{{root}}" }
    timeouts: { client_send: 1s }
pools: [ { name: unused, hosts: [ { addr: "{{dead}}" } ] } ]
`, map[string]string{"root": root, "dead": deadAddr(t)}))
	// client_send is 1s, 200 times the moving reader's pause below: at
	// 300ms a reader descheduled on a loaded machine (load 20 on 2 cores)
	// was once cut while moving.
	addr := strings.TrimPrefix(url, "http://")
	const stalled = 4
	var held []net.Conn
	for i := range stalled {
		c := rawDial(t, fmt.Sprintf("127.0.13.%d", 120+i), addr)
		defer c.Close()
		io.WriteString(c, "GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
		held = append(held, c)
	}
	if !testutil.Eventually(10*time.Second, func() bool { return s.edge.Count(edge.FaultSendTimeout) == stalled }) {
		t.Fatalf("send_timeout counted %d, want %d", s.edge.Count(edge.FaultSendTimeout), stalled)
	}
	// Cut: once the client reads again it gets what the sockets held,
	// then the end, far short of the file.
	for _, c := range held {
		r := rawRead(c, 5*time.Second)
		if !r.closed || len(r.text) >= size {
			t.Errorf("a stalled file reader got %d bytes, closed %v: not cut", len(r.text), r.closed)
		}
	}
	// Slow but moving: 24 MiB read 256 KiB at a time every 5 ms.
	c := rawDial(t, "127.0.13.130", addr)
	defer c.Close()
	io.WriteString(c, "GET /big.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 256<<10)
	total := 0
	for {
		n, err := c.Read(buf)
		total += n
		if err != nil {
			break
		}
		// real: a slow reader against the send timeout, which sturdy
		// enforces with socket deadlines on the kernel's clock.
		time.Sleep(5 * time.Millisecond)
	}
	if total < size {
		t.Errorf("a slow reader got %d of %d bytes (and the head): cut while moving", total, size)
	}
}
