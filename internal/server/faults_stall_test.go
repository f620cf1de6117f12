package server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/edge"
	"github.com/sturdyproxy/sturdy/internal/outcome"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

const stallConfig = `
admin: { listen: "off" }
log: { aggregate_interval: 1h }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  - { name: files, default: true, pool: files, request_buffering: false, timeouts: { client_body: 300ms, client_send: 300ms } }
pools:
  - name: files
    hosts: [ { addr: "{{b1}}" }, { addr: "{{b2}}" } ]
    health: { passive: { window: 30s, min_requests: 5, min_clients: 2 } }
`

// fileBackend serves /download?size=N (N bytes, written as fast as the
// connection takes them) and /upload (reads the body, answers its length);
// it counts its open connections and the downloads cut short.
type fileBackend struct {
	addr  string
	open  atomic.Int64
	cut   atomic.Int64 // downloads whose connection broke before the end
	reads atomic.Int64 // upload bytes read
}

func newFileBackend(t *testing.T, ip string) *fileBackend {
	fb := &fileBackend{}
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	fb.addr = ln.Addr().String()
	srv := &http.Server{Handler: fb, ConnState: func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			fb.open.Add(1)
		case http.StateClosed, http.StateHijacked:
			fb.open.Add(-1)
		}
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return fb
}

func (fb *fileBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/download":
		size, _ := strconv.Atoi(r.URL.Query().Get("size"))
		w.Header().Set("Content-Length", strconv.Itoa(size))
		chunk := make([]byte, 64<<10)
		for sent := 0; sent < size; sent += len(chunk) {
			if _, err := w.Write(chunk[:min(len(chunk), size-sent)]); err != nil {
				fb.cut.Add(1)
				return
			}
		}
	default:
		n, err := io.Copy(io.Discard, r.Body)
		fb.reads.Add(n)
		if err != nil {
			return
		}
		fmt.Fprintf(w, "got %d", n)
	}
}

// Item 4: clients that stop sending their body or stop reading the
// response are cut after the route's idle timeouts, and the backend
// connection goes with them at once; clients that are slow but moving
// are never cut. No host is charged.
func TestStalledClientsAreCut(t *testing.T) {
	t.Parallel()
	b1, b2 := newFileBackend(t, "127.1.12.41"), newFileBackend(t, "127.1.12.42")
	s, url, logs := startSturdy(t, parseConfig(t, stallConfig, map[string]string{"b1": b1.addr, "b2": b2.addr}))
	addr := strings.TrimPrefix(url, "http://")
	n := 20
	if testing.Short() {
		n = 8
	}
	var wg sync.WaitGroup
	replies := make(chan rawReply, 2*n)
	var held []net.Conn
	var mu sync.Mutex
	for i := range n {
		wg.Add(2)
		go func() {
			// Stops after 1000 of 200000 bytes: this body streams, so a
			// backend connection is held until the stall is noticed.
			defer wg.Done()
			replies <- rawSend(t, "127.0.12.40", addr, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n"+strings.Repeat("u", 1000), 10*time.Second)
		}()
		go func() {
			// Asks for 64 MiB and never reads it.
			defer wg.Done()
			c := rawDial(t, "127.0.12.41", addr)
			c.(*net.TCPConn).SetReadBuffer(4 << 10)
			fmt.Fprintf(c, "GET /download?size=%d&i=%d HTTP/1.1\r\nHost: x\r\n\r\n", 64<<20, i)
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}()
	}
	// A small body that stops: read whole before any backend is chosen,
	// so no backend ever hears of it.
	small := rawSend(t, "127.0.12.40", addr, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789", 10*time.Second)
	if small.first() != 408 || !small.closed {
		t.Errorf("stalled small body: %d, closed %v: %q", small.first(), small.closed, small.text)
	}
	wg.Wait()
	close(replies)
	for r := range replies {
		if r.first() != 408 || !r.closed {
			t.Errorf("stalled upload: %d, closed %v: %q", r.first(), r.closed, r.text)
		}
	}
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	if !testutil.Eventually(10*time.Second, func() bool {
		return b1.cut.Load()+b2.cut.Load() == int64(n) && b1.open.Load()+b2.open.Load() == 0
	}) {
		t.Fatalf("downloads cut %d of %d; backend connections open %d", b1.cut.Load()+b2.cut.Load(), n, b1.open.Load()+b2.open.Load())
	}
	// The backend sees its connection close (the response body's Close)
	// a moment before the host is released, when the handler returns.
	for _, p := range s.Runtime().Pools {
		for _, h := range p.Hosts {
			if !testutil.Eventually(5*time.Second, func() bool { return h.InFlight() == 0 }) {
				t.Errorf("host %s still has %d requests in flight", h.Addr, h.InFlight())
			}
		}
	}
	if got := s.edge.Count(edge.FaultBodyTimeout); got != uint64(n+1) {
		t.Errorf("body_timeout counted %d, want %d", got, n+1)
	}
	if got := s.edge.Count(edge.FaultSendTimeout); got != uint64(n) {
		t.Errorf("send_timeout counted %d, want %d", got, n)
	}
	if got := allAttempts(s, outcome.ClientBodyError); got != uint64(n) {
		t.Errorf("%d attempts classed client_body_error, want %d", got, n)
	}
	s.agg.Flush()
	for _, want := range []string{"client stopped sending the body", "client stopped reading"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no aggregated log line about %q:\n%s", want, logs.String())
		}
	}

	// Slow but moving: a 512 KiB upload in 16 KiB pieces every 50 ms, and
	// a 32 MiB download read at most 256 KiB every 5 ms (more than the socket
	// buffers hold, so sturdy's writes wait on the reader), take several
	// times the idle timeout, and finish.
	up := rawDial(t, "127.0.12.42", addr)
	defer up.Close()
	fmt.Fprintf(up, "POST /upload HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n", 512<<10)
	piece := strings.Repeat("m", 16<<10)
	for range 32 {
		if _, err := io.WriteString(up, piece); err != nil {
			t.Fatalf("slow upload cut: %v", err)
		}
		// real: slow but moving against the body timeout, a socket
		// deadline on the kernel's clock.
		time.Sleep(50 * time.Millisecond)
	}
	if r := rawRead(up, 5*time.Second); r.first() != 200 || !strings.Contains(r.text, "got 524288") {
		t.Errorf("slow upload: %q", r.text)
	}
	down := rawDial(t, "127.0.12.42", addr)
	defer down.Close()
	// (Default socket buffers: a receive buffer smaller than loopback's
	// 64 KiB segments makes TCP itself stall for its persist timer.)
	fmt.Fprintf(down, "GET /download?size=%d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 32<<20)
	buf := make([]byte, 256<<10)
	total := 0
	down.SetReadDeadline(time.Now().Add(20 * time.Second))
	start := time.Now()
	var derr error
	for {
		k, err := down.Read(buf)
		total += k
		if err != nil {
			derr = err
			break
		}
		// real: a slow reader against the send timeout, a socket
		// deadline on the kernel's clock.
		time.Sleep(5 * time.Millisecond)
	}
	if d := time.Since(start); d < 600*time.Millisecond {
		t.Logf("the download took %s, not much longer than the idle timeout: the test proves less than it should", d)
	}
	if total < 32<<20 {
		t.Errorf("slow download got %d of %d bytes in %s: %v; send timeouts %d", total, 32<<20, time.Since(start), derr, s.edge.Count(edge.FaultSendTimeout))
	}
	hostsClean(t, s)
}
