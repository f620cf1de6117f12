package h1client

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/outcome"

	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

// rawServer is a loopback TCP server whose connections a test serves by
// hand, counting what it accepted and the request heads it read.
type rawServer struct {
	ln       net.Listener
	accepted atomic.Int32
	requests atomic.Int32
	mu       sync.Mutex // guards conns
	conns    []net.Conn
	wg       sync.WaitGroup
}

func newRawServer(t testing.TB, serve func(s *rawServer, c net.Conn)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				serve(s, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *rawServer) url(path string) string { return "http://" + s.ln.Addr().String() + path }

// readRequest reads one request, body included, and counts it.
func (s *rawServer) readRequest(br *bufio.Reader) (*http.Request, []byte, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, nil, err
	}
	s.requests.Add(1)
	b, err := io.ReadAll(req.Body)
	return req, b, err
}

// serveCanned answers every request on the connection with resp.
func serveCanned(resp string) func(*rawServer, net.Conn) {
	return func(s *rawServer, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, _, err := s.readRequest(br); err != nil {
				return
			}
			if _, err := io.WriteString(c, resp); err != nil {
				return
			}
		}
	}
}

func newRequest(t testing.TB, ctx context.Context, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// do sends a bodiless request and returns the response with its body read.
func do(t testing.TB, c *Client, method, url string) (*http.Response, string) {
	t.Helper()
	resp, err := c.RoundTrip(newRequest(t, context.Background(), method, url, nil))
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	resp.Body.Close()
	return resp, string(b)
}

// classify is what the proxy does with an error; the client is not gone.
func classify(err error) outcome.Class { return outcome.Classify(err, false) }

// poolOf is the pool of the URL's host.
func poolOf(c *Client, url string) *hostPool {
	addr := strings.TrimPrefix(url, "http://")
	if i := strings.IndexByte(addr, '/'); i >= 0 {
		addr = addr[:i]
	}
	return c.hostPool(addr)
}

func idleCount(c *Client, url string) int {
	hp := poolOf(c, url)
	hp.mu.Lock()
	defer hp.mu.Unlock()
	return len(hp.idle)
}

// eventually polls cond until it holds or a few seconds passed.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !testutil.Eventually(5*time.Second, cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// waitEOF reports (on done) when the peer closed c: what a test checks to
// know the client discarded a connection.
func waitEOF(c net.Conn, done chan<- struct{}) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 512)
	for {
		if _, err := c.Read(buf); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err) {
				close(done)
			}
			return
		}
	}
}

// after fails the test when ch is not ready within a few seconds.
func after(t testing.TB, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}
