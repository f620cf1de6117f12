package proxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/cache"
	"github.com/sturdyproxy/sturdy/internal/health"
)

// cacheableUpstream answers like cannedUpstream, with a response the cache
// may keep for an hour.
type cacheableUpstream struct{ body []byte }

func (c cacheableUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: 200, ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{
			"Content-Type":   {"text/plain"},
			"Content-Length": {strconv.Itoa(len(c.body))},
			"Cache-Control":  {"public, max-age=3600"},
			"Date":           {time.Now().UTC().Format(http.TimeFormat)},
		},
		ContentLength: int64(len(c.body)),
		Body:          io.NopCloser(bytes.NewReader(c.body)),
	}, nil
}

// BenchmarkHandlerCached1KiB is BenchmarkHandler1KiB on a route with a
// cache: an answer from the store (hit) and one from the backend that is
// stored (miss, a new URL each time).
func BenchmarkHandlerCached1KiB(b *testing.B) {
	c := cache.New(cache.Options{})
	b.Cleanup(func() { c.Close() })
	h := newFixture(b, 2, cacheableUpstream{body: bytes.Repeat([]byte("x"), 1024)}, func(_ *health.PoolConfig, rt *Route) {
		rt.Cache, rt.CachePolicy = c, &cache.Policy{Route: "site"}
	}).h
	for _, hit := range []bool{true, false} {
		name := "miss"
		if hit {
			name = "hit"
		}
		b.Run(name, func(b *testing.B) {
			req := httptest.NewRequest("GET", "http://example.com/some/path?q=1", nil)
			req.RemoteAddr = "192.0.2.7:51234"
			req.Header.Set("User-Agent", "bench")
			req.Header.Set("Accept", "*/*")
			h.ServeHTTP(&discardWriter{h: make(http.Header, 8)}, req)
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				if !hit {
					i++
					req.URL.RawQuery = "q=" + strconv.Itoa(i)
				}
				h.ServeHTTP(&discardWriter{h: make(http.Header, 8)}, req)
			}
		})
	}
}
