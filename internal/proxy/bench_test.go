package proxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/edge"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/pool"
	"github.com/sturdyproxy/sturdy/internal/route"
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

func newBenchHandler(b *testing.B, up Upstream) *Handler { return newBenchHandlerWith(b, up, "") }

// newBenchHandlerWith takes the pool's health YAML (inside pools[0]).
func newBenchHandlerWith(b *testing.B, up Upstream, healthYAML string) *Handler {
	p, err := pool.New("web", pool.RoundRobin, []pool.Spec{{Addr: "10.0.0.1:80", Weight: 1}, {Addr: "10.0.0.2:80", Weight: 1}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	if healthYAML == "" {
		healthYAML = "{}"
	}
	cfg, err := config.Parse([]byte("listeners: [ { name: web, listen: 127.0.0.1:0 } ]\nroutes: [ { name: site, pool: web } ]\npools: [ { name: web, hosts: [ { addr: 10.0.0.1:80 } ], health: "+healthYAML+" } ]\n"), "bench")
	if err != nil {
		b.Fatal(err)
	}
	mon := health.NewMonitor(cfg.Attribution, nil, 0)
	b.Cleanup(mon.Close)
	hp := mon.NewPool(p, cfg.Pools[0].Health)
	mon.Apply([]*health.Pool{hp})
	rt := &Route{
		Name: "site", Pool: p, Upstream: up, MaxBodyBytes: 10 << 20,
		Tries: 2, RetryBudget: 0.2, MinRetries: 3, BufferBody: 64 << 10,
		Health: hp, Tracker: mon.Route("site", 1), Monitor: mon, Stats: new(Stats),
	}
	snap := &Snapshot{
		Tables:  map[string]*route.Table[*Route]{"web": route.New([]*route.Entry[*Route]{{Path: "/", Default: true, Value: rt}})},
		Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		Edge:    edge.New(false, nil, nil, nil),
	}
	var ptr atomic.Pointer[Snapshot]
	ptr.Store(snap)
	return &Handler{Listener: "web", Snapshot: &ptr}
}

// BenchmarkHandler1KiB is one 1 KiB GET through the whole handler with the
// network taken out: the proxy's own CPU and allocations per request.
func BenchmarkHandler1KiB(b *testing.B) {
	benchHandler(b, newBenchHandler(b, cannedUpstream{body: bytes.Repeat([]byte("x"), 1024)}))
}

// BenchmarkHealthModelCost is the same request with passive evidence off
// and on: the cost of the attribution bookkeeping on a successful request.
func BenchmarkHealthModelCost(b *testing.B) {
	up := cannedUpstream{body: bytes.Repeat([]byte("x"), 1024)}
	b.Run("passive=off", func(b *testing.B) { benchHandler(b, newBenchHandlerWith(b, up, "{ passive: { enabled: false } }")) })
	b.Run("passive=on", func(b *testing.B) { benchHandler(b, newBenchHandlerWith(b, up, "{}")) })
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
