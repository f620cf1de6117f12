package h1client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// echoServer is an http.Server that reports what it got and counts
// connections.
func echoServer(t *testing.T) (*httptest.Server, *int32) {
	var mu sync.Mutex
	conns := new(int32)
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		h := w.Header()
		h.Set("X-Method", r.Method)
		h.Set("X-Uri", r.RequestURI)
		h.Set("X-Host", r.Host)
		h.Set("X-Te", strings.Join(r.TransferEncoding, ","))
		h.Set("X-Cl", strconv.FormatInt(r.ContentLength, 10))
		h.Set("X-Ua", strconv.Quote(r.Header.Get("User-Agent")))
		for k, vv := range r.Trailer {
			h.Set("X-Trailer-"+k, strings.Join(vv, ","))
		}
		if r.URL.Query().Get("trailer") != "" {
			h.Set("Trailer", "X-Sum")
		}
		w.Write(b)
		if r.URL.Query().Get("trailer") != "" {
			h.Set("X-Sum", strconv.Itoa(len(b)))
		}
	}))
	ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			mu.Lock()
			*conns++
			mu.Unlock()
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	return ts, conns
}

func TestMethodsAndBodies(t *testing.T) {
	ts, conns := echoServer(t)
	c := New(Options{})
	defer c.Close()
	big := bytes.Repeat([]byte("0123456789abcdef"), 20<<10) // 320 KiB: written by the body goroutine

	tests := []struct {
		name       string
		method     string
		body       func() io.Reader
		cl         int64
		wantTE, ua string
	}{
		{name: "GET", method: "GET"},
		{name: "POST empty", method: "POST", cl: 0},
		{name: "GET empty body", method: "GET", body: func() io.Reader { return strings.NewReader("") }, cl: 0},
		{name: "POST fixed", method: "POST", body: func() io.Reader { return strings.NewReader("hello") }, cl: 5},
		{name: "PUT fixed large", method: "PUT", body: func() io.Reader { return bytes.NewReader(big) }, cl: int64(len(big))},
		{name: "POST chunked", method: "POST", body: func() io.Reader { return strings.NewReader("stream") }, cl: -1, wantTE: "chunked"},
		{name: "POST chunked large", method: "POST", body: func() io.Reader { return io.MultiReader(bytes.NewReader(big), strings.NewReader("!")) }, cl: -1, wantTE: "chunked"},
		{name: "POST unknown length", method: "POST", body: func() io.Reader { return io.MultiReader(strings.NewReader("a"), strings.NewReader("bc")) }, cl: 0, wantTE: "chunked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader
			var want []byte
			if tt.body != nil {
				body = tt.body()
				want, _ = io.ReadAll(tt.body())
			}
			req := newRequest(t, context.Background(), tt.method, ts.URL+"/a%2Fb/c?q=1%202&x", body)
			if body != nil {
				// Hide the concrete type: ContentLength is what counts.
				req.Body = io.NopCloser(body)
			}
			req.ContentLength = tt.cl
			req.Host = "example.test"
			req.Header["User-Agent"] = []string{""}
			resp, err := c.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			h := resp.Header
			if !bytes.Equal(got, want) {
				t.Errorf("echoed %d bytes, want %d", len(got), len(want))
			}
			for k, v := range map[string]string{
				"X-Method": tt.method, "X-Uri": "/a%2Fb/c?q=1%202&x", "X-Host": "example.test",
				"X-Te": tt.wantTE, "X-Ua": `""`,
			} {
				if h.Get(k) != v {
					t.Errorf("%s = %q, want %q", k, h.Get(k), v)
				}
			}
			if resp.StatusCode != 200 || resp.Proto != "HTTP/1.1" || resp.Status != "200 OK" {
				t.Errorf("status %q %q", resp.Proto, resp.Status)
			}
		})
	}
	if *conns != 1 {
		t.Errorf("server saw %d connections, want 1 (keep-alive)", *conns)
	}
}

func TestHead(t *testing.T) {
	s := newRawServer(t, serveCanned("HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n"))
	c := New(Options{})
	for range 3 {
		resp, body := do(t, c, "HEAD", s.url("/"))
		if body != "" || resp.ContentLength != 1234 || resp.Body != http.NoBody {
			t.Fatalf("HEAD: body %q, ContentLength %d", body, resp.ContentLength)
		}
	}
	if n := s.accepted.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

func TestTrailers(t *testing.T) {
	ts, _ := echoServer(t)
	c := New(Options{})
	pr, pw := io.Pipe()
	req := newRequest(t, context.Background(), "POST", ts.URL+"/?trailer=1", pr)
	req.ContentLength = -1
	req.Trailer = http.Header{"X-Checksum": nil}
	go func() {
		io.WriteString(pw, "part one, ")
		io.WriteString(pw, "part two")
		req.Trailer.Set("X-Checksum", "abc") // set before EOF, as a server's body does
		pw.Close()
	}()
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := resp.Trailer["X-Sum"]; !ok || len(resp.Trailer) != 1 {
		t.Errorf("announced trailers = %v, want X-Sum", resp.Trailer)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "part one, part two" {
		t.Fatalf("body %q, %v", b, err)
	}
	if got := resp.Trailer.Get("X-Sum"); got != "18" {
		t.Errorf("response trailer X-Sum = %q, want 18", got)
	}
	if got := resp.Header.Get("X-Trailer-X-Checksum"); got != "abc" {
		t.Errorf("server got request trailer %q, want abc", got)
	}
	if _, ok := resp.Header["Trailer"]; ok {
		t.Error("Trailer field left in the response header")
	}
}

// newHoldServer answers "ok" on keep-alive connections; a request for
// /hold is announced on arrived and answered only once release is closed.
func newHoldServer(t *testing.T) (*rawServer, chan struct{}, chan struct{}) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 8)
	s := newRawServer(t, func(s *rawServer, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, _, err := s.readRequest(br)
			if err != nil {
				return
			}
			if req.URL.Path == "/hold" {
				arrived <- struct{}{}
				<-release
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	return s, arrived, release
}

func TestKeepAliveAndMaxIdle(t *testing.T) {
	s, arrived, release := newHoldServer(t)
	c := New(Options{MaxIdlePerHost: 2})
	for range 10 {
		do(t, c, "GET", s.url("/"))
	}
	if n := s.accepted.Load(); n != 1 {
		t.Fatalf("10 sequential requests used %d connections, want 1", n)
	}
	// Five at once need five connections; two stay idle afterwards.
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() { do(t, c, "GET", s.url("/hold")) })
	}
	for range 5 {
		after(t, "a held request", arrived)
	}
	close(release)
	wg.Wait()
	if n := s.accepted.Load(); n != 5 {
		t.Errorf("%d connections, want 5", n)
	}
	if n := idleCount(c, s.url("/")); n != 2 {
		t.Errorf("%d idle connections, want MaxIdlePerHost 2", n)
	}
}

func TestClose(t *testing.T) {
	s := newRawServer(t, serveCanned("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
	c := New(Options{IdleTimeout: time.Hour})
	do(t, c, "GET", s.url("/"))
	c.Close()
	if n := idleCount(c, s.url("/")); n != 0 {
		t.Errorf("%d idle connections after Close", n)
	}
	do(t, c, "GET", s.url("/")) // still works, keeps nothing
	if n := idleCount(c, s.url("/")); n != 0 {
		t.Errorf("%d idle connections kept after Close", n)
	}
	eventually(t, "the janitor to stop", func() bool { return !c.janitorOn.Load() })
}

func TestMaxConnsPerHost(t *testing.T) {
	s, arrived, release := newHoldServer(t)
	c := New(Options{MaxConnsPerHost: 1})
	held := make(chan struct{})
	go func() {
		defer close(held)
		do(t, c, "GET", s.url("/hold"))
	}()
	after(t, "the first request", arrived)

	// The host is full: a second request waits, and gives up with its context.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.RoundTrip(newRequest(t, ctx, "GET", s.url("/"), nil))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting request: err = %v, want deadline exceeded", err)
	}
	var ue *Error
	if !errors.As(err, &ue) || ue.Phase != PhaseConnect {
		t.Errorf("err = %#v, want an *Error in PhaseConnect", err)
	}

	// A waiting request gets the connection when the first one ends.
	got := make(chan string)
	go func() {
		_, body := do(t, c, "GET", s.url("/"))
		got <- body
	}()
	eventually(t, "a waiter", func() bool {
		hp := c.hostPool(s.ln.Addr().String())
		hp.mu.Lock()
		defer hp.mu.Unlock()
		return len(hp.waiters) == 1
	})
	close(release)
	<-held
	if body := <-got; body != "ok" {
		t.Errorf("waiter got %q", body)
	}
	if n := s.accepted.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

func TestIdleTimeout(t *testing.T) {
	s := newRawServer(t, serveCanned("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
	c := New(Options{IdleTimeout: time.Hour})
	do(t, c, "GET", s.url("/"))
	// Age the idle connection: the next request must not take it.
	hp := c.hostPool(s.ln.Addr().String())
	hp.mu.Lock()
	hp.idle[0].idleAt = time.Now().Add(-2 * time.Hour)
	hp.mu.Unlock()
	do(t, c, "GET", s.url("/"))
	if n := s.accepted.Load(); n != 2 {
		t.Errorf("%d connections, want 2: the expired one must be replaced", n)
	}

	// The janitor closes idle connections on its own, then stops.
	c2 := New(Options{IdleTimeout: 20 * time.Millisecond})
	do(t, c2, "GET", s.url("/"))
	eventually(t, "the janitor", func() bool { return idleCount(c2, s.url("/")) == 0 })
	eventually(t, "the janitor to stop", func() bool { return !c2.janitorOn.Load() })
}

func TestResponseHeaderTimeout(t *testing.T) {
	s := newRawServer(t, func(s *rawServer, c net.Conn) {
		s.readRequest(bufio.NewReader(c))
		io.Copy(io.Discard, c) // never answer
	})
	c := New(Options{ResponseHeaderTimeout: 50 * time.Millisecond})
	start := time.Now()
	_, err := c.RoundTrip(newRequest(t, context.Background(), "GET", s.url("/"), nil))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("err = %v, want a timeout", err)
	}
	if got := classify(err); got != outcome.ResponseTimeout {
		t.Errorf("classified %v, want response_timeout", got)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestContextCancel(t *testing.T) {
	got := make(chan struct{}, 2)
	s := newRawServer(t, func(s *rawServer, c net.Conn) {
		req, _, err := s.readRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		if req.URL.Path == "/body" {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nfirst")
		}
		got <- struct{}{}
		io.Copy(io.Discard, c)
	})
	c := New(Options{})

	t.Run("headers", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-got; cancel() }()
		_, err := c.RoundTrip(newRequest(t, ctx, "GET", s.url("/"), nil))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if got := outcome.Classify(err, true); got != outcome.ClientCancel {
			t.Errorf("classified %v", got)
		}
	})
	t.Run("body", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		resp, err := c.RoundTrip(newRequest(t, ctx, "GET", s.url("/body"), nil))
		if err != nil {
			t.Fatal(err)
		}
		<-got
		buf := make([]byte, 100)
		n, err := resp.Body.Read(buf)
		if string(buf[:n]) != "first" || err != nil {
			t.Fatalf("read %q, %v", buf[:n], err)
		}
		cancel()
		if _, err := resp.Body.Read(buf); !errors.Is(err, context.Canceled) {
			t.Fatalf("read after cancel: %v, want context.Canceled", err)
		}
		resp.Body.Close()
	})
	if n := idleCount(c, s.url("/")); n != 0 {
		t.Errorf("%d idle connections after cancelled exchanges, want 0", n)
	}
}

// TestServerClosesIdle: a backend closing a kept-alive connection between
// requests costs the caller nothing, and nothing is sent twice.
func TestServerClosesIdle(t *testing.T) {
	s := newRawServer(t, func(s *rawServer, c net.Conn) {
		if _, _, err := s.readRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		// and close: an idle timeout of zero
	})
	c := New(Options{})
	for i := range 5 {
		do(t, c, "GET", s.url("/"))
		// Wait for the FIN to arrive, so the race the check cannot win (a
		// FIN still in flight) is not what is measured.
		hp := c.hostPool(s.ln.Addr().String())
		eventually(t, "the FIN", func() bool {
			hp.mu.Lock()
			defer hp.mu.Unlock()
			return len(hp.idle) == 1 && !hp.idle[0].alive()
		})
		if n := s.requests.Load(); int(n) != i+1 {
			t.Fatalf("server got %d requests after %d round trips", n, i+1)
		}
	}
	if n := s.accepted.Load(); n != 5 {
		t.Errorf("%d connections, want 5", n)
	}
}

// TestServerClosesAfterRequest: the backend reads the request and closes.
// The caller sees an EOF-class error. On a fresh connection the request
// is not sent again; on a reused one an idempotent request is sent once
// more on a new connection (the backend may have closed an idle
// connection just as it went out), and a POST whose body was sent never
// is.
func TestServerClosesAfterRequest(t *testing.T) {
	s := newRawServer(t, func(s *rawServer, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, _, err := s.readRequest(br)
			if err != nil || req.URL.Path == "/die" {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	c := New(Options{})
	check := func(method string, body io.Reader, wantReused bool) {
		t.Helper()
		_, err := c.RoundTrip(newRequest(t, context.Background(), method, s.url("/die"), body))
		if !errors.Is(err, io.EOF) {
			t.Fatalf("err = %v, want io.EOF", err)
		}
		if got := classify(err); got != outcome.EOFBeforeResponse {
			t.Errorf("classified %v, want eof_before_response", got)
		}
		var ue *Error
		if !errors.As(err, &ue) || ue.Phase != PhaseHeader || ue.Reused != wantReused {
			t.Errorf("err = %#v, want PhaseHeader, reused %v", err, wantReused)
		}
	}
	check("GET", nil, false)
	if n, a := s.requests.Load(), s.accepted.Load(); n != 1 || a != 1 {
		t.Fatalf("server got %d requests on %d connections, want 1 on 1", n, a)
	}
	do(t, c, "GET", s.url("/"))
	// Reused, then once more on a fresh connection, which fails the same
	// way and is not tried again.
	check("GET", nil, false)
	if n, a := s.requests.Load(), s.accepted.Load(); n != 4 || a != 3 {
		t.Fatalf("server got %d requests on %d connections, want 4 on 3", n, a)
	}
	if c.StaleRetries() != 1 {
		t.Errorf("stale retries %d, want 1", c.StaleRetries())
	}
	var ue *Error
	do(t, c, "GET", s.url("/"))
	_, err := c.RoundTrip(newRequest(t, context.Background(), "GET", s.url("/die"), nil))
	if !errors.As(err, &ue) || !ue.Resent {
		t.Errorf("the second send's failure: %#v, want Resent", err)
	}
	if n, a := s.requests.Load(), s.accepted.Load(); n != 7 || a != 5 {
		t.Fatalf("server got %d requests on %d connections, want 7 on 5", n, a)
	}
	// A caller that sent the request elsewhere already asks for one send.
	do(t, c, "GET", s.url("/"))
	_, err = c.RoundTrip(newRequest(t, WithoutResend(context.Background()), "GET", s.url("/die"), nil))
	if !errors.As(err, &ue) || ue.Resent || !ue.Reused {
		t.Errorf("with WithoutResend: %#v, want one send on the reused connection", err)
	}
	if n, a := s.requests.Load(), s.accepted.Load(); n != 9 || a != 6 {
		t.Fatalf("server got %d requests on %d connections, want 9 on 6: WithoutResend sent again", n, a)
	}
	do(t, c, "GET", s.url("/"))
	// The closes above make POSTs avoid the host's idle connections for a
	// while (closingMemory); forget them, to send this one on a reused
	// connection: the backend reads it and closes in order, so it had it
	// (eof_before_response, not the connection's staleness).
	c.hostPool(s.ln.Addr().String()).closedSoon.Store(0)
	check("POST", strings.NewReader("order=1"), true)
	if n, a := s.requests.Load(), s.accepted.Load(); n != 11 || a != 7 {
		t.Fatalf("server got %d requests on %d connections, want 11 on 7: a POST was sent twice", n, a)
	}
}

func TestReset(t *testing.T) {
	s := newRawServer(t, func(s *rawServer, c net.Conn) {
		s.readRequest(bufio.NewReader(c))
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
	})
	c := New(Options{})
	_, err := c.RoundTrip(newRequest(t, context.Background(), "GET", s.url("/"), nil))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("err = %v, want ECONNRESET", err)
	}
	if got := classify(err); got != outcome.Reset {
		t.Errorf("classified %v, want reset", got)
	}
}

func TestConnectRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := New(Options{ConnectTimeout: time.Second})
	_, err = c.RoundTrip(newRequest(t, context.Background(), "GET", "http://"+addr+"/", nil))
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		t.Fatalf("err = %v, want a dial *net.OpError", err)
	}
	if got := classify(err); got != outcome.ConnectRefused {
		t.Errorf("classified %v, want connect_refused", got)
	}
	if got := classify(err); got.Sent() {
		t.Error("a refused connection counts as sent")
	}
}

func TestResponseFraming(t *testing.T) {
	tests := []struct {
		name, resp string
		method     string
		status     int
		body       string
		reused     bool // the connection serves the next request
		cl         int64
	}{
		{"1xx skipped", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "GET", 200, "ok", true, 2},
		{"close-delimited 1.1", "HTTP/1.1 200 OK\r\n\r\nuntil the end", "GET", 200, "until the end", false, -1},
		{"close-delimited 1.0", "HTTP/1.0 200 OK\r\n\r\nuntil the end", "GET", 200, "until the end", false, -1},
		{"1.0 keep-alive not kept", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", "GET", 200, "ok", false, 2},
		{"Connection: close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", "GET", 200, "ok", false, 2},
		{"204", "HTTP/1.1 204 No Content\r\n\r\n", "GET", 204, "", true, 0},
		{"304 with length", "HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\n\r\n", "GET", 304, "", true, 0},
		{"HEAD with length", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", "HEAD", 200, "", true, 100},
		{"HEAD chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "HEAD", 200, "", true, -1},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n3;ext=1\r\nabc\r\n0\r\n\r\n", "GET", 200, "abc", true, -1},
		{"duplicate equal lengths", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\ncontent-length: 2\r\n\r\nok", "GET", 200, "ok", true, 2},
		{"empty reason", "HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n", "GET", 200, "", true, 0},
		{"no reason", "HTTP/1.1 404\r\nContent-Length: 0\r\n\r\n", "GET", 404, "", true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newRawServer(t, func(s *rawServer, c net.Conn) {
				br := bufio.NewReader(c)
				for {
					req, _, err := s.readRequest(br)
					if err != nil {
						return
					}
					resp := tt.resp
					if req.URL.Path == "/next" {
						resp = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext"
					}
					io.WriteString(c, resp)
					if strings.Contains(resp, "until the end") {
						return
					}
				}
			})
			c := New(Options{})
			resp, body := do(t, c, tt.method, s.url("/"))
			if resp.StatusCode != tt.status || body != tt.body || resp.ContentLength != tt.cl {
				t.Errorf("got %d %q ContentLength %d, want %d %q %d", resp.StatusCode, body, resp.ContentLength, tt.status, tt.body, tt.cl)
			}
			if resp.Close == tt.reused {
				t.Errorf("resp.Close = %v", resp.Close)
			}
			if _, body := do(t, c, "GET", s.url("/next")); body != "next" {
				t.Errorf("next response %q", body)
			}
			want := int32(2)
			if tt.reused {
				want = 1
			}
			if n := s.accepted.Load(); n != want {
				t.Errorf("%d connections, want %d", n, want)
			}
		})
	}
}

// TestMalformed: each response breaks a rule; it is refused as
// bad_response and its connection is closed, not reused.
func TestMalformed(t *testing.T) {
	ok := "HTTP/1.1 200 OK\r\n"
	huge := ok + strings.Repeat("X-Big: "+strings.Repeat("a", 1000)+"\r\n", 1100) + "Content-Length: 0\r\n\r\n"
	tests := []struct{ name, resp string }{
		{"CL and TE", ok + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{"TE and CL", ok + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"},
		{"differing CLs", ok + "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"},
		{"CL list", ok + "Content-Length: 5, 5\r\n\r\nhello"},
		{"CL sign", ok + "Content-Length: +5\r\n\r\nhello"},
		{"CL empty", ok + "Content-Length: \r\n\r\n"},
		{"CL negative", ok + "Content-Length: -1\r\n\r\n"},
		{"CL huge", ok + "Content-Length: 99999999999999999999\r\n\r\n"},
		{"obs-fold", ok + "X-A: a\r\n b\r\nContent-Length: 0\r\n\r\n"},
		{"leading whitespace", ok + " X-A: a\r\nContent-Length: 0\r\n\r\n"},
		{"TE gzip, chunked", ok + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"},
		{"TE identity", ok + "Transfer-Encoding: identity\r\n\r\n"},
		{"TE twice", ok + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{"TE in 1.0", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{"status two digits", "HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n"},
		{"status 600", "HTTP/1.1 600 Odd\r\nContent-Length: 0\r\n\r\n"},
		{"HTTP/2.0", "HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n"},
		{"lower-case version", "http/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
		{"two spaces", "HTTP/1.1  200 OK\r\nContent-Length: 0\r\n\r\n"},
		{"no space after code", "HTTP/1.1 200OK\r\nContent-Length: 0\r\n\r\n"},
		{"ICY", "ICY 200 OK\r\nContent-Length: 0\r\n\r\n"},
		{"101 unasked", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"},
		{"NUL in value", ok + "X-A: a\x00b\r\nContent-Length: 0\r\n\r\n"},
		{"CR in value", ok + "X-A: a\rb\r\nContent-Length: 0\r\n\r\n"},
		{"bare LF", "HTTP/1.1 200 OK\nContent-Length: 0\n\n"},
		{"bare LF in head", ok + "X-A: a\nContent-Length: 0\r\n\r\n"},
		{"space before colon", ok + "Content-Length : 0\r\n\r\n"},
		{"space in name", ok + "X A: b\r\nContent-Length: 0\r\n\r\n"},
		{"bad name byte", ok + "X(A): b\r\nContent-Length: 0\r\n\r\n"},
		{"empty name", ok + ": b\r\nContent-Length: 0\r\n\r\n"},
		{"no colon", ok + "X-A\r\nContent-Length: 0\r\n\r\n"},
		{"control in reason", "HTTP/1.1 200 O\x01K\r\nContent-Length: 0\r\n\r\n"},
		{"bad Trailer name", ok + "Transfer-Encoding: chunked\r\nTrailer: Content-Length\r\n\r\n0\r\n\r\n"},
		{"oversize head", huge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			closed := make(chan struct{})
			s := newRawServer(t, func(s *rawServer, c net.Conn) {
				if _, _, err := s.readRequest(bufio.NewReader(c)); err != nil {
					return
				}
				go io.WriteString(c, tt.resp)
				waitEOF(c, closed)
			})
			c := New(Options{})
			_, err := c.RoundTrip(newRequest(t, context.Background(), "GET", s.url("/"), nil))
			var be *BadResponseError
			if !errors.As(err, &be) {
				t.Fatalf("err = %v, want a *BadResponseError", err)
			}
			if got := classify(err); got != outcome.BadResponse {
				t.Errorf("classified %v, want bad_response", got)
			}
			after(t, "the client to close the connection", closed)
		})
	}
}

// TestMalformedBody: framing errors found in the body fail the read, and
// the connection is closed.
func TestMalformedBody(t *testing.T) {
	ch := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	tests := []struct{ name, resp string }{
		{"bad size", ch + "zz\r\nab\r\n0\r\n\r\n"},
		{"space after size", ch + "2 \r\nab\r\n0\r\n\r\n"},
		{"bare LF size line", ch + "2\nab\r\n0\r\n\r\n"},
		{"data not followed by CRLF", ch + "2\r\nabc\r\n0\r\n\r\n"},
		{"size overflow", ch + "10000000000000000\r\n"},
		{"framing trailer", ch + "0\r\nContent-Length: 5\r\n\r\n"},
		{"obs-fold trailer", ch + "0\r\nX-A: a\r\n b\r\n\r\n"},
		{"control in extension", ch + "2;a\x01b\r\nab\r\n0\r\n\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			closed := make(chan struct{})
			s := newRawServer(t, func(s *rawServer, c net.Conn) {
				if _, _, err := s.readRequest(bufio.NewReader(c)); err != nil {
					return
				}
				io.WriteString(c, tt.resp)
				waitEOF(c, closed)
			})
			c := New(Options{})
			resp, err := c.RoundTrip(newRequest(t, context.Background(), "GET", s.url("/"), nil))
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			var be *BadResponseError
			if !errors.As(err, &be) {
				t.Fatalf("body err = %v, want a *BadResponseError", err)
			}
			after(t, "the client to close the connection", closed)
		})
	}
}

func TestBodyClose(t *testing.T) {
	s := newRawServer(t, func(s *rawServer, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, _, err := s.readRequest(br)
			if err != nil {
				return
			}
			if req.URL.Path == "/big" {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")
				c.Write(make([]byte, 1000000))
				continue
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789")
		}
	})
	c := New(Options{})
	// Closed unread, but the rest is buffered already: the connection stays.
	resp, err := c.RoundTrip(newRequest(t, context.Background(), "GET", s.url("/"), nil))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the body to be buffered", func() bool {
		resp.Body.(*body).br.Peek(1)
		return resp.Body.(*body).br.Buffered() >= 10
	})
	resp.Body.Close()
	do(t, c, "GET", s.url("/"))
	if n := s.accepted.Load(); n != 1 {
		t.Errorf("%d connections after a buffered early close, want 1", n)
	}
	// Closed with most of it unread: the connection goes.
	resp, err = c.RoundTrip(newRequest(t, context.Background(), "GET", s.url("/big"), nil))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := resp.Body.Read(make([]byte, 1)); err == nil {
		t.Error("read after close succeeded")
	}
	do(t, c, "GET", s.url("/"))
	if n := s.accepted.Load(); n != 2 {
		t.Errorf("%d connections after an early close, want 2", n)
	}
}

// TestEarlyResponse: a backend may answer before it has read a large
// body (a 413, an auth failure) and close; the caller gets the answer.
func TestEarlyResponse(t *testing.T) {
	s := newRawServer(t, func(s *rawServer, c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 413 Content Too Large\r\nConnection: close\r\nContent-Length: 8\r\n\r\ntoo big!")
		c.(*net.TCPConn).CloseWrite()
		io.Copy(io.Discard, io.LimitReader(c, 1<<20)) // read some, then go
	})
	c := New(Options{})
	req := newRequest(t, context.Background(), "PUT", s.url("/"), io.LimitReader(zeros{}, 64<<20))
	req.ContentLength = 64 << 20
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || string(b) != "too big!" {
		t.Errorf("got %d %q", resp.StatusCode, b)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestFullDuplex: a backend that streams its answer while it reads the
// request body does not deadlock the client.
func TestFullDuplex(t *testing.T) {
	s := newRawServer(t, func(s *rawServer, c net.Conn) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
		buf := make([]byte, 32<<10)
		for {
			n, err := req.Body.Read(buf)
			if n > 0 {
				fmt.Fprintf(c, "%x\r\n%s\r\n", n, buf[:n])
			}
			if err != nil {
				break
			}
		}
		io.WriteString(c, "0\r\n\r\n")
		serveCanned("HTTP/1.1 204 No Content\r\n\r\n")(s, c)
	})
	c := New(Options{})
	const size = 16 << 20
	req := newRequest(t, context.Background(), "POST", s.url("/"), io.LimitReader(zeros{}, size))
	req.ContentLength = -1
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if n != size || err != nil {
		t.Errorf("echoed %d bytes, %v", n, err)
	}
	do(t, c, "GET", s.url("/"))
}

// TestRequestBodyError: a request body that fails (a client gone, a
// body over the limit) fails the round trip with that error, as is.
func TestRequestBodyError(t *testing.T) {
	ts, _ := echoServer(t)
	c := New(Options{})
	boom := errors.New("boom")
	for _, cl := range []int64{-1, 10, 1 << 20} {
		t.Run(strconv.FormatInt(cl, 10), func(t *testing.T) {
			req := newRequest(t, context.Background(), "POST", ts.URL, io.MultiReader(strings.NewReader("abc"), errReader{boom}))
			req.ContentLength = cl
			_, err := c.RoundTrip(req)
			if !errors.Is(err, boom) {
				t.Fatalf("err = %v, want boom", err)
			}
		})
	}
	do(t, c, "GET", ts.URL)
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestRequestWriting(t *testing.T) {
	got := make(chan string, 4)
	s := newRawServer(t, func(s *rawServer, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			var head strings.Builder
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				head.WriteString(line)
				if line == "\r\n" {
					break
				}
			}
			got <- head.String()
			io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
		}
	})
	c := New(Options{})

	req := newRequest(t, context.Background(), "GET", s.url("/p%2Fq/%C3%A4?a=%20b&c"), nil)
	req.URL.RawPath = "/p%2Fq/ä" // as a server parses raw UTF-8 bytes: sent as they came
	req.URL.Path = "/p/q/ä"
	req.Host = "front.example"
	req.Header["User-Agent"] = []string{""}
	req.Header["X-Multi"] = []string{"1", "2"}
	req.Header["Content-Length"] = []string{"99"} // ignored: ContentLength rules
	do2 := func(req *http.Request) string {
		t.Helper()
		resp, err := c.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return <-got
	}
	head := do2(req)
	if !strings.HasPrefix(head, "GET /p%2Fq/ä?a=%20b&c HTTP/1.1\r\nHost: front.example\r\n") {
		t.Errorf("head starts %q", head)
	}
	for _, bad := range []string{"User-Agent", "Content-Length", "Transfer-Encoding"} {
		if strings.Contains(head, bad) {
			t.Errorf("head has %s:\n%s", bad, head)
		}
	}
	if !strings.Contains(head, "X-Multi: 1\r\nX-Multi: 2\r\n") {
		t.Errorf("head lost X-Multi:\n%s", head)
	}

	req = newRequest(t, context.Background(), "POST", s.url("/"), nil)
	req.Close = true
	head = do2(req)
	if !strings.Contains(head, "Content-Length: 0\r\n") || !strings.Contains(head, "Connection: close\r\n") {
		t.Errorf("bodiless POST with Close:\n%s", head)
	}

	// A value that would inject a line is refused before anything is sent.
	req = newRequest(t, context.Background(), "GET", s.url("/"), nil)
	req.Header["X-Evil"] = []string{"a\r\nInjected: 1"}
	if _, err := c.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "invalid header field value") {
		t.Errorf("injection: err = %v", err)
	}
	req = newRequest(t, context.Background(), "GET", s.url("/"), nil)
	req.URL.RawQuery = "a b"
	if _, err := c.RoundTrip(req); err == nil {
		t.Error("space in the query was sent")
	}
	select {
	case h := <-got:
		t.Errorf("an invalid request reached the server:\n%s", h)
	default:
	}
}

// fakeRT records the requests it is given.
type fakeRT struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (f *fakeRT) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	f.mu.Unlock()
	return &http.Response{StatusCode: 299, Body: http.NoBody, Header: http.Header{}}, nil
}

func TestFallback(t *testing.T) {
	fb := &fakeRT{}
	c := New(Options{Fallback: fb})
	s := newRawServer(t, serveCanned("HTTP/1.1 204 No Content\r\n\r\n"))
	mk := func(url string, h http.Header) *http.Request {
		r := newRequest(t, context.Background(), "GET", url, nil)
		for k, v := range h {
			r.Header[k] = v
		}
		return r
	}
	tests := []struct {
		name     string
		req      *http.Request
		fallback bool
	}{
		{"http", mk(s.url("/"), nil), false},
		{"https", mk("https://"+s.ln.Addr().String()+"/", nil), true},
		{"upgrade", mk(s.url("/"), http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}}), true},
		{"expect", mk(s.url("/"), http.Header{"Expect": {"100-Continue"}}), true},
		{"connect", func() *http.Request { r := mk(s.url("/"), nil); r.Method = "CONNECT"; return r }(), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fb.reqs = nil
			resp, err := c.RoundTrip(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := len(fb.reqs) == 1; got != tt.fallback {
				t.Errorf("fallback used: %v, want %v", got, tt.fallback)
			}
		})
	}
	if _, err := New(Options{}).RoundTrip(mk("https://example.test/", nil)); err == nil {
		t.Error("no fallback: https request did not fail")
	}
}

func TestHostPort(t *testing.T) {
	for in, want := range map[string]string{
		"a:1": "a:1", "a": "a:80", "[::1]": "[::1]:80", "[::1]:8080": "[::1]:8080", "10.0.0.1": "10.0.0.1:80",
	} {
		if got := hostPort(in); got != want {
			t.Errorf("hostPort(%q) = %q, want %q", in, got, want)
		}
	}
}

// buffersHeld counts the read and write buffers held by idle connections
// to the URL's host. Only for a client no exchange is using.
func buffersHeld(c *Client, url string) int {
	hp := poolOf(c, url)
	hp.mu.Lock()
	defer hp.mu.Unlock()
	n := 0
	for _, pc := range hp.idle {
		if pc.br != nil {
			n++
		}
		if pc.bw != nil {
			n++
		}
	}
	return n
}

// An idle connection holds no buffer: 64 KiB each by default, which 128
// idle connections to a host would otherwise keep. The one exception, a
// connection holding bytes its backend sent past a response, keeps them
// for the liveness check, which refuses it.
func TestIdleConnectionsHoldNoBuffers(t *testing.T) {
	s, arrived, release := newHoldServer(t)
	c := New(Options{MaxIdlePerHost: 8})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { do(t, c, "GET", s.url("/hold")) })
	}
	// And a request whose body is written by a goroutine of its own.
	wg.Go(func() {
		req := newRequest(t, context.Background(), "POST", s.url("/hold"), strings.NewReader(strings.Repeat("x", syncBodyMax+1)))
		req.ContentLength = syncBodyMax + 1
		resp, err := c.RoundTrip(req)
		if err != nil {
			t.Errorf("POST: %v", err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	})
	for range 5 {
		after(t, "a held request", arrived)
	}
	close(release)
	wg.Wait()
	if n := idleCount(c, s.url("/")); n != 5 {
		t.Fatalf("%d idle connections, want 5", n)
	}
	if n := buffersHeld(c, s.url("/")); n != 0 {
		t.Errorf("the 5 idle connections hold %d buffers, want none", n)
	}
	for range 5 {
		do(t, c, "GET", s.url("/")) // reused, and idle again
	}
	if n := s.accepted.Load(); n != 5 {
		t.Errorf("%d connections, want the 5 reused", n)
	}
	if n := buffersHeld(c, s.url("/")); n != 0 {
		t.Errorf("after reuse the idle connections hold %d buffers, want none", n)
	}

	// Bytes past the response: the connection keeps its read buffer with
	// them, and the next request takes another connection.
	extra := newRawServer(t, func(s *rawServer, nc net.Conn) {
		br := bufio.NewReader(nc)
		if _, _, err := s.readRequest(br); err != nil {
			return
		}
		io.WriteString(nc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n")
		s.readRequest(br)
	})
	c2 := New(Options{})
	do(t, c2, "GET", extra.url("/"))
	eventually(t, "the bytes past the response to be read", func() bool { return buffersHeld(c2, extra.url("/")) == 1 })
	do(t, c2, "GET", extra.url("/"))
	if n := extra.accepted.Load(); n != 2 {
		t.Errorf("%d connections, want 2: the first one had bytes past its response", n)
	}
}
