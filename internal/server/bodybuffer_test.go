package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

const bodyBufferConfig = `
admin: { listen: "off" }
client_body_temp: { path: "{{dir}}", max_size: 1MiB }
listeners: [ { name: web, listen: "127.0.0.1:0", frontend: {{fe}} } ]
routes:
  - { name: stream, path: /stream/, pool: web, request_buffering: false }
  - { name: up, default: true, pool: web }
pools: [ { name: web, hosts: [ { addr: "{{b}}" } ] } ]
`

// seenBackend records each request it is handed (when its head arrives,
// before its body) and the body length it then read.
type seenBackend struct {
	mu    sync.Mutex
	heads []string
	read  map[string]int
	cond  *sync.Cond
}

func newSeenBackend(t *testing.T, ip string) (*seenBackend, string) {
	b := &seenBackend{read: map[string]int{}}
	b.cond = sync.NewCond(&b.mu)
	srv := backend(t, ip, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.heads = append(b.heads, r.URL.Path)
		b.cond.Broadcast()
		b.mu.Unlock()
		n, _ := io.Copy(io.Discard, r.Body)
		b.mu.Lock()
		b.read[r.URL.Path] = int(n)
		b.mu.Unlock()
		fmt.Fprintf(w, "got %d", n)
	}))
	return b, addr(srv)
}

func (b *seenBackend) saw(path string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, h := range b.heads {
		if h == path {
			return true
		}
	}
	return false
}

// waitFor waits until the backend was handed path (its handler signals
// the cond), or 5s: a generous bound, not a threshold.
func (b *seenBackend) waitFor(path string) bool {
	var expired atomic.Bool
	stop := time.AfterFunc(5*time.Second, func() {
		expired.Store(true)
		b.mu.Lock()
		b.cond.Broadcast()
		b.mu.Unlock()
	})
	defer stop.Stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for !slices.Contains(b.heads, path) {
		if expired.Load() {
			return false
		}
		b.cond.Wait()
	}
	return true
}

// Issue 32 item 4b: request bodies above buffer_request_body (64KiB) wait
// whole in client_body_temp before a backend is chosen, on both front
// ends. A body shorter than its length, one whose chunking breaks and one
// the client abandons reach no backend; a slow upload holds no backend
// connection until it is complete; a body past client_body_temp.max_size
// gets 503; a route with request_buffering: false still streams. Nothing
// is left in the directory afterwards.
func TestLargeBodiesWaitWholeForABackend(t *testing.T) {
	for i, fe := range frontEnds() {
		t.Run(fe, func(t *testing.T) {
			t.Parallel()
			b, baddr := newSeenBackend(t, "127.1.34."+strconv.Itoa(1+i))
			dir := t.TempDir() + "/bodies"
			s, _, _ := startSturdy(t, parseConfig(t, bodyBufferConfig, map[string]string{"b": baddr, "fe": fe, "dir": dir}))
			proxy := s.Addr("web")
			from := func(n int) string { return fmt.Sprintf("127.34.%d.%d", 1+i, n) }
			chunk := strings.Repeat("x", 100_000)
			answer := func(c net.Conn) (int, string) {
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					return 0, err.Error()
				}
				body, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(body)
			}

			// A body that ends before its length: the client closes its side.
			c := rawDial(t, from(1), proxy)
			fmt.Fprintf(c, "POST /short HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n%s", chunk)
			c.(*net.TCPConn).CloseWrite()
			if st, body := answer(c); st != 400 {
				t.Errorf("a short body: %d %q, want 400", st, body)
			}
			c.Close()

			// Chunking that breaks after 100 KB.
			c = rawDial(t, from(2), proxy)
			fmt.Fprintf(c, "POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\nzz\r\n", len(chunk), chunk)
			if st, body := answer(c); st != 400 {
				t.Errorf("broken chunking: %d %q, want 400", st, body)
			}
			c.Close()

			// A client that gives up halfway.
			c = rawDial(t, from(3), proxy)
			fmt.Fprintf(c, "POST /abandoned HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n%s", chunk)
			c.Close()

			// A body larger than the disk bound (1MiB) but within the route's
			// limit (10MiB).
			huge := rawDial(t, from(4), proxy)
			var sending sync.WaitGroup
			sending.Go(func() {
				fmt.Fprintf(huge, "POST /huge HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", 2<<20)
				for range 21 {
					if _, err := io.WriteString(huge, chunk); err != nil {
						return
					}
				}
			})
			if st, body := answer(huge); st != 503 {
				t.Errorf("a body past client_body_temp.max_size: %d %q, want 503", st, body)
			}
			huge.Close()
			sending.Wait()

			// A slow upload: no backend hears of it until it is whole. The
			// upload pauses once sturdy holds its first part on disk
			// (after the abandoned one's handler gave its part back).
			spool := s.Runtime().Route("up").Spool
			if spool == nil {
				t.Fatal("the route keeps no body on disk")
			}
			if !testutil.Eventually(5*time.Second, func() bool { return spool.Used() == 0 }) {
				t.Fatalf("%d bytes of abandoned bodies still held on disk after 5s", spool.Used())
			}
			c = rawDial(t, from(5), proxy)
			fmt.Fprintf(c, "POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n%s", chunk)
			if !testutil.Eventually(5*time.Second, func() bool { return spool.Used() > 0 }) {
				t.Fatal("sturdy kept no part of a 200 KB upload on disk within 5s")
			}
			if b.saw("/slow") {
				t.Error("the backend was handed a slow upload before it was complete")
			}
			io.WriteString(c, chunk)
			if st, body := answer(c); st != 200 || body != "got 200000" {
				t.Errorf("a slow upload: %d %q, want 200 and the whole body", st, body)
			}
			c.Close()

			// request_buffering: false streams: the backend is handed the
			// request while its body is still coming.
			c = rawDial(t, from(6), proxy)
			fmt.Fprintf(c, "POST /stream/up HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n%s", chunk)
			if !b.waitFor("/stream/up") {
				t.Error("a route with request_buffering: false did not stream: the backend had nothing before the body was whole")
			}
			io.WriteString(c, chunk)
			if st, body := answer(c); st != 200 || body != "got 200000" {
				t.Errorf("a streamed upload: %d %q", st, body)
			}
			c.Close()

			for _, p := range []string{"/short", "/chunked", "/abandoned", "/huge"} {
				if b.saw(p) {
					t.Errorf("the backend was handed %s, a body sturdy knew to be broken or refused", p)
				}
			}
			// Every handler ends when its request does; 5s is a bound.
			testutil.Eventually(5*time.Second, func() bool { return spool.Used() == 0 })
			if n := spool.Used(); n != 0 {
				t.Errorf("%d bytes of bodies still held on disk after the requests", n)
			}
			entries, err := os.ReadDir(dir)
			if err != nil || len(entries) != 0 {
				t.Errorf("client_body_temp after the requests: %v %v, want empty", entries, err)
			}
			if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("client_body_temp: %v %v, want mode 0700", fi.Mode(), err)
			}
			hostsClean(t, s)
		})
	}
}
