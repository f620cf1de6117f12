package pool

import (
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"
)

func specs(weights ...int) []Spec {
	s := make([]Spec, len(weights))
	for i, w := range weights {
		s[i] = Spec{Addr: fmt.Sprintf("10.0.0.%d:80", i+1), Weight: w}
	}
	return s
}

func count(t *testing.T, p *Pool, n int, key func(i int) uint64) []int {
	t.Helper()
	got := make([]int, len(p.Hosts))
	for i := range n {
		var tr Tried
		h := p.Next(key(i), tr)
		if h == nil {
			t.Fatal("no host")
		}
		got[h.Index]++
	}
	return got
}

func zero(int) uint64 { return 0 }

func TestRoundRobinSmoothWeights(t *testing.T) {
	p, _ := New("p", RoundRobin, specs(5, 1, 1), nil)
	// Smooth: the heavy host never gets more than its share in a row of 7,
	// and every window of 7 has exactly 5/1/1.
	var seq []int
	for range 70 {
		var tr Tried
		seq = append(seq, p.Next(0, tr).Index)
	}
	for w := 0; w+7 <= len(seq); w += 7 {
		c := [3]int{}
		for _, i := range seq[w : w+7] {
			c[i]++
		}
		if c != [3]int{5, 1, 1} {
			t.Fatalf("window %d: %v (seq %v)", w, c, seq[:14])
		}
	}
	// nginx's sequence for 5,1,1 is a a b a c a a: at most four a's in a
	// row across the wrap, never five.
	for i := 4; i < len(seq); i++ {
		if seq[i] == 0 && seq[i-1] == 0 && seq[i-2] == 0 && seq[i-3] == 0 && seq[i-4] == 0 {
			t.Fatalf("not smooth: %v", seq[:14])
		}
	}
}

func TestSkipsUnavailableAndTried(t *testing.T) {
	for _, policy := range []string{RoundRobin, LeastConn, RandomTwo, Hash} {
		p, _ := New("p", policy, specs(1, 1, 1), nil)
		p.Hosts[1].Transition(Healthy, Down, "test", "", time.Now())
		for i := range 50 {
			var tr Tried
			tr.Add(p.Hosts[0])
			h := p.Next(uint64(i)*0x9e3779b97f4a7c15, tr)
			if h != p.Hosts[2] {
				t.Fatalf("%s: got host %v, want the only usable one", policy, h)
			}
			tr.Add(h)
			if h := p.Next(uint64(i), tr); h != nil {
				t.Fatalf("%s: got %v after all tried", policy, h.Addr)
			}
		}
	}
}

func TestLeastConnPrefersIdle(t *testing.T) {
	p, _ := New("p", LeastConn, specs(1, 1, 1), nil)
	p.Hosts[0].Acquire()
	p.Hosts[0].Acquire()
	p.Hosts[2].Acquire()
	var tr Tried
	if h := p.Next(0, tr); h != p.Hosts[1] {
		t.Fatalf("picked %d", h.Index)
	}
}

func TestRandomTwoDistribution(t *testing.T) {
	p, _ := New("p", RandomTwo, specs(1, 3), nil)
	got := count(t, p, 40000, zero)
	// Both idle: ties keep the first sample, drawn by weight, so the split
	// follows weights closely.
	if r := float64(got[1]) / float64(got[0]); r < 2.5 || r > 3.6 {
		t.Fatalf("ratio %.2f (%v), want about 3", r, got)
	}
}

func TestHashSpreadAndRemap(t *testing.T) {
	p, _ := New("p", Hash, specs(1, 1, 1, 1), nil)
	key := func(i int) uint64 { return HashString("192.0.2." + strconv.Itoa(i%250) + "/" + strconv.Itoa(i)) }
	const n = 20000
	got := count(t, p, n, key)
	for i, c := range got {
		if math.Abs(float64(c)-n/4) > n/4*0.2 {
			t.Fatalf("host %d got %d of %d (%v): uneven", i, c, n, got)
		}
	}
	before := make([]int, n)
	for i := range n {
		var tr Tried
		before[i] = p.Next(key(i), tr).Index
	}
	p.Hosts[2].Transition(Healthy, Down, "test", "", time.Now())
	moved := 0
	for i := range n {
		var tr Tried
		after := p.Next(key(i), tr).Index
		if before[i] != 2 && after != before[i] {
			t.Fatalf("key %d moved from healthy host %d to %d", i, before[i], after)
		}
		if before[i] == 2 {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("no keys were on host 2")
	}
}

func TestStateSurvivesRebuild(t *testing.T) {
	p1, _ := New("p", RoundRobin, specs(1, 1), nil)
	p1.Hosts[1].Transition(Healthy, Down, "test", "", time.Now())
	p2, _ := New("p", RoundRobin, specs(1, 1, 1), func(addr string) *State {
		for _, h := range p1.Hosts {
			if h.Addr == addr {
				return h.State
			}
		}
		return nil
	})
	if p2.Hosts[1].Available() || !p2.Hosts[2].Available() {
		t.Fatal("state not carried over")
	}
	now := time.Now()
	if !p2.Hosts[1].Transition(Down, Healthy, "up", "", now) || p2.Hosts[1].Transition(Down, Healthy, "up", "", now) {
		t.Fatal("a transition must happen exactly once")
	}
}

func BenchmarkNext(b *testing.B) {
	for _, policy := range []string{RoundRobin, LeastConn, RandomTwo, Hash} {
		p, _ := New("p", policy, specs(1, 2, 3, 1), nil)
		b.Run(policy, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				var tr Tried
				p.Next(uint64(i)*0x9e3779b97f4a7c15, tr)
			}
		})
	}
}

func TestPanicPicksLeastRecentlyFailedEjectedHost(t *testing.T) {
	p, _ := New("p", RoundRobin, specs(1, 1, 1), nil)
	now := time.Now()
	p.Hosts[0].Transition(Healthy, Ejected, "", "", now)
	p.Hosts[1].Transition(Healthy, Ejected, "", "", now)
	p.Hosts[2].Transition(Healthy, Down, "", "", now)
	p.Hosts[0].LastFailure.Store(now.UnixNano())
	p.Hosts[1].LastFailure.Store(now.Add(-time.Second).UnixNano())
	var tr Tried
	if h := p.Next(0, tr); h != nil {
		t.Fatalf("Next gave %d with every host out", h.Index)
	}
	if h := p.Panic(tr); h != p.Hosts[1] {
		t.Fatalf("panic picked %v, want host 1", h)
	}
	tr.Add(p.Hosts[1])
	if h := p.Panic(tr); h != p.Hosts[0] {
		t.Fatalf("panic picked %v, want host 0", h)
	}
	tr.Add(p.Hosts[0])
	if h := p.Panic(tr); h != nil {
		t.Fatalf("panic picked host %d, which is down by active checks", h.Index)
	}
}

func TestSlowStartRamps(t *testing.T) {
	var s State
	s.SlowStart(time.Now(), time.Hour)
	n := 0
	for range 1000 {
		if s.Available() {
			n++
		}
	}
	if n < 50 || n > 200 {
		t.Fatalf("available %d of 1000 at the start of slow start; want about 10%%", n)
	}
	s.SlowStart(time.Now().Add(-2*time.Hour), time.Hour)
	if !s.Available() || s.slowStartDur.Load() != 0 {
		t.Fatal("slow start did not end")
	}
}

func TestWindowSlides(t *testing.T) {
	var w Window
	w.SetSpan(10 * time.Second)
	t0 := time.Unix(1000, 0)
	w.Failure(t0, Bit(1), Bit(7))
	w.Success(t0.Add(time.Second), Bit(2), Bit(7))
	w.Attempt(t0.Add(2 * time.Second))
	got := w.Sum(t0.Add(2 * time.Second))
	if got.Requests != 3 || got.Failures != 1 || Count(got.FailClients) != 1 || Count(got.OKClients) != 1 {
		t.Fatalf("sum %+v", got)
	}
	if got := w.Sum(t0.Add(10500 * time.Millisecond)); got.Requests != 2 || got.Failures != 0 {
		t.Fatalf("after the first second slid out: %+v", got)
	}
	if got := w.Sum(t0.Add(time.Minute)); got.Requests != 0 {
		t.Fatalf("after a minute: %+v", got)
	}
}
