package connlimit

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/config"
)

func limits(t *testing.T, prev *Zones, size int, ls ...config.ConnLimit) (*Zones, *Limits) {
	t.Helper()
	zs, err := CompileZones([]config.ConnLimitZone{
		{Name: "ip", Key: "client_ip", Size: size},
		{Name: "route", Key: "route", Size: size},
	}, prev)
	if err != nil {
		t.Fatal(err)
	}
	l, err := zs.Route("routes[0]", "api", ls)
	if err != nil {
		t.Fatal(err)
	}
	return zs, l
}

var req, _ = http.NewRequest("GET", "http://example.com/", nil)

func TestInFlightPerKeyIsBounded(t *testing.T) {
	zs, l := limits(t, nil, 64, config.ConnLimit{Zone: "ip", Max: 2, Status: 503})
	h1, r1 := l.Acquire(req, "192.0.2.1")
	h2, r2 := l.Acquire(req, "192.0.2.1")
	_, r3 := l.Acquire(req, "192.0.2.1")
	h4, r4 := l.Acquire(req, "192.0.2.2")
	if r1 != nil || r2 != nil || r4 != nil {
		t.Fatal("requests within the limit were refused")
	}
	if r3 == nil || r3.Status != 503 || r3.Zone != "ip" {
		t.Fatalf("third request of one client: %+v, want refused with 503 by ip", r3)
	}
	h1.Release()
	h5, r5 := l.Acquire(req, "192.0.2.1")
	if r5 != nil {
		t.Fatal("a released slot was not given back")
	}
	h2.Release()
	h4.Release()
	h5.Release()
	if n := zs.byName["ip"].t.InFlight("192.0.2.1"); n != 0 {
		t.Fatalf("%d still in flight after every release", n)
	}
	if got := zs.Stats(); len(got) != 1 || got[0].Passed != 4 || got[0].Rejected != 1 || got[0].KeyKind != "client_ip" {
		t.Fatalf("stats %+v", got)
	}
}

// A refusal by the second zone releases what the first took.
func TestARefusalReleasesTheEarlierZones(t *testing.T) {
	zs, l := limits(t, nil, 64, config.ConnLimit{Zone: "ip", Max: 5}, config.ConnLimit{Zone: "route", Max: 1})
	h, _ := l.Acquire(req, "192.0.2.1")
	if _, r := l.Acquire(req, "192.0.2.2"); r == nil || r.Zone != "route" || r.Status != config.DefaultConnLimitStatus {
		t.Fatalf("refusal %+v, want route with the default status", r)
	}
	if n := zs.byName["ip"].t.InFlight("192.0.2.2"); n != 0 {
		t.Fatalf("the refused request still counts %d in ip", n)
	}
	h.Release()
}

// A full table lets new keys through uncounted and keeps limiting the keys
// it holds.
func TestFullTableLetsNewKeysThroughUncounted(t *testing.T) {
	zs, l := limits(t, nil, 2, config.ConnLimit{Zone: "ip", Max: 1})
	a, _ := l.Acquire(req, "192.0.2.1")
	b, _ := l.Acquire(req, "192.0.2.2")
	c, r := l.Acquire(req, "192.0.2.3")
	if r != nil {
		t.Fatal("a new key on a full table was refused")
	}
	if _, r := l.Acquire(req, "192.0.2.1"); r == nil {
		t.Fatal("a counted key stopped being limited")
	}
	c.Release() // holds nothing: must not disturb the others
	a.Release()
	b.Release()
	if st := zs.Stats()[0]; st.Untracked != 1 || st.Rejected != 1 {
		t.Fatalf("stats %+v", st)
	}
	if _, r := l.Acquire(req, "192.0.2.3"); r != nil {
		t.Fatal("room was not made when keys ended")
	}
}

// Requests without the key are not limited (nginx: an empty key).
func TestRequestsWithoutTheKeyAreNotLimited(t *testing.T) {
	zs, _ := limits(t, nil, 4)
	l, _ := zs.Route("routes[0]", "api", []config.ConnLimit{{Zone: "ip", Max: 1}})
	for range 3 {
		if _, r := l.Acquire(req, ""); r != nil {
			t.Fatal("refused a request with no client address")
		}
	}
	if st := zs.Stats()[0]; st.NoKey != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// Requests in flight across a reload stay counted, and their release lands
// in the table that counted them.
func TestReloadKeepsCountsInFlight(t *testing.T) {
	old, l := limits(t, nil, 64, config.ConnLimit{Zone: "ip", Max: 1})
	h, _ := l.Acquire(req, "192.0.2.1")
	_, l2 := limits(t, old, 64, config.ConnLimit{Zone: "ip", Max: 1})
	if _, r := l2.Acquire(req, "192.0.2.1"); r == nil {
		t.Fatal("a request in flight before the reload was forgotten")
	}
	h.Release()
	h2, r := l2.Acquire(req, "192.0.2.1")
	if r != nil {
		t.Fatal("its release did not reach the new config's count")
	}
	h2.Release()
}

func TestConcurrentAcquireNeverExceedsMax(t *testing.T) {
	_, l := limits(t, nil, 1024, config.ConnLimit{Zone: "ip", Max: 3})
	var now, peak atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 500 {
				h, r := l.Acquire(req, "192.0.2.9")
				if r != nil {
					continue
				}
				n := now.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				now.Add(-1)
				h.Release()
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > 3 || p < 1 {
		t.Fatalf("peak in flight %d, want 1 to 3", p)
	}
}

func TestKnownKeyDoesNotAllocate(t *testing.T) {
	_, l := limits(t, nil, 64, config.ConnLimit{Zone: "ip", Max: 10})
	key := "192.0.2.1"
	h0, _ := l.Acquire(req, key) // keeps the key in the table
	if n := testing.AllocsPerRun(1000, func() {
		h, _ := l.Acquire(req, key)
		h.Release()
	}); n != 0 {
		t.Errorf("%v allocations per request", n)
	}
	h0.Release()
}

func BenchmarkAcquireRelease(b *testing.B) {
	zs, _ := CompileZones([]config.ConnLimitZone{{Name: "ip", Key: "client_ip", Size: 65536}}, nil)
	l, _ := zs.Route("routes[0]", "api", []config.ConnLimit{{Zone: "ip", Max: 10}})
	b.ReportAllocs()
	for b.Loop() {
		h, _ := l.Acquire(req, "192.0.2.1")
		h.Release()
	}
}
