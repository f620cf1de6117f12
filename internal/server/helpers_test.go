package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

// parseConfig parses a YAML config written for a test; "{{name}}" in it is
// replaced by vars[name].
func parseConfig(t testing.TB, yaml string, vars map[string]string) *config.Config {
	t.Helper()
	for k, v := range vars {
		yaml = strings.ReplaceAll(yaml, "{{"+k+"}}", v)
	}
	cfg, err := config.Parse([]byte(yaml), t.Name()+".yaml")
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	return cfg
}

// startSturdy runs a server for cfg on loopback and stops it when the test
// ends. It returns the server and the base URL of its first listener.
func startSturdy(t testing.TB, cfg *config.Config, opts ...Option) (*Server, string, *testutil.SyncBuffer) {
	t.Helper()
	if *frontend != "" {
		for i := range cfg.Listeners {
			if l := &cfg.Listeners[i]; l.TLS == nil && l.ProxyProtocol == config.ProxyProtocolOff {
				l.Frontend = *frontend
			}
		}
	}
	logs := &testutil.SyncBuffer{}
	s, err := New(cfg, slog.New(slog.NewTextHandler(logs, nil)), opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return s, "http://" + s.Addr(cfg.Listeners[0].Name), logs
}

// backend starts an httptest server on a given loopback address (port 0

// rawBackend listens on ip and runs serve on each connection it accepts,
// in a goroutine of its own, until the test ends (then it waits for them);
// it returns the address. serve closes the connection.
func rawBackend(t testing.TB, ip string, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { serve(c) })
		}
	})
	return ln.Addr().String()
}

// picks one) so that hosts show distinct addresses.
func backend(t testing.TB, ip string, h http.Handler) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func addr(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }

// deadAddr returns a loopback address where nothing listens.
func deadAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	ln.Close()
	return a
}

// clientFrom returns an HTTP client whose connections come from source IP
// ip (any address in 127.0.0.0/8), so the proxy sees distinct clients.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 2 * time.Second}
	return &http.Client{
		Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 16, DisableCompression: true},
		Timeout:   10 * time.Second,
	}
}

func get(t testing.TB, c *http.Client, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "Host") {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// named answers with its name and echoes the request headers it got.
func named(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", name)
		fmt.Fprintf(w, "%s %s %s", name, r.Method, r.URL.RequestURI())
	})
}

// testLogger logs into a buffer that the test prints only when it fails.
func testLogger(t testing.TB) *slog.Logger {
	logs := &testutil.SyncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	return slog.New(slog.NewTextHandler(logs, nil))
}

// progress counts the requests a load has finished, so that whatever must
// happen during the load (reloads) is paced by the requests themselves,
// however fast either runs, rather than by pauses.
type progress struct {
	mu   sync.Mutex
	cond sync.Cond
	n    int64
}

func newProgress() *progress {
	p := &progress{}
	p.cond.L = &p.mu
	return p
}

// Add counts one finished request.
func (p *progress) Add() {
	p.mu.Lock()
	p.n++
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Load is how many requests have finished.
func (p *progress) Load() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// WaitPast waits until more than n requests have finished, or total have
// (the load is over), and returns the count.
func (p *progress) WaitPast(n, total int64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.n <= n && p.n < total {
		p.cond.Wait()
	}
	return p.n
}

// arrivals is an open loop: it starts send(i) in a goroutine of its own
// at i*gap from now, for i below n, whether or not earlier ones were
// answered, and returns when all have returned. It is the one arrival
// schedule of these tests (overload, detection, a hanging host).
func arrivals(n int, gap time.Duration, send func(i int)) {
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * gap)); d > 0 {
			// real: when requests arrive is the scenario (an offered
			// rate, requests in flight when a failure is found), on
			// real sockets to a running server.
			time.Sleep(d)
		}
		wg.Go(func() { send(i) })
	}
	wg.Wait()
}
