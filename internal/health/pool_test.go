package health

import (
	"fmt"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/health/balance"
)

func newTestPool(t testing.TB, balanceKind string, weights []int, prev *Pool) *Pool {
	t.Helper()
	pc := PoolConfig{Name: "p", Balance: balanceKind, Passive: Passive{Window: 10 * time.Second}}
	for i, w := range weights {
		pc.Hosts = append(pc.Hosts, HostSpec{Addr: fmt.Sprintf("10.0.0.%d:80", i+1), Weight: w})
	}
	p, err := NewPool(NewMonitor(Options{}), testAttributing, pc, prev)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func shares(p *Pool, n int) []int {
	got := make([]int, len(p.Hosts))
	for range n {
		var tr balance.Tried
		if h := p.Next(0, &tr, t0); h != nil {
			got[h.Index()]++
		}
	}
	return got
}

// A host that leaves rotation gives its share to every other host in
// proportion to their weights, not to its neighbour in the schedule.
func TestAnOutHostsShareIsSpreadOverTheRest(t *testing.T) {
	for _, kind := range []string{balance.RoundRobin, balance.LeastConn, balance.RandomTwo} {
		p := newTestPool(t, kind, []int{1, 1, 1, 1}, nil)
		p.Hosts[1].transition(Healthy, Ejected, "test", "", t0)
		got := shares(p, 3000)
		if got[1] != 0 {
			t.Fatalf("%s: the ejected host got %d requests", kind, got[1])
		}
		for _, i := range []int{0, 2, 3} {
			if got[i] < 900 || got[i] > 1100 {
				t.Fatalf("%s: shares %v, want about 1000 each on the three in rotation", kind, got)
			}
		}
	}
}

func TestNextSkipsTriedHostsAndCappedOnes(t *testing.T) {
	for _, kind := range []string{balance.RoundRobin, balance.LeastConn, balance.RandomTwo, balance.Hash} {
		p := newTestPool(t, kind, []int{1, 1, 1}, nil)
		p.MaxInFlight = 1
		p.Hosts[1].Acquire()
		for i := range 50 {
			var tr balance.Tried
			tr.Add(0)
			if h := p.Next(uint64(i), &tr, t0); h != p.Hosts[2] {
				t.Fatalf("%s: got %v, want the only usable host", kind, h)
			}
			tr.Add(2)
			if h := p.Next(uint64(i), &tr, t0); h != nil {
				t.Fatalf("%s: got %s with every host tried or full", kind, h.Addr)
			}
		}
	}
}

func TestStateIsCarriedToTheNextConfigsPool(t *testing.T) {
	p1 := newTestPool(t, balance.RoundRobin, []int{1, 1}, nil)
	p1.Hosts[1].transition(Healthy, Down, "test", "", t0)
	p2 := newTestPool(t, balance.RoundRobin, []int{1, 1, 1}, p1)
	if p2.Hosts[1].Mode() != Down || p2.Hosts[2].Mode() != Healthy {
		t.Fatal("state not carried over")
	}
	if got := shares(p2, 300); got[1] != 0 {
		t.Fatalf("the down host got %d requests in the new config", got[1])
	}
	// A transition seen through the old config's pool reaches the new one.
	if !p1.Hosts[1].transition(Down, Healthy, "up", "", t0) || p2.Hosts[1].transition(Down, Healthy, "up", "", t0) {
		t.Fatal("a transition must happen exactly once")
	}
	if got := shares(p2, 300); got[1] == 0 {
		t.Fatal("the host back in rotation gets nothing in the new config")
	}
}

func TestPanicPicksTheLeastRecentlyFailedEjectedHost(t *testing.T) {
	p := newTestPool(t, balance.RoundRobin, []int{1, 1, 1}, nil)
	p.Hosts[0].transition(Healthy, Ejected, "", "", t0)
	p.Hosts[1].transition(Healthy, Ejected, "", "", t0)
	p.Hosts[2].transition(Healthy, Down, "", "", t0)
	p.Hosts[0].lastFailure.Store(t0.UnixNano())
	p.Hosts[1].lastFailure.Store(t0.Add(-time.Second).UnixNano())
	var tr balance.Tried
	if h := p.Next(0, &tr, t0); h != nil {
		t.Fatalf("Next gave %s with every host out", h.Addr)
	}
	for _, want := range []*Host{p.Hosts[1], p.Hosts[0], nil} {
		h := p.Panic(&tr)
		if h != want {
			t.Fatalf("panic picked %v, want %v", h, want)
		}
		if h != nil {
			tr.Add(h.Index())
		}
	}
}

func TestSlowStartRamps(t *testing.T) {
	var s hostState
	s.slowStart(t0, time.Hour)
	n := 0
	for range 1000 {
		if s.slowStartAllows(t0.UnixNano()) {
			n++
		}
	}
	if n < 50 || n > 150 {
		t.Fatalf("at the start of the ramp %d of 1000 allowed, want about 100", n)
	}
	if !s.slowStartAllows(t0.Add(time.Hour).UnixNano()) || s.slowStartDur.Load() != 0 {
		t.Fatal("the ramp does not end")
	}
}

func BenchmarkNext(b *testing.B) {
	for _, kind := range []string{balance.RoundRobin, balance.LeastConn, balance.RandomTwo, balance.Hash} {
		p := newTestPool(b, kind, []int{1, 2, 3, 1}, nil)
		b.Run(kind, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				var tr balance.Tried
				p.Next(uint64(i)*0x9e3779b97f4a7c15, &tr, t0)
			}
		})
	}
}

// BenchmarkNextManyOut is the request path's pick while hosts are out: one
// of six drained (the rotation is rebuilt without it, so it costs nothing
// per request), one in slow start (its turns are redrawn by weight), and a
// retry that has tried one host already; in parallel, to show that picks
// share no lock.
func BenchmarkNextManyOut(b *testing.B) {
	for _, kind := range []string{balance.RoundRobin, balance.LeastConn, balance.RandomTwo, balance.Hash} {
		p := newTestPool(b, kind, []int{1, 1, 1, 1, 1, 1}, nil)
		p.SetMode(p.Hosts[1].Addr, Drained, t0)
		p.Hosts[2].slowStart(t0, time.Hour)
		b.Run(kind, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for i := uint64(0); pb.Next(); i++ {
					var tr balance.Tried
					if i%4 == 0 {
						tr.Add(0)
					}
					if p.Next(i*0x9e3779b97f4a7c15, &tr, t0) == nil {
						b.Fatal("no host")
					}
				}
			})
		})
	}
}

// A host in slow start takes its weight times its ramp (10% at first); the
// share it does not take goes to the others by weight, not all to its
// neighbour in the round-robin order.
func TestSlowStartShedsItsShareByWeight(t *testing.T) {
	for _, kind := range []string{balance.RoundRobin, balance.LeastConn, balance.RandomTwo} {
		p := newTestPool(t, kind, []int{1, 1, 1}, nil)
		p.Hosts[0].slowStart(t0, time.Hour)
		got := shares(p, 21000)
		// Effective weights 0.1, 1, 1: 1000, 10000, 10000.
		if got[0] < 600 || got[0] > 1400 || got[1] < 9300 || got[1] > 10700 || got[2] < 9300 || got[2] > 10700 {
			t.Fatalf("%s: shares %v, want about 1000/10000/10000", kind, got)
		}
	}
}

// Picking a host allocates nothing, for every policy, with a host out, a
// host in slow start and a retry: a leak of the request's Tried (through
// an interface, a closure kept) would cost every request an allocation.
func TestNextAllocatesNothing(t *testing.T) {
	for _, kind := range []string{balance.RoundRobin, balance.LeastConn, balance.RandomTwo, balance.Hash} {
		p := newTestPool(t, kind, []int{1, 2, 1, 1}, nil)
		p.SetMode(p.Hosts[1].Addr, Drained, t0)
		p.Hosts[2].slowStart(t0, time.Hour)
		i := uint64(0)
		if n := testing.AllocsPerRun(1000, func() {
			i++
			var tr balance.Tried
			tr.Add(int(i % 4))
			p.Next(i*0x9e3779b97f4a7c15, &tr, t0)
		}); n != 0 {
			t.Errorf("%s: Next allocates %.1f times per request", kind, n)
		}
	}
}
