package h1client

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// pipeBackend is a client whose every dial is an in-memory connection to
// a backend answering each request with resp, counting the dials: for
// tests in a synctest bubble, where time is fake.
func pipeBackend(t *testing.T, resp string) (*Client, *atomic.Int32) {
	var dials atomic.Int32
	c := New(Options{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		dials.Add(1)
		cc, sc := net.Pipe()
		go func() {
			defer sc.Close()
			br := bufio.NewReader(sc)
			for {
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				if _, err := io.WriteString(sc, resp); err != nil {
					return
				}
			}
		}()
		return cc, nil
	}})
	t.Cleanup(c.Close)
	return c, &dials
}

func send(t *testing.T, c *Client, method string) {
	t.Helper()
	var body io.Reader
	if method == "POST" {
		body = strings.NewReader("order=1")
	}
	resp, err := c.RoundTrip(newRequest(t, context.Background(), method, "http://backend/", body))
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// A backend's Keep-Alive: timeout=N is honoured: its connection is not
// reused once idle for N less a margin (keepAliveMargin), when the backend
// may be closing it; timeout=0 means it is never kept.
func TestKeepAliveTimeoutHonoured(t *testing.T) {
	for _, tc := range []struct {
		keepAlive string
		idle      time.Duration
		reused    bool
	}{
		{"", 10 * time.Minute, true},
		{"Keep-Alive: timeout=3\r\n", 1900 * time.Millisecond, true},
		{"Keep-Alive: timeout=3\r\n", 2100 * time.Millisecond, false},
		{"Keep-Alive: max=100, timeout=5\r\n", 3900 * time.Millisecond, true},
		{"Keep-Alive: max=100, timeout=5\r\n", 4100 * time.Millisecond, false},
		{"Keep-Alive: timeout=2\r\n", 900 * time.Millisecond, true}, // too short for the margin: half
		{"Keep-Alive: timeout=2\r\n", 1100 * time.Millisecond, false},
		{"Keep-Alive: timeout=0\r\n", 0, false},
		{"Keep-Alive: timeout=x\r\n", 10 * time.Minute, true}, // unreadable: as if unsaid
	} {
		synctest.Test(t, func(t *testing.T) {
			c, dials := pipeBackend(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"+tc.keepAlive+"\r\nok")
			send(t, c, "GET")
			time.Sleep(tc.idle)
			send(t, c, "GET")
			if got := dials.Load() == 1; got != tc.reused {
				t.Errorf("%q, idle %v: reused %v, want %v", tc.keepAlive, tc.idle, got, tc.reused)
			}
		})
	}
}

// A request that cannot be sent again after the keep-alive race (a POST)
// does not take a connection idle for more than cautiousIdle, when the
// backend's idle timeout may be closing it; an idempotent one does (the
// race costs it a resend at most).
func TestCautiousRequestsAvoidIdleConnections(t *testing.T) {
	for _, tc := range []struct {
		method string
		idle   time.Duration
		reused bool
	}{
		{"POST", 900 * time.Millisecond, true},
		{"POST", 1100 * time.Millisecond, false},
		{"GET", 1100 * time.Millisecond, true},
		{"PUT", time.Minute, true},
	} {
		synctest.Test(t, func(t *testing.T) {
			c, dials := pipeBackend(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			send(t, c, "GET")
			time.Sleep(tc.idle)
			send(t, c, tc.method)
			if got := dials.Load() == 1; got != tc.reused {
				t.Errorf("%s after %v idle: reused %v, want %v", tc.method, tc.idle, got, tc.reused)
			}
		})
	}
}

// A backend that closes connections right after responding, without
// Connection: close: once the client has found one of its idle
// connections closed, POSTs get new connections (the race with its close
// cannot be won), GETs still reuse, and after closingMemory without
// another such close POSTs reuse again.
func TestPOSTsAvoidAHostThatClosesSoon(t *testing.T) {
	s := newRawServer(t, func(s *rawServer, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, _, err := s.readRequest(br)
			if err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			if req.URL.Path == "/close" {
				return
			}
		}
	})
	c := New(Options{})
	t.Cleanup(c.Close)
	hp := c.hostPool(s.ln.Addr().String())
	do(t, c, "GET", s.url("/close"))
	eventually(t, "the FIN", func() bool {
		hp.mu.Lock()
		defer hp.mu.Unlock()
		return len(hp.idle) == 1 && !hp.idle[0].alive()
	})
	do(t, c, "GET", s.url("/")) // finds it closed, dials: 2 connections
	post := func() {
		t.Helper()
		resp, err := c.RoundTrip(newRequest(t, context.Background(), "POST", s.url("/"), strings.NewReader("order=1")))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	post()
	if n := s.accepted.Load(); n != 3 {
		t.Errorf("%d connections after the POST, want 3: a POST reused a connection of a host that closes them soon", n)
	}
	do(t, c, "GET", s.url("/"))
	if n := s.accepted.Load(); n != 3 {
		t.Errorf("%d connections after a GET, want 3: GETs reuse", n)
	}
	hp.closedSoon.Add(-int64(closingMemory)) // as if closingMemory had passed
	post()
	if n := s.accepted.Load(); n != 3 {
		t.Errorf("%d connections, want 3: the host's close was remembered past closingMemory", n)
	}
}

// blindConn is a TCP connection whose liveness check looks at a socket
// where nothing ever arrives, so that a test can make the race the check
// cannot see (the backend's FIN still in flight) happen every time.
type blindConn struct {
	*net.TCPConn
	idle syscall.RawConn // an empty socket's
}

func (b blindConn) SyscallConn() (syscall.RawConn, error) {
	real, err := b.TCPConn.SyscallConn()
	return blindRaw{real, b.idle}, err
}

type blindRaw struct {
	syscall.RawConn
	idle syscall.RawConn
}

func (b blindRaw) Read(f func(uintptr) bool) error { return b.idle.Read(f) }

func blindDialer(t *testing.T) func(ctx context.Context, network, addr string) (net.Conn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	var raws []syscall.RawConn
	for _, fd := range fds {
		f := os.NewFile(uintptr(fd), "idle")
		nc, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		raw, _ := nc.(syscall.Conn).SyscallConn()
		raws = append(raws, raw)
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return blindConn{nc.(*net.TCPConn), raws[0]}, nil
	}
}

// The backend closed a kept-alive connection before a POST on it
// arrived: its FIN acknowledged none of the POST, which proves the
// backend never had it. The POST is sent once more on a new connection
// and succeeds; the backend reads it once.
func TestUnreceivedPOSTIsSentAgain(t *testing.T) {
	closed := make(chan struct{}, 4)
	s := newRawServer(t, func(s *rawServer, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, _, err := s.readRequest(br); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			if s.accepted.Load() == 1 {
				c.Close() // at once, without saying so
				closed <- struct{}{}
				return
			}
		}
	})
	c := New(Options{DialContext: blindDialer(t)})
	t.Cleanup(c.Close)
	do(t, c, "GET", s.url("/"))
	<-closed
	resp, err := c.RoundTrip(newRequest(t, context.Background(), "POST", s.url("/"), strings.NewReader("order=1")))
	if err != nil {
		t.Fatalf("a POST the backend never received: %v, want it sent again", err)
	}
	resp.Body.Close()
	if n, a := s.requests.Load(), s.accepted.Load(); n != 2 || a != 2 || c.StaleRetries() != 1 {
		t.Errorf("the backend read %d requests on %d connections, %d sent again; want 2 on 2, 1", n, a, c.StaleRetries())
	}
}

// The backend closed a kept-alive connection with a POST on it unread
// (it reset: the POST may have been half read, it cannot be known): the
// POST is not sent again, and its error is the connection's staleness,
// not the host's failure. A backend that read the POST and closed in
// order had it: that stays eof_before_response (see
// TestServerClosesAfterRequest).
func TestPOSTLostToAClosingConnectionIsStale(t *testing.T) {
	s := newRawServer(t, func(s *rawServer, c net.Conn) {
		br := bufio.NewReader(c)
		if _, _, err := s.readRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		// Wait for the next request to arrive, leave it unread, close.
		raw, _ := c.(*net.TCPConn).SyscallConn()
		raw.Control(func(fd uintptr) {
			unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 5000)
		})
	})
	c := New(Options{})
	t.Cleanup(c.Close)
	do(t, c, "GET", s.url("/"))
	_, err := c.RoundTrip(newRequest(t, context.Background(), "POST", s.url("/"), strings.NewReader("order=1")))
	if !errors.Is(err, outcome.ErrStaleConnection) || classify(err) != outcome.StaleConnection {
		t.Fatalf("err = %v (%s), want the stale connection's", err, classify(err))
	}
	if n, a := s.requests.Load(), s.accepted.Load(); n != 1 || a != 1 {
		t.Errorf("the backend read %d requests on %d connections, want 1 on 1: the POST was sent again", n, a)
	}
}

// A GET on a connection idle for less than the trust time is sent without
// the liveness check; when the backend had closed that connection without
// saying so, the GET meets the close before any of the response and goes
// once more on a new connection. A POST on such a connection is checked
// first, so it never meets the close: it takes a new connection at once.
func TestResendableRequestSkipsTheLivenessCheck(t *testing.T) {
	for _, method := range []string{"GET", "POST"} {
		closed := make(chan struct{}, 4)
		s := newRawServer(t, func(s *rawServer, c net.Conn) {
			br := bufio.NewReader(c)
			for {
				if _, _, err := s.readRequest(br); err != nil {
					return
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				if s.accepted.Load() == 1 {
					c.Close() // at once, without saying so
					closed <- struct{}{}
					return
				}
			}
		})
		c := New(Options{})
		t.Cleanup(c.Close)
		c.trust = time.Hour // every idle connection is recent enough
		do(t, c, "GET", s.url("/"))
		<-closed
		var body io.Reader
		if method == "POST" {
			body = strings.NewReader("order=1")
		}
		resp, err := c.RoundTrip(newRequest(t, context.Background(), method, s.url("/"), body))
		if err != nil {
			t.Fatalf("%s on a connection the backend closed: %v", method, err)
		}
		resp.Body.Close()
		want := uint64(0)
		if method == "GET" {
			want = 1
		}
		if n, a, r := s.requests.Load(), s.accepted.Load(), c.StaleRetries(); n != 2 || a != 2 || r != want {
			t.Errorf("%s: the backend read %d requests on %d connections, %d sent again; want 2 on 2, %d", method, n, a, r, want)
		}
	}
}
