package demo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Modes a demo backend can be switched to.
const (
	ModeOK        = "ok"
	ModeSlow      = "slow"
	Mode503       = "503"
	ModeReset     = "reset"
	ModeBlackhole = "blackhole"
)

// SlowDelay is how late a slow backend answers: past the demo routes' 2s
// response_header timeout and its probes' 1s timeout.
const SlowDelay = 3 * time.Second

// holdMax bounds how long a blackholed backend holds a connection; sturdy
// gives up long before (its timeouts), this only keeps nothing forever.
const holdMax = 2 * time.Minute

// Mode is one way a backend can behave, for the page and the printed help.
type Mode struct {
	Name string `json:"name"`
	Does string `json:"does"`
}

// Modes lists the modes in the order the page shows them.
var Modes = []Mode{
	{ModeOK, "answers normally"},
	{ModeSlow, "answers everything 3s late, past the routes' 2s timeout"},
	{Mode503, "answers 503 to everything, health checks included"},
	{ModeReset, "resets every connection after reading the request, answering nothing"},
	{ModeBlackhole, "accepts connections and never answers"},
}

func modeIndex(name string) (int32, bool) {
	for i, m := range Modes {
		if m.Name == name {
			return int32(i), true
		}
	}
	return 0, false
}

// backend is one demo backend: a WAF in front that refuses the scanner's
// address, then the backend itself, in one of the Modes.
type backend struct {
	name, addr string
	ln         net.Listener
	srv        *http.Server
	app        http.Handler
	scanner    string // the client address the WAF refuses

	mode       atomic.Int32 // index into Modes
	wafRefused atomic.Uint64

	mu   sync.Mutex // guards held
	held map[net.Conn]struct{}
}

func newBackend(name, addr, scanner string) (*backend, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("demo backend %s: cannot listen on %s: %w", name, addr, err)
	}
	b := &backend{name: name, addr: ln.Addr().String(), ln: ln, app: Handler(name), scanner: scanner, held: map[net.Conn]struct{}{}}
	b.srv = &http.Server{Handler: b, ReadHeaderTimeout: 5 * time.Second}
	return b, nil
}

// serve serves until close.
func (b *backend) serve() {
	if err := b.srv.Serve(b.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		_ = err // the listener was closed under us: close reports nothing more
	}
}

// close stops the backend and drops the connections it holds.
func (b *backend) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if b.srv.Shutdown(ctx) != nil {
		b.srv.Close()
	}
	b.mu.Lock()
	for c := range b.held {
		c.Close()
	}
	b.mu.Unlock()
}

func (b *backend) Mode() string { return Modes[b.mode.Load()].Name }

func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if wafRefuses(r, b.scanner) {
		// Incident 000: the WAF's refusal looks like the backend failing.
		b.wafRefused.Add(1)
		w.Header().Set("X-Waf", "blocked")
		http.Error(w, "502: blocked by the WAF in front of "+b.name, http.StatusBadGateway)
		return
	}
	switch b.Mode() {
	case ModeSlow:
		t := time.NewTimer(SlowDelay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	case Mode503:
		w.Header().Set("Retry-After", "5")
		w.Header().Set("X-Backend", b.name)
		http.Error(w, "503 from "+b.name+": the demo broke it (mode 503)", http.StatusServiceUnavailable)
		return
	case ModeReset:
		reset(w)
		return
	case ModeBlackhole:
		b.hold(w)
		return
	}
	b.app.ServeHTTP(w, r)
}

// wafRefuses reports whether the request comes from the scanner, as the
// proxy in front named the client in X-Forwarded-For or X-Real-IP.
func wafRefuses(r *http.Request, scanner string) bool {
	if r.Header.Get("X-Real-Ip") == scanner {
		return true
	}
	for _, v := range r.Header["X-Forwarded-For"] {
		for hop := range strings.SplitSeq(v, ",") {
			if strings.TrimSpace(hop) == scanner {
				return true
			}
		}
	}
	return false
}

// reset closes the connection with RST, sending nothing.
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// hold takes the connection and never answers, until the peer gives up,
// holdMax passes or the backend closes.
func (b *backend) hold(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	b.mu.Lock()
	b.held[conn] = struct{}{}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.held, conn)
		b.mu.Unlock()
		conn.Close()
	}()
	conn.SetReadDeadline(time.Now().Add(holdMax))
	buf := make([]byte, 512)
	for {
		if _, err := conn.Read(buf); err != nil {
			return
		}
	}
}
