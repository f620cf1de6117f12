package proxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/access"
	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/route/subst"
)

// cannedUpstream answers every request from memory, so the benchmark
// measures the proxy's own work: routing, headers, try order, copying.
type cannedUpstream struct{ body []byte }

func (c cannedUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
	}
	return &http.Response{
		StatusCode: 200, ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"text/plain"}, "Content-Length": {strconv.Itoa(len(c.body))}},
		ContentLength: int64(len(c.body)),
		Body:          io.NopCloser(bytes.NewReader(c.body)),
	}, nil
}

// discardWriter is a ResponseWriter that keeps nothing.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}

func newBenchHandler(b *testing.B, up Upstream) *Handler { return newFixture(b, 2, up).h }

// BenchmarkHandler1KiB is one 1 KiB GET through the whole handler with the
// network taken out: the proxy's own CPU and allocations per request.
func BenchmarkHandler1KiB(b *testing.B) {
	benchHandler(b, newBenchHandler(b, cannedUpstream{body: bytes.Repeat([]byte("x"), 1024)}))
}

// BenchmarkHandler1KiBParallel is the same request from many goroutines
// at once. Run with -cpu 1,2: on two cores the time per request should
// halve; what it does not is contention in what requests share (a route's
// counters, a host's atomics, the pool's pick, sync.Pools).
func BenchmarkHandler1KiBParallel(b *testing.B) {
	h := newBenchHandler(b, cannedUpstream{body: bytes.Repeat([]byte("x"), 1024)})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := httptest.NewRequest("GET", "http://example.com/some/path?q=1", nil)
		req.RemoteAddr = "192.0.2.7:51234"
		req.Header.Set("User-Agent", "bench")
		req.Header.Set("Accept", "*/*")
		for pb.Next() {
			h.ServeHTTP(&discardWriter{h: make(http.Header, 8)}, req)
		}
	})
}

// BenchmarkHealthModelCost is the same request with passive evidence off
// and on: the cost of the attribution bookkeeping on a successful request.
func BenchmarkHealthModelCost(b *testing.B) {
	up := cannedUpstream{body: bytes.Repeat([]byte("x"), 1024)}
	b.Run("passive=off", func(b *testing.B) {
		benchHandler(b, newFixture(b, 2, up, func(pc *health.PoolConfig, _ *Route) { pc.Passive.Off = true }).h)
	})
	b.Run("passive=on", func(b *testing.B) { benchHandler(b, newBenchHandler(b, up)) })
}

func benchHandler(b *testing.B, h *Handler) {
	req := httptest.NewRequest("GET", "http://example.com/some/path?q=1", nil)
	req.RemoteAddr = "192.0.2.7:51234"
	req.Header.Set("User-Agent", "bench")
	req.Header.Set("Accept", "*/*")
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(&discardWriter{h: make(http.Header, 8)}, req)
	}
}

// BenchmarkAccessCost is the 1 KiB request on a route with no access
// controls and on one with a per-client rate limit that always allows:
// the limiter's cost per request.
func BenchmarkAccessCost(b *testing.B) {
	up := cannedUpstream{body: bytes.Repeat([]byte("x"), 1024)}
	b.Run("none", func(b *testing.B) { benchHandler(b, newBenchHandler(b, up)) })
	b.Run("rate_limit", func(b *testing.B) {
		cfg, err := config.Parse([]byte(`
listeners: [ { name: web, listen: 127.0.0.1:0 } ]
rate_limit_zones: [ { name: z, rate: 1000000r/s } ]
routes: [ { name: site, default: true, pool: web, rate_limit: [ { zone: z, burst: 100000000 } ] } ]
pools: [ { name: web, hosts: [ { addr: 10.0.0.1:80 } ] } ]
`), "bench.yaml")
		if err != nil {
			b.Fatal(err)
		}
		acc, err := access.Compile(cfg, access.Options{}, nil)
		if err != nil {
			b.Fatal(err)
		}
		benchHandler(b, newFixture(b, 2, up, func(_ *health.PoolConfig, r *Route) { r.Access = acc.Route(0) }).h)
	})
}

// BenchmarkRoutingFeatures is the same request on routes that use one
// routing feature each: what the feature costs per request.
func BenchmarkRoutingFeatures(b *testing.B) {
	up := cannedUpstream{body: bytes.Repeat([]byte("x"), 1024)}
	static := func(name, value string) HeaderValue {
		t, err := subst.Parse(value, subst.Options{})
		if err != nil {
			b.Fatal(err)
		}
		return NewHeaderValue(name, t)
	}
	dynamic := func(name, value string) HeaderValue {
		t, err := subst.Parse(value, subst.Options{})
		if err != nil {
			b.Fatal(err)
		}
		return NewHeaderValue(name, t)
	}
	prefix, _ := subst.Parse("/v2", subst.Options{Context: subst.URL})
	cases := []struct {
		name string
		g    *Routing
	}{
		{"static_request_headers", &Routing{Request: &HeaderRules{Set: []HeaderValue{static("X-Env", "prod")}, Remove: []string{"Accept"}}}},
		{"static_response_headers", &Routing{Response: &HeaderRules{Set: []HeaderValue{static("X-Frame-Options", "DENY")}, Remove: []string{"Server"}}}},
		{"dynamic_request_header", &Routing{Request: &HeaderRules{Set: []HeaderValue{dynamic("X-Original-URI", "$request_uri")}}}},
		{"request_id", &Routing{RequestID: &RequestID{Header: "X-Request-Id", Response: true}}},
		{"rewrite_prefix", &Routing{Rewrite: &Rewrite{Prefix: prefix, Match: Prefix{Value: "/some", Segments: true}}}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			benchHandler(b, newFixture(b, 2, up, func(_ *health.PoolConfig, rt *Route) { rt.Routing = c.g }).h)
		})
	}
}
