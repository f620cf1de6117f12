package h2client

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/outcome"
	"golang.org/x/net/http2"

	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

func h2cServer(t *testing.T, h http.Handler) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = p
	conns := new(atomic.Int32)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, conns
}

func do(t *testing.T, c *Client, method, url string, body io.Reader) (*http.Response, error) {
	t.Helper()
	req, _ := http.NewRequest(method, url, body)
	return c.RoundTrip(req)
}

// h2c with prior knowledge: the backend sees HTTP/2; trailers arrive
// after the body.
func TestH2CRoundTripWithTrailers(t *testing.T) {
	srv, _ := h2cServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Trailer", "X-Sum")
		w.Write([]byte(r.Proto + " " + string(b)))
		w.Header().Set("X-Sum", "42")
	}))
	c := New(Options{})
	defer c.Close()
	resp, err := do(t, c, "POST", srv.URL, strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "HTTP/2.0 hello" || resp.Trailer.Get("X-Sum") != "42" {
		t.Errorf("got %q, trailer %v", b, resp.Trailer)
	}
}

// h2 over TLS negotiates h2 by ALPN; a TLS backend without h2 fails
// before anything is sent.
func TestH2OverTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Proto) }))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	tc := &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	c := New(Options{TLS: tc})
	defer c.Close()
	resp, err := do(t, c, "GET", srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "HTTP/2.0" {
		t.Errorf("backend saw %q", b)
	}

	h1 := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer h1.Close()
	c1 := New(Options{TLS: &tls.Config{RootCAs: h1.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}})
	defer c1.Close()
	_, err = do(t, c1, "GET", h1.URL, nil)
	if err == nil || outcome.Classify(err, false).Sent() {
		t.Errorf("HTTP/1.1-only TLS backend: %v (%s); want a failure before sending", err, outcome.Classify(err, false))
	}
}

// Streams per connection and connections per host are bounded: with 2
// and 2, six slow requests at once use two connections and run at most
// four at a time; the others wait for a free stream.
func TestStreamAndConnectionLimits(t *testing.T) {
	var inFlight, peak atomic.Int32
	release := make(chan struct{})
	srv, conns := h2cServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-release
	}))
	c := New(Options{MaxConnsPerHost: 2, MaxStreamsPerConn: 2})
	defer c.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
			resp, err := c.RoundTrip(req)
			if err != nil {
				errs <- err
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
	testutil.Eventually(5*time.Second, func() bool { return inFlight.Load() >= 4 })
	time.Sleep(50 * time.Millisecond) // real: a fifth stream, if the limits leaked, would be on the wire now; absence has no condition to wait for
	if n := inFlight.Load(); n != 4 {
		t.Errorf("%d requests in flight; want 4 (2 connections of 2 streams)", n)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections; want 2", n)
	}
	if p := peak.Load(); p > 4 {
		t.Errorf("peak %d in flight; want at most 4", p)
	}
}

// script is a raw HTTP/2 server: it answers the preface and SETTINGS and
// hands each request's stream to onHeaders.
func script(t *testing.T, onHeaders func(fr *http2.Framer, c net.Conn, streamID uint32)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				preface := make([]byte, len(http2.ClientPreface))
				if _, err := io.ReadFull(c, preface); err != nil {
					return
				}
				fr := http2.NewFramer(c, c)
				fr.WriteSettings()
				for {
					f, err := fr.ReadFrame()
					if err != nil {
						return
					}
					switch f := f.(type) {
					case *http2.SettingsFrame:
						if !f.IsAck() {
							fr.WriteSettingsAck()
						}
					case *http2.HeadersFrame:
						onHeaders(fr, c, f.StreamID)
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// What the backend did to a stream decides whether it counts as sent: a
// stream above a GOAWAY's last stream ID, or refused with REFUSED_STREAM,
// was never processed (retry it anywhere); a stream the backend reset,
// or whose connection dropped after it arrived, may have been.
func TestFailuresClassified(t *testing.T) {
	cases := []struct {
		name string
		do   func(fr *http2.Framer, c net.Conn, id uint32)
		want outcome.Class
	}{
		{"goaway above last stream", func(fr *http2.Framer, c net.Conn, id uint32) {
			fr.WriteGoAway(0, http2.ErrCodeNo, nil) // last stream 0: ours was never started
		}, outcome.StreamRefused},
		{"refused stream", func(fr *http2.Framer, c net.Conn, id uint32) {
			fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
		}, outcome.StreamRefused},
		{"reset stream", func(fr *http2.Framer, c net.Conn, id uint32) {
			fr.WriteRSTStream(id, http2.ErrCodeInternal)
		}, outcome.Reset},
		{"goaway covering the stream, then close", func(fr *http2.Framer, c net.Conn, id uint32) {
			fr.WriteGoAway(id, http2.ErrCodeNo, nil) // received: it may have been processed
			c.Close()
		}, outcome.EOFBeforeResponse},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := script(t, tc.do)
			c := New(Options{})
			defer c.Close()
			_, err := do(t, c, "GET", url, nil)
			if err == nil {
				t.Fatal("no error")
			}
			if got := outcome.Classify(err, false); got != tc.want {
				t.Errorf("%v: classified %s, want %s", err, got, tc.want)
			}
		})
	}
}

// A refused connection is refused; a backend that sends no headers in
// time is a response timeout, counted from the end of the request body.
func TestConnectAndHeaderTimeouts(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	c := New(Options{ResponseHeaderTimeout: 100 * time.Millisecond})
	defer c.Close()
	_, err := do(t, c, "GET", "http://"+dead, nil)
	if got := outcome.Classify(err, false); got != outcome.ConnectRefused {
		t.Errorf("dead address: %s (%v)", got, err)
	}
	url := script(t, func(*http2.Framer, net.Conn, uint32) {}) // never answers
	_, err = do(t, c, "GET", url, nil)
	if got := outcome.Classify(err, false); got != outcome.ResponseTimeout {
		t.Errorf("silent backend: %s (%v)", got, err)
	}
}
