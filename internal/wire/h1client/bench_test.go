package h1client

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// benchResponse is what the benchmark origin answers: 1 KiB, keep-alive.
var benchResponse = []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\nContent-Length: 1024\r\n\r\n" +
	string(bytes.Repeat([]byte("x"), 1024)))

// benchOrigin is a loopback origin that allocates nothing per request, so
// that allocs/op is the client's alone. Requests must be bodiless.
func benchOrigin(b *testing.B) string {
	s := newRawServer(b, func(s *rawServer, c net.Conn) {
		br := bufio.NewReaderSize(c, 32<<10)
		for {
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					return
				}
				if len(line) == 2 {
					break
				}
			}
			if _, err := c.Write(benchResponse); err != nil {
				return
			}
		}
	})
	return s.url("/some/path?q=1")
}

// benchRequest looks like what the proxy sends: cleaned, forwarded fields.
func benchRequest(b *testing.B, url string) *http.Request {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Host = "www.example.com"
	req.Header = http.Header{
		"Accept":            {"*/*"},
		"User-Agent":        {"bench/1.0"},
		"X-Forwarded-For":   {"192.0.2.7"},
		"X-Forwarded-Host":  {"www.example.com"},
		"X-Forwarded-Proto": {"http"},
		"X-Real-Ip":         {"192.0.2.7"},
		"Via":               {"1.1 sturdy"},
	}
	return req
}

// BenchmarkRoundTrip1KiB is one 1 KiB keep-alive GET over loopback, this
// client against http.Transport configured as sturdy configures it, with
// the same origin. "cancelctx" gives each request a cancellable context of
// its own, as http.Server does. ns/op is latency; cpu-ns/op is the CPU
// time of the whole process per request, the origin's (the same for both)
// included.
func BenchmarkRoundTrip1KiB(b *testing.B) {
	url := benchOrigin(b)
	clients := []struct {
		name string
		rt   func() (http.RoundTripper, func())
	}{
		{"upstream", func() (http.RoundTripper, func()) {
			c := New(Options{ConnectTimeout: 5 * time.Second, ResponseHeaderTimeout: 30 * time.Second,
				MaxIdlePerHost: 64, IdleTimeout: 90 * time.Second})
			return c, c.Close
		}},
		{"transport", func() (http.RoundTripper, func()) {
			d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
			t := &http.Transport{
				DialContext: d.DialContext, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second,
				ResponseHeaderTimeout: 30 * time.Second, ExpectContinueTimeout: time.Second,
				DisableCompression: true, MaxResponseHeaderBytes: 1 << 20,
				WriteBufferSize: 32 << 10, ReadBufferSize: 32 << 10,
			}
			return t, t.CloseIdleConnections
		}},
	}
	// The floor: the same bytes written and read on a raw connection, no
	// HTTP at all. What a client costs is its figure minus this one.
	b.Run("raw", func(b *testing.B) {
		req := benchRequest(b, url)
		nc, err := net.Dial("tcp", req.URL.Host)
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		var wire bytes.Buffer
		req.Write(&wire)
		buf := make([]byte, 32<<10)
		b.ReportAllocs()
		cpu0 := cpuTime()
		for b.Loop() {
			if _, err := nc.Write(wire.Bytes()); err != nil {
				b.Fatal(err)
			}
			for n := 0; n < len(benchResponse); {
				m, err := nc.Read(buf)
				if err != nil {
					b.Fatal(err)
				}
				n += m
			}
		}
		b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	})
	for _, withCtx := range []bool{false, true} {
		for _, cl := range clients {
			name := cl.name
			if withCtx {
				name += "/cancelctx"
			}
			b.Run(name, func(b *testing.B) {
				rt, done := cl.rt()
				defer done()
				req := benchRequest(b, url)
				buf := make([]byte, 4<<10)
				b.ReportAllocs()
				cpu0 := cpuTime()
				for b.Loop() {
					r := req
					var cancel context.CancelFunc
					if withCtx {
						var ctx context.Context
						ctx, cancel = context.WithCancel(context.Background())
						r = req.WithContext(ctx)
					}
					resp, err := rt.RoundTrip(r)
					if err != nil {
						b.Fatal(err)
					}
					n := 0
					for {
						m, err := resp.Body.Read(buf)
						n += m
						if err != nil {
							break
						}
					}
					resp.Body.Close()
					if n != 1024 {
						b.Fatalf("read %d bytes", n)
					}
					if cancel != nil {
						cancel()
					}
				}
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// cpuTime is the process's user and system CPU time: client and origin
// together, which is what a proxy pays per request on one machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// The costs of the pieces that replace http.Transport's goroutines and
// timers, for docs/performance.md.

// BenchmarkLivenessCheck is the MSG_PEEK of an idle connection.
func BenchmarkLivenessCheck(b *testing.B) {
	url := benchOrigin(b)
	c := New(Options{})
	req := benchRequest(b, url)
	hp := c.hostPool(req.URL.Host)
	pc, err := hp.dial(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer hp.discard(pc)
	b.ReportAllocs()
	for b.Loop() {
		if !pc.alive() {
			b.Fatal("dead")
		}
	}
}

// BenchmarkContextAfterFunc registers and stops the cancellation hook on a
// request-like context: "shared" on a parent that already has children,
// "fresh" on a new cancellable context each time (its own cost included;
// see WithCancel for it alone).
func BenchmarkContextAfterFunc(b *testing.B) {
	f := func() {}
	b.Run("shared", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		b.ReportAllocs()
		for b.Loop() {
			stop := context.AfterFunc(ctx, f)
			stop()
		}
	})
	b.Run("fresh", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := context.WithCancel(context.Background())
			stop := context.AfterFunc(ctx, f)
			stop()
			cancel()
		}
	})
	b.Run("WithCancel", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, cancel := context.WithCancel(context.Background())
			cancel()
		}
	})
}

// BenchmarkHeaderDeadline sets and clears a read deadline: the
// response-header timeout of one round trip.
func BenchmarkHeaderDeadline(b *testing.B) {
	url := benchOrigin(b)
	nc, err := net.Dial("tcp", benchRequest(b, url).URL.Host)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	b.ReportAllocs()
	for b.Loop() {
		nc.SetReadDeadline(time.Now().Add(30 * time.Second))
		nc.SetReadDeadline(time.Time{})
	}
}

// BenchmarkParse is the response head and body parser alone.
func BenchmarkParse(b *testing.B) {
	br := bufio.NewReaderSize(nil, 32<<10)
	rd := bytes.NewReader(benchResponse)
	var h head
	buf := make([]byte, 4<<10)
	b.SetBytes(int64(len(benchResponse)))
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(benchResponse)
		br.Reset(rd)
		var r response
		if err := readResponse(br, &h, "GET", &r); err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := r.body.Read(buf); err != nil {
				break
			}
		}
	}
}
