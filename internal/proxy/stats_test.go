package proxy

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/cache"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/outcome"
)

func hostBytes(p *health.Pool) (received, sent, headers uint64) {
	for _, h := range p.Hosts {
		r, s := h.Bytes()
		_, n, _ := h.HeaderTime()
		received, sent, headers = received+r, sent+s, headers+n
	}
	return
}

// The bytes a host sent are counted once, whether the answer went straight
// to the client or through the cache; an answer from the store counts none.
// Request bodies count as sent; every answer with headers has a time.
func TestHostBytesAndHeaderTime(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 1000)
	plain := newFixture(t, 2, cannedUpstream{body: body})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("PUT", "http://example.com/a", strings.NewReader("hello"))
	req.RemoteAddr = "192.0.2.7:5000"
	plain.h.ServeHTTP(rec, req)
	if got, sent, n := hostBytes(plain.pool); rec.Code != 200 || got != 1000 || sent != 5 || n != 1 {
		t.Errorf("plain route: %d, received %d sent %d, %d header times; want 1000, 5, 1", rec.Code, got, sent, n)
	}

	c := cache.New(cache.Options{})
	t.Cleanup(func() { c.Close() })
	cached := newFixture(t, 2, cacheableUpstream{body: body}, func(_ *health.PoolConfig, rt *Route) {
		rt.Cache, rt.CachePolicy = c, &cache.Policy{Route: "site"}
	})
	for range 3 { // a miss, then two hits from the store
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "http://example.com/b", nil)
		req.RemoteAddr = "192.0.2.7:5000"
		cached.h.ServeHTTP(rec, req)
		if rec.Code != 200 || rec.Body.Len() != 1000 {
			t.Fatalf("cached route: %d, %d bytes", rec.Code, rec.Body.Len())
		}
	}
	if got, _, n := hostBytes(cached.pool); got != 1000 || n != 1 {
		t.Errorf("cached route: received %d, %d header times; want 1000 and 1 (the miss only)", got, n)
	}
}

// The route's last minute counts answers by class, and 5xx answers to
// attributed clients apart; a minute later they are gone.
func TestRouteRecent(t *testing.T) {
	var s Stats
	now := time.Date(2026, 9, 26, 6, 40, 0, 0, time.UTC)
	s.observe(200, time.Millisecond, now.UnixNano(), false)
	s.observe(503, time.Millisecond, now.UnixNano(), false)
	s.observe(502, time.Millisecond, now.UnixNano(), true)
	s.observe(499, time.Millisecond, now.UnixNano(), false)
	r := s.Recent(now.Add(time.Second), time.Hour)
	if r.Requests["2xx"] != 1 || r.Requests["5xx"] != 2 || r.Requests["499"] != 1 || r.ClientErrors != 1 {
		t.Errorf("recent %+v", r)
	}
	if r := s.Recent(now.Add(2*time.Minute), time.Hour); r.Requests["5xx"] != 0 || r.Seconds < 55 {
		t.Errorf("two minutes later: %+v", r)
	}
	if r := s.Recent(now.Add(time.Second), 3*time.Second); r.Seconds != 3 {
		t.Errorf("three seconds after start the window spans %vs", r.Seconds)
	}
}

// requestMetrics is what one proxied request adds to the metrics besides
// the health model: the route's answer (status class, duration histogram,
// last minute) and the host's attempt (last minute, time to headers,
// bytes each way). The handler makes exactly these calls.
func requestMetrics(rt *Route, h *health.Host, now time.Time) {
	h.Observe(outcome.OK, 3*time.Millisecond, 512, now.UnixNano())
	h.Received(1024)
	rt.Stats.observe(200, 4*time.Millisecond, now.UnixNano(), false)
}

// The per-request metrics allocate nothing: counters, histograms and the
// last-minute windows are atomics in structures that live as long as the
// route and the host.
func TestRequestMetricsAllocateNothing(t *testing.T) {
	f := newFixture(t, 2, cannedUpstream{})
	h, now := f.pool.Hosts[0], time.Now()
	if n := testing.AllocsPerRun(1000, func() { requestMetrics(f.rt, h, now) }); n != 0 {
		t.Fatalf("the per-request metrics allocate %.1f times", n)
	}
	if _, fails, _ := h.Recent(now); fails != 0 {
		t.Fatalf("%d failures recorded for ok attempts", fails)
	}
}

// BenchmarkRequestMetrics prices the per-request metrics alone, from every
// P at once on one route and one host: they take no lock, so what shared
// counters cost is cache-line traffic, not waiting.
//
//	go test -run x -bench RequestMetrics -benchmem -cpu 1,2 ./internal/proxy/
func BenchmarkRequestMetrics(b *testing.B) {
	f := newFixture(b, 2, cannedUpstream{})
	h := f.pool.Hosts[0]
	now := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			requestMetrics(f.rt, h, now)
		}
	})
}
