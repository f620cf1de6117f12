package h1

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// chanListener feeds handed-off connections to a net/http server.
type chanListener struct {
	ch   chan net.Conn
	done chan struct{}
}

func newChanListener() *chanListener {
	return &chanListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}
func (l *chanListener) Close() error   { close(l.done); return nil }
func (l *chanListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
func (l *chanListener) hand(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

// start serves h on a loopback port with the native server, handing off
// to a net/http server with the same handler; it marks which one
// answered in the X-Served-By response field.
func start(t testing.TB, h http.Handler, tune func(*Server)) (addr string, s *Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := newChanListener()
	fallback := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Served-By", "net/http")
		h.ServeHTTP(w, r)
	})}
	s = &Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Served-By", "h1")
			h.ServeHTTP(w, r)
		}),
		Handoff:           fl.hand,
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       30 * time.Second,
	}
	if tune != nil {
		tune(s)
	}
	done := make(chan struct{}, 2)
	go func() { s.Serve(ln); done <- struct{}{} }()
	go func() { fallback.Serve(fl); done <- struct{}{} }()
	t.Cleanup(func() {
		s.Close()
		fallback.Close()
		<-done
		<-done
	})
	return ln.Addr().String(), s
}

func echo() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		fmt.Fprintf(w, "%s %s host=%s body=%q", r.Method, r.RequestURI, r.Host, b)
	})
}

func TestKeepAliveRequestsAndHandoff(t *testing.T) {
	addr, _ := start(t, echo(), nil)
	c, br := dialRaw(t, addr)
	for i := range 3 {
		resp, got := roundTrip(t, c, br, fmt.Sprintf("GET /a?i=%d HTTP/1.1\r\nHost: x\r\n\r\n", i))
		if want := fmt.Sprintf("GET /a?i=%d host=x body=\"\"", i); got != want || resp.Header.Get("X-Served-By") != "h1" {
			t.Fatalf("got %q by %s, want %q by h1", got, resp.Header.Get("X-Served-By"), want)
		}
	}
	if _, got := roundTrip(t, c, br, "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"); got != `POST /p host=x body="hello"` {
		t.Fatalf("post: %q", got)
	}
	// Chunked: handed off, net/http answers on the same connection.
	resp, got := roundTrip(t, c, br, "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
	if got != `POST /c host=x body="abc"` || resp.Header.Get("X-Served-By") != "net/http" {
		t.Fatalf("chunked: %q by %s", got, resp.Header.Get("X-Served-By"))
	}
	if _, got := roundTrip(t, c, br, "GET /after HTTP/1.1\r\nHost: x\r\n\r\n"); got != `GET /after host=x body=""` {
		t.Fatalf("after handoff: %q", got)
	}
}

func TestPipelinedRequests(t *testing.T) {
	addr, _ := start(t, echo(), nil)
	c, br := dialRaw(t, addr)
	io.WriteString(c, "GET /1 HTTP/1.1\r\nHost: x\r\n\r\nPOST /2 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nokGET /3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	for _, want := range []string{`GET /1 host=x body=""`, `POST /2 host=x body="ok"`, `GET /3 host=x body=""`} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != want {
			t.Fatalf("got %q, want %q", b, want)
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after Connection: close, read %v, want EOF", err)
	}
}

func TestClientGoneCancelsRequest(t *testing.T) {
	canceled, running := make(chan error, 1), make(chan struct{})
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(running)
		select {
		case <-r.Context().Done():
			canceled <- r.Context().Err()
		case <-time.After(10 * time.Second):
			canceled <- nil
		}
	}), nil)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-running // the close comes while the handler runs
	c.Close()
	if err := <-canceled; err != context.Canceled {
		t.Fatalf("request context: %v, want canceled", err)
	}
}

// A body spliced from a source that breaks (a backend's reset, on the
// proxy) fails the response but does not cancel the request: one splice's
// error does not say which side failed, and the source's reader tells.
// The connection is not reused.
func TestReadFromSourceErrorDoesNotCancel(t *testing.T) {
	ctxErr := make(chan error, 1)
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", "100")
		_, err := w.(io.ReaderFrom).ReadFrom(io.MultiReader(strings.NewReader("half"), iotest.ErrReader(errors.New("backend reset"))))
		if err == nil {
			t.Errorf("ReadFrom from a broken source returned no error")
		}
		ctxErr <- r.Context().Err()
	}), nil)
	c, br := dialRaw(t, addr)
	io.WriteString(c, "GET /half HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-ctxErr; err != nil {
		t.Fatalf("request context after the source failed: %v, want not canceled", err)
	}
	if b, err := io.ReadAll(resp.Body); err == nil || string(b) != "half" {
		t.Fatalf("body %q, %v; want the 4 bytes sent and a cut", b, err)
	}
}

func TestResponseFraming(t *testing.T) {
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/small":
			io.WriteString(w, "<html>hi</html>")
		case "/big":
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, strings.Repeat("x", 5000))
		case "/nocontent":
			w.WriteHeader(204)
		case "/trailer":
			w.Header().Set("Trailer", "X-Sum")
			io.WriteString(w, strings.Repeat("y", 3000))
			w.Header().Set("X-Sum", "42")
		}
	}), nil)
	for _, tc := range []struct {
		path    string
		cl      int64
		te      bool
		ctype   string
		trailer string
	}{
		{"/small", 15, false, "text/html; charset=utf-8", ""},
		{"/big", -1, true, "text/plain", ""},
		{"/nocontent", 0, false, "", ""},
		{"/trailer", -1, true, "text/plain; charset=utf-8", "42"},
	} {
		resp, err := http.Get("http://" + addr + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ContentLength != tc.cl || (len(resp.TransferEncoding) > 0) != tc.te || resp.Header.Get("Content-Type") != tc.ctype ||
			resp.Trailer.Get("X-Sum") != tc.trailer || resp.Header.Get("Date") == "" {
			t.Errorf("%s: CL %d TE %v type %q trailer %q date %q", tc.path, resp.ContentLength, resp.TransferEncoding,
				resp.Header.Get("Content-Type"), resp.Trailer.Get("X-Sum"), resp.Header.Get("Date"))
		}
	}
}
