// Package fake provides the misbehaving parts that re-enact the incidents on
// loopback: backends that fail on cue, a WAF-like middle tier that blocks one
// client, a Node-like backend that hangs up on requests it cannot parse, and
// clients bound to distinct source addresses. Tests and `sturdy drill` use
// them; nothing here mocks the network.
package fake

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Behavior is what a Backend does with a request. Zero value: answer 200.
type Behavior struct {
	// Status to answer with (default 200).
	Status int
	// Delay before answering; the request's context ends it early.
	Delay time.Duration
	// Body to answer with (default "ok from NAME").
	Body string
	// Reset hangs up without answering, with an RST (a crashing process).
	Reset bool
}

// Backend is an HTTP backend whose behaviour can change while it runs, and
// which counts what it saw.
type Backend struct {
	Name string
	Addr string

	srv      *http.Server
	ln       net.Listener
	mu       sync.Mutex // guards rules, fallback
	rules    []rule
	fallback Behavior
	hits     sync.Map // path -> *atomic.Int64
	total    atomic.Int64
	wg       sync.WaitGroup
}

type rule struct {
	prefix string
	b      Behavior
}

// NewBackend listens on ip:0 (any loopback address) and serves.
func NewBackend(name, ip string) (*Backend, error) {
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		return nil, err
	}
	b := &Backend{Name: name, Addr: ln.Addr().String(), ln: ln}
	b.srv = &http.Server{Handler: b, ReadHeaderTimeout: 5 * time.Second}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.srv.Serve(ln)
	}()
	return b, nil
}

// Set makes requests whose path starts with prefix behave as bh; "" sets
// the default for all other paths. The longest matching prefix wins.
func (b *Backend) Set(prefix string, bh Behavior) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if prefix == "" {
		b.fallback = bh
		return
	}
	for i, r := range b.rules {
		if r.prefix == prefix {
			b.rules[i].b = bh
			return
		}
	}
	b.rules = append(b.rules, rule{prefix, bh})
}

func (b *Backend) behavior(path string) Behavior {
	b.mu.Lock()
	defer b.mu.Unlock()
	best, bestLen := b.fallback, -1
	for _, r := range b.rules {
		if strings.HasPrefix(path, r.prefix) && len(r.prefix) > bestLen {
			best, bestLen = r.b, len(r.prefix)
		}
	}
	return best
}

func (b *Backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.total.Add(1)
	c, _ := b.hits.LoadOrStore(r.URL.Path, new(atomic.Int64))
	c.(*atomic.Int64).Add(1)
	io.Copy(io.Discard, r.Body)
	bh := b.behavior(r.URL.Path)
	if bh.Reset {
		resetConn(w)
		return
	}
	if bh.Delay > 0 {
		t := time.NewTimer(bh.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	status := bh.Status
	if status == 0 {
		status = http.StatusOK
	}
	body := bh.Body
	if body == "" {
		body = "ok from " + b.Name
		if status != http.StatusOK {
			body = fmt.Sprintf("%d from %s", status, b.Name)
		}
	}
	w.Header().Set("X-Backend", b.Name)
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// resetConn hangs up on the request with an RST instead of an answer.
func resetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// Hits returns how many requests for path the backend saw.
func (b *Backend) Hits(path string) int64 {
	if c, ok := b.hits.Load(path); ok {
		return c.(*atomic.Int64).Load()
	}
	return 0
}

// Total returns how many requests the backend saw.
func (b *Backend) Total() int64 { return b.total.Load() }

// Close stops the backend.
func (b *Backend) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if b.srv.Shutdown(ctx) != nil {
		b.srv.Close()
	}
	b.wg.Wait()
}

// Client is an HTTP client whose connections come from one source address,
// so that the proxy sees a distinct client.
func Client(ip string, timeout time.Duration) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 2 * time.Second}
	return &http.Client{
		Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 8, DisableCompression: true},
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// RawGet sends target as is (raw bytes allowed) from source ip to addr and
// returns the status code of the answer, or an error when the connection
// closed without one.
func RawGet(ip, addr, host, target string, timeout time.Duration) (int, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: timeout}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target, host); err != nil {
		return 0, err
	}
	var status int
	line := make([]byte, 0, 64)
	buf := make([]byte, 1)
	for len(line) < 64 {
		if _, err := conn.Read(buf); err != nil {
			return 0, fmt.Errorf("no status line: %w", err)
		}
		if buf[0] == '\n' {
			break
		}
		line = append(line, buf[0])
	}
	if _, err := fmt.Sscanf(string(line), "HTTP/1.1 %d", &status); err != nil {
		return 0, fmt.Errorf("bad status line %q", line)
	}
	return status, nil
}
