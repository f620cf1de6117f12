package cache

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// Hit path vs miss path, in memory (the cache's own cost, with the returned
// response written as the proxy writes it) and over loopback (what a client
// sees). Run:
//
//	go test -run '^$' -bench . -benchmem ./internal/cache/

type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }

var benchBody = bytes.Repeat([]byte("x"), 4<<10)

// memFetch answers like a typical cacheable origin, without a network.
func memFetch(r *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: 200,
		Header: http.Header{
			"Cache-Control":  {"public, max-age=3600"},
			"Content-Type":   {"text/html; charset=utf-8"},
			"Etag":           {`"abc"`},
			"Date":           {"Fri, 29 Aug 2025 18:00:00 GMT"},
			"Content-Length": {strconv.Itoa(len(benchBody))},
		},
		ContentLength: int64(len(benchBody)),
		Body:          io.NopCloser(bytes.NewReader(benchBody)),
	}, nil
}

// benchNow is a fixed clock matching memFetch's Date.
func benchNow() time.Time { return time.Date(2025, 8, 29, 18, 0, 1, 0, time.UTC) }

func BenchmarkServeHit(b *testing.B) {
	c := New(Options{Now: benchNow})
	defer c.Close()
	p := &Policy{Route: "bench"}
	r, _ := http.NewRequest(http.MethodGet, "http://example.test/page?id=1", nil)
	r.Header.Set("Accept-Encoding", "gzip")
	w := &discardWriter{h: http.Header{}}
	resp, _ := c.Serve(r, p, memFetch)
	send(w, r, resp)
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		resp, res := c.Serve(r, p, memFetch)
		if res.Status != StatusHit {
			b.Fatal(res.Status)
		}
		send(w, r, resp)
	}
}

func BenchmarkServeMiss(b *testing.B) {
	c := New(Options{Now: benchNow})
	defer c.Close()
	p := &Policy{Route: "bench"}
	r, _ := http.NewRequest(http.MethodGet, "http://example.test/page", nil)
	r.Header.Set("Accept-Encoding", "gzip")
	w := &discardWriter{h: http.Header{}}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		r.URL.RawQuery = "id=" + strconv.Itoa(i) // a new key each time
		clear(w.h)
		resp, res := c.Serve(r, p, memFetch)
		if res.Status != StatusMiss || !send(w, r, resp) {
			b.Fatal(res)
		}
	}
}

func benchLoopback(b *testing.B, hit bool) {
	e := newEnv(b, respond(200, string(benchBody), "Cache-Control", "public, max-age=3600"))
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		path := "/page"
		if !hit {
			i++
			path = "/page?id=" + strconv.Itoa(i)
		}
		resp, err := e.client.Get(e.front.URL + path)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

func BenchmarkLoopbackHit(b *testing.B)  { benchLoopback(b, true) }
func BenchmarkLoopbackMiss(b *testing.B) { benchLoopback(b, false) }
