package h1

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

// dialRaw opens a client connection from 127.0.0.2, reading responses.
func dialRaw(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return c, bufio.NewReader(c)
}

func roundTrip(t *testing.T, c net.Conn, br *bufio.Reader, raw string) (*http.Response, string) {
	t.Helper()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// expectClosed waits for the server to close c (EOF on read).
func expectClosed(t *testing.T, br *bufio.Reader) {
	t.Helper()
	if b, err := br.ReadByte(); err == nil {
		t.Fatalf("connection still open: read %q", b)
	} else if isTimeout(err) {
		t.Fatal("the server never closed the connection")
	}
}

func TestIdleConnectionHoldsNoBuffers(t *testing.T) {
	addr, s := start(t, echo(), nil)
	c, br := dialRaw(t, addr)
	roundTrip(t, c, br, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	// The server goroutine exits after the answer; once the connection
	// is idle again, it holds neither buffer.
	var idle, held int
	settled := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		idle, held = 0, 0
		for cc := range s.conns {
			if cc.state.Load() == stIdle {
				idle++
				<-cc.idle // the server goroutine is done: its fields are ours to read
				if cc.buf != nil || cc.bw != nil {
					held++
				}
				cc.idle <- struct{}{}
			}
		}
		return idle == 1
	}
	if !testutil.Eventually(10*time.Second, settled) {
		t.Fatal("the connection never became idle")
	}
	if held != 0 {
		t.Fatal("an idle connection holds its read or write buffer")
	}
}

func TestUnreadBodyIsDrainedOrTheConnectionClosed(t *testing.T) {
	ignore := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	addr, _ := start(t, ignore, nil)

	c, br := dialRaw(t, addr)
	small := strings.Repeat("s", 10<<10)
	roundTrip(t, c, br, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10240\r\n\r\n"+small)
	resp, body := roundTrip(t, c, br, "GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
	if body != "ok" || resp.Close {
		t.Fatalf("after a small unread body: %q close=%v; want the connection kept", body, resp.Close)
	}

	c, br = dialRaw(t, addr)
	go io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n"+strings.Repeat("b", 1<<20))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	if !resp.Close {
		t.Fatal("a large unread body: the answer does not say Connection: close")
	}
	expectClosed(t, br)
}

func TestHTTP10(t *testing.T) {
	addr, _ := start(t, echo(), nil)
	c, br := dialRaw(t, addr)
	resp, body := roundTrip(t, c, br, "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
	if body != `GET /a host= body=""` || resp.Header.Get("Connection") != "keep-alive" || resp.ProtoMinor != 0 {
		t.Fatalf("keep-alive 1.0: %q %v %s", body, resp.Header, resp.Proto)
	}
	_, body = roundTrip(t, c, br, "GET /b HTTP/1.0\r\n\r\n")
	if body != `GET /b host= body=""` {
		t.Fatalf("1.0: %q", body)
	}
	expectClosed(t, br)
}

func TestHandlerPanicClosesTheConnection(t *testing.T) {
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "partial")
		panic(http.ErrAbortHandler)
	}), nil)
	c, br := dialRaw(t, addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	expectClosed(t, br)
}

func TestIdleTimeoutClosesTheConnection(t *testing.T) {
	addr, _ := start(t, echo(), func(s *Server) { s.IdleTimeout = 100 * time.Millisecond })
	c, br := dialRaw(t, addr)
	roundTrip(t, c, br, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	expectClosed(t, br) // within the dial's 20 s deadline
}

func TestShutdownClosesIdleAndLetsActiveFinish(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	addr, s := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(entered)
			<-release
		}
		io.WriteString(w, "done")
	}), nil)
	idle, idleR := dialRaw(t, addr)
	roundTrip(t, idle, idleR, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	busy, busyR := dialRaw(t, addr)
	io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-entered

	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	expectClosed(t, idleR)
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) while a request was being answered", err)
	default:
	}
	close(release)
	resp, err := http.ReadResponse(busyR, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "done" || !resp.Close {
		t.Fatalf("the active request got %q close=%v; want its answer with Connection: close", b, resp.Close)
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
}

// A server goroutine parked longer than the park time is retired; the
// connection's next request starts another, and nothing is lost.
func TestRetiredServerGoroutineIsReplaced(t *testing.T) {
	addr, _ := start(t, echo(), func(s *Server) { s.park = 10 * time.Millisecond })
	c, br := dialRaw(t, addr)
	for i := range 3 {
		if _, body := roundTrip(t, c, br, "GET /again HTTP/1.1\r\nHost: x\r\n\r\n"); body != `GET /again host=x body=""` {
			t.Fatalf("request %d after a retirement: %q", i, body)
		}
		time.Sleep(50 * time.Millisecond) // real: past the park time, a timer of the server goroutine serving a real socket
	}
}

// A handler's read deadline that passes while the watcher watches, then
// an answer that closes the connection: the watcher must still end, or
// Shutdown would wait for it forever.
func TestHandlerDeadlineThenCloseLeavesNothingBehind(t *testing.T) {
	addr, s := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.(interface{ SetReadDeadline(time.Time) error }).SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		time.Sleep(100 * time.Millisecond) // real: past the socket's read deadline, which only the kernel's clock moves
		io.WriteString(w, "late")
	}), nil)
	c, br := dialRaw(t, addr)
	if _, body := roundTrip(t, c, br, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); body != "late" {
		t.Fatalf("body %q", body)
	}
	expectClosed(t, br)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v (a connection's goroutines did not end)", err)
	}
}

// Half of a pipelined head, then nothing: the head's timeout applies to
// it as to any other.
func TestPipelinedHalfHeadTimesOut(t *testing.T) {
	addr, _ := start(t, echo(), func(s *Server) { s.ReadHeaderTimeout = 200 * time.Millisecond })
	c, br := dialRaw(t, addr)
	io.WriteString(c, "GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HT")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	expectClosed(t, br) // within the dial's 20 s, not never
}

// A write deadline a handler armed does not outlive its request into a
// hand-off: net/http's server answers the next request in full.
func TestHandlerWriteDeadlineDoesNotReachTheHandoff(t *testing.T) {
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/arm" {
			w.(interface{ SetWriteDeadline(time.Time) error }).SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
		}
		io.WriteString(w, r.URL.Path)
	}), nil)
	c, br := dialRaw(t, addr)
	roundTrip(t, c, br, "GET /arm HTTP/1.1\r\nHost: x\r\n\r\n")
	time.Sleep(100 * time.Millisecond) // real: past the socket's armed write deadline
	resp, body := roundTrip(t, c, br, "POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
	if body != "/chunked" || resp.Header.Get("X-Served-By") != "net/http" {
		t.Fatalf("after the hand-off: %q by %s", body, resp.Header.Get("X-Served-By"))
	}
}

// The head is the header as it was at WriteHeader: what a handler adds
// after (a proxied backend's trailers) is a trailer, never a head field.
func TestHeaderAfterWriteHeaderIsNotInTheHead(t *testing.T) {
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-T")
		w.WriteHeader(200)
		io.WriteString(w, "short")
		w.Header().Set("X-T", "v")
		w.Header().Set(http.TrailerPrefix+"X-P", "p")
		w.Header().Set("X-Late", "no")
	}), nil)
	c, br := dialRaw(t, addr)
	resp, body := roundTrip(t, c, br, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if body != "short" || resp.Header.Get("X-T") != "" || resp.Header.Get("X-Late") != "" || resp.Header.Get("X-P") != "" {
		t.Fatalf("head %v body %q", resp.Header, body)
	}
	if resp.Trailer.Get("X-T") != "v" || resp.Trailer.Get("X-P") != "p" {
		t.Fatalf("trailers %v", resp.Trailer)
	}
}

// The head of a request on a kept-alive connection is read under the
// wait's deadline and gets the head's own only when one read does not
// bring it whole: half a head still times out as the head's timeout says,
// not as the (longer) idle time would.
func TestKeptAliveHalfHeadTimesOut(t *testing.T) {
	addr, _ := start(t, echo(), func(s *Server) {
		s.ReadHeaderTimeout, s.IdleTimeout, s.park = 200*time.Millisecond, time.Minute, time.Minute
	})
	c, br := dialRaw(t, addr)
	for range 3 {
		roundTrip(t, c, br, "GET /1 HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	io.WriteString(c, "GET /2 HT")
	expectClosed(t, br) // within the dial's 20 s, not the wait's minute
}

// A request without a body leaves the wait's deadline on the socket
// (see conn.rdl); one that outlives it is still canceled when its client
// leaves, however long it runs.
func TestRequestPastTheWaitsDeadlineSeesTheClientLeave(t *testing.T) {
	canceled := make(chan error, 1)
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/slow" {
			io.WriteString(w, "ok")
			return
		}
		select {
		case <-r.Context().Done():
			canceled <- r.Context().Err()
		case <-time.After(10 * time.Second):
			canceled <- nil
		}
	}), func(s *Server) { s.park = 100 * time.Millisecond })
	c, br := dialRaw(t, addr)
	for range 3 {
		roundTrip(t, c, br, "GET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	time.Sleep(300 * time.Millisecond) // real: past the socket's deadline, which only the kernel's clock moves
	c.Close()
	if err := <-canceled; err != context.Canceled {
		t.Fatalf("request context: %v, want canceled", err)
	}
}
