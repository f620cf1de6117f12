package server

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/testpki"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
	"golang.org/x/net/websocket"
)

// freeAddr is a loopback address with a port nothing listens on now, so
// that a config can name the same address across reloads.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// wsBackend echoes WebSocket messages, holds /slow until the test opens
// its gate, and answers anything else at once.
func wsBackend(t testing.TB) string { a, _ := gatedWSBackend(t); return a }

// gate holds the requests for /slow until Open; Held counts those waiting.
type gate struct {
	mu   sync.Mutex
	ch   chan struct{}
	held atomic.Int64
}

func newGate() *gate { return &gate{ch: make(chan struct{})} }

func (g *gate) wait(ctx context.Context) {
	g.mu.Lock()
	ch := g.ch
	g.mu.Unlock()
	g.held.Add(1)
	defer g.held.Add(-1)
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// Open lets every held request and all later ones through.
func (g *gate) Open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.ch:
	default:
		close(g.ch)
	}
}

// Close makes later requests wait again.
func (g *gate) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.ch:
		g.ch = make(chan struct{})
	default:
	}
}

// waitHeld waits until n requests are held; 5s is a generous bound.
func (g *gate) waitHeld(t testing.TB, n int64) {
	t.Helper()
	if !testutil.Eventually(5*time.Second, func() bool { return g.held.Load() >= n }) {
		t.Fatalf("%d requests held at the backend after 5s, want %d", g.held.Load(), n)
	}
}

func gatedWSBackend(t testing.TB) (string, *gate) {
	g := newGate()
	mux := http.NewServeMux()
	mux.Handle("/ws", websocket.Handler(func(c *websocket.Conn) {
		io.Copy(c, c)
	}))
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		g.wait(r.Context())
		io.WriteString(w, "slow ok")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	t.Cleanup(g.Open) // before the backend closes: it waits for handlers
	return addr(backend(t, "127.1.0.1", mux)), g
}

// wsConn is a WebSocket client speaking raw frames, so that a test sees
// exactly what sturdy sent (close frames included).
type wsConn struct {
	net.Conn
	br *bufio.Reader
}

func wsDial(t testing.TB, addr string) *wsConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 16)
	rand.Read(key)
	fmt.Fprintf(c, "GET /ws HTTP/1.1\r\nHost: ws.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nOrigin: http://ws.test\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n\r\n", base64.StdEncoding.EncodeToString(key))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	return &wsConn{c, br}
}

// send writes one masked text frame.
func (w *wsConn) send(msg string) error {
	mask := []byte{1, 2, 3, 4}
	frame := []byte{0x81, 0x80 | byte(len(msg))}
	frame = append(frame, mask...)
	for i := range len(msg) {
		frame = append(frame, msg[i]^mask[i%4])
	}
	w.SetWriteDeadline(time.Now().Add(2 * time.Second))
	_, err := w.Write(frame)
	return err
}

// read reads one frame from the server.
func (w *wsConn) read(within time.Duration) (opcode byte, payload []byte, err error) {
	w.SetReadDeadline(time.Now().Add(within))
	var h [2]byte
	if _, err := io.ReadFull(w.br, h[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		io.ReadFull(w.br, b[:])
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		io.ReadFull(w.br, b[:])
		n = binary.BigEndian.Uint64(b[:])
	}
	payload = make([]byte, n)
	_, err = io.ReadFull(w.br, payload)
	return h[0] & 0x0f, payload, err
}

func (w *wsConn) echo(t testing.TB, msg string) {
	t.Helper()
	if err := w.send(msg); err != nil {
		t.Fatalf("send %q: %v", msg, err)
	}
	op, p, err := w.read(2 * time.Second)
	if err != nil || op != 1 || string(p) != msg {
		t.Fatalf("echo of %q: opcode %d %q %v", msg, op, p, err)
	}
}

const listenerSettingsConfig = `
admin: { listen: "off" }
shutdown_grace: 5s
listeners:
  - name: web
    listen: "{{addr}}"
    idle_timeout: {{idle}}
    read_header_timeout: {{rht}}
    max_header_bytes: {{mhb}}
    {{tls}}
routes: [ { name: site, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: "{{b}}" } ] } ]
`

// Every listener setting can change on reload, on the same socket: under
// keep-alive load with slow requests and a WebSocket open, no request
// fails and no connection is refused; new connections get the new
// settings, open ones finish on the old.
func TestReloadChangesListenerSettingsOnTheSameSocket(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testpki.NewCA(t, "reload CA")
	cert, key := ca.Write(t, dir, "site", testpki.Leaf{DNS: []string{"site.test"}})
	b, slowGate := gatedWSBackend(t)
	vars := map[string]string{"addr": freeAddr(t), "b": b, "idle": "75s", "rht": "10s", "mhb": "64KiB", "tls": ""}
	s, url, _ := startSturdy(t, parseConfig(t, listenerSettingsConfig, vars))
	ws := wsDial(t, s.Addr("web"))
	defer ws.Close()
	ws.echo(t, "before")

	var sent, failed, refused atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := clientFrom(fmt.Sprintf("127.0.0.%d", 20+c))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// Two clients also send requests that are held at the
				// backend across the reload; two only fast ones, on
				// through it.
				path := "/fast"
				if c%2 == 0 && i%5 == 4 {
					path = "/slow"
				}
				sent.Add(1)
				resp, err := client.Get(url + path)
				if err != nil {
					failed.Add(1)
					if strings.Contains(err.Error(), "refused") {
						refused.Add(1)
					}
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failed.Add(1)
				}
			}
		}()
	}
	slowGate.waitHeld(t, 2)
	vars["idle"], vars["rht"], vars["mhb"] = "5s", "2s", "4KiB"
	if err := s.Reload(parseConfig(t, listenerSettingsConfig, vars)); err != nil {
		t.Fatal(err)
	}
	slowGate.Open() // the held requests finish on the old server
	// The load goes on through the new server for another 200 requests.
	after := sent.Load() + 200
	if !testutil.Eventually(10*time.Second, func() bool { return sent.Load() >= after }) {
		t.Fatalf("only %d requests sent within 10s after the reload", sent.Load())
	}
	close(stop)
	wg.Wait()
	t.Logf("settings reload under load: %d requests, %d failed, %d refused", sent.Load(), failed.Load(), refused.Load())
	if failed.Load() != 0 || sent.Load() < 20 {
		t.Fatalf("%d of %d requests failed (%d refused) across the reload", failed.Load(), sent.Load(), refused.Load())
	}
	ws.echo(t, "after the settings changed")
	// A new connection gets the new header limit.
	big, _ := http.NewRequest("GET", url+"/", nil)
	big.Header.Set("X-Big", strings.Repeat("x", 8<<10))
	resp, err := clientFrom("127.0.0.30").Do(big)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("an 8 KiB header after max_header_bytes became 4KiB: %d", resp.StatusCode)
	}

	// TLS on, same address: a keep-alive plain connection finishes its
	// request; new connections speak TLS.
	plain := clientFrom("127.0.0.31")
	if resp, err := plain.Get(url + "/"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	slowGate.Close()
	slow := make(chan error, 1)
	go func() {
		resp, err := plain.Get(url + "/slow")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 200 {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		slow <- err
	}()
	slowGate.waitHeld(t, 1) // in flight on the plain connection
	vars["tls"] = `tls: { cert: "` + cert + `", key: "` + key + `" }`
	if err := s.Reload(parseConfig(t, listenerSettingsConfig, vars)); err != nil {
		t.Fatal(err)
	}
	slowGate.Open()
	if err := <-slow; err != nil {
		t.Errorf("the request in flight across TLS on: %v", err)
	}
	tc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: "site.test"}}}
	resp, err = tc.Get("https://" + s.Addr("web") + "/")
	if err != nil {
		t.Fatalf("TLS after the reload on the same address: %v", err)
	}
	resp.Body.Close()
	ws.echo(t, "after TLS went on for new connections")
}

// With shutdown_delay, readiness fails at once while the listener keeps
// accepting and serving for the delay; then connections are refused.
func TestShutdownDelayKeepsServingWhileNotReady(t *testing.T) {
	t.Parallel()
	cfg := parseConfig(t, `
admin: { listen: "127.0.0.1:0" }
shutdown_delay: 800ms
shutdown_grace: 2s
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: site, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: "{{b}}" } ] } ]
`, map[string]string{"b": wsBackend(t)})
	s, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, nil) }()
	var web string
	if !testutil.Eventually(2*time.Second, func() bool { web = s.Addr("web"); return web != "" }) {
		t.Fatal("never listened")
	}
	if code, _ := adminGet(t, s, "/readyz"); code != 200 {
		t.Fatalf("/readyz before SIGTERM: %d", code)
	}
	sigterm := time.Now()
	cancel()
	testutil.Eventually(time.Second, func() bool { return s.draining.Load() })
	if code, _ := adminGet(t, s, "/readyz"); code != 503 {
		t.Errorf("/readyz right after SIGTERM: %d, want 503", code)
	}
	var served int
	var firstRefusal time.Duration
	for time.Since(sigterm) < 3*time.Second {
		// A new connection each time, as a load balancer's would be.
		c := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := c.Get("http://" + web + "/")
		if err != nil {
			firstRefusal = time.Since(sigterm)
			break
		}
		resp.Body.Close()
		served++
		// real: shutdown_delay runs on the server's real timer; this
		// spaces the new connections a load balancer would make.
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("after SIGTERM: %d new connections served, the first refused after %s", served, firstRefusal)
	if firstRefusal < 800*time.Millisecond {
		t.Errorf("a connection was refused %s after SIGTERM, within the 800ms delay", firstRefusal)
	}
	if firstRefusal == 0 {
		t.Error("connections were never refused")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// At shutdown a WebSocket gets the grace period (it keeps working), then
// a close frame with code 1001 (going away).
func TestShutdownGivesWebSocketsTheGraceThenGoingAway(t *testing.T) {
	t.Parallel()
	cfg := parseConfig(t, `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: site, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: "{{b}}" } ] } ]
`, map[string]string{"b": wsBackend(t)})
	s, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	ws := wsDial(t, s.Addr("web"))
	defer ws.Close()
	ws.echo(t, "hello")
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(ctx) }()
	if !testutil.Eventually(time.Second, func() bool { return s.draining.Load() }) {
		t.Fatal("shutdown did not begin within 1s")
	}
	ws.echo(t, "still here during the grace period")
	op, p, err := ws.read(3 * time.Second)
	if err != nil || op != 8 || len(p) < 2 || binary.BigEndian.Uint16(p) != 1001 {
		t.Fatalf("at the end of the grace: opcode %d payload %v err %v, want a close frame with 1001", op, p, err)
	}
	if d := time.Since(start); d < 550*time.Millisecond {
		t.Errorf("the close frame came %s after shutdown began, before the 600ms grace ended", d)
	}
	<-done
}
