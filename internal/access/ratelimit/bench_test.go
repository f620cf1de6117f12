package ratelimit

import (
	"fmt"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// The decision's cost per request:
//
//	go test -run '^$' -bench . -benchmem ./internal/access/ratelimit
//
// Known key: the steady state of a returning client. New key: a client the
// table has not seen, on a full table of idle keys (the steady state under
// a stream of new addresses: each new key evicts an idle one and copies its
// key, one allocation). Route: Limits.Decide with a client_ip zone, what
// the proxy calls.
func BenchmarkTakeKnownKey(b *testing.B) {
	tb := NewTable(65536, time.Millisecond)
	key := "192.0.2.10"
	now := time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		tb.Take(key, now.Add(time.Duration(i)*time.Millisecond), 10, -1)
	}
}

func BenchmarkTakeKnownKeyParallel(b *testing.B) {
	tb := NewTable(65536, time.Microsecond)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		keys := make([]string, 64)
		for i := range keys {
			keys[i] = fmt.Sprintf("198.51.%d.%d", i, time.Now().UnixNano()%250)
		}
		now := time.Now()
		for i := 0; pb.Next(); i++ {
			tb.Take(keys[i%len(keys)], now, 10, -1)
		}
	})
}

func BenchmarkTakeNewKey(b *testing.B) {
	const size = 65536
	tb := NewTable(size, time.Millisecond)
	keys := make([]string, 4*size)
	for i := range keys {
		keys[i] = fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)
	}
	start := time.Now()
	for i := range size { // fill the table
		tb.Take(keys[i], start, 0, -1)
	}
	before := tb.Stats().Untracked
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		// One interval per request: the least recently used keys are idle.
		tb.Take(keys[(size+i)%len(keys)], start.Add(time.Duration(1+i)*time.Millisecond), 0, -1)
	}
	if n := tb.Stats().Untracked - before; n != 0 {
		b.Fatalf("%d keys untracked: the benchmark measured the full-table path", n)
	}
}

func BenchmarkRouteDecide(b *testing.B) {
	zs, _ := CompileZones([]config.RateLimitZone{{Name: "ip", Key: "client_ip", Rate: config.Rate{N: 1000, Per: time.Second}, Size: 65536}}, nil, nil)
	l, _ := zs.Route("routes[0]", "api", []config.RateLimit{{Zone: "ip", Burst: 10, NoDelay: true}})
	r := request(nil)
	c := Client{Addr: "192.0.2.10"}
	now := time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		l.Decide(r, c, now.Add(time.Duration(i)*time.Millisecond))
	}
}
