package balance

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

func members(weights ...int) []Member {
	m := make([]Member, len(weights))
	for i, w := range weights {
		m[i] = Member{Key: fmt.Sprintf("10.0.0.%d:80", i+1), Weight: w}
	}
	return m
}

func all(int) bool   { return true }
func idle(int) int64 { return 0 }
func mustNew(t testing.TB, kind string, m []Member) *Policy {
	t.Helper()
	p, err := New(kind, m)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRoundRobinIsSmooth(t *testing.T) {
	p := mustNew(t, RoundRobin, members(5, 1, 1))
	var seq []int
	for range 70 {
		seq = append(seq, p.Pick(0, all, idle))
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
	// nginx's sequence for 5,1,1 is a a b a c a a: never five a's in a row,
	// even across the wrap.
	for i := 4; i < len(seq); i++ {
		if seq[i] == 0 && seq[i-1] == 0 && seq[i-2] == 0 && seq[i-3] == 0 && seq[i-4] == 0 {
			t.Fatalf("not smooth: %v", seq[:14])
		}
	}
}

func TestEveryPolicySkipsWhatIsNotUsable(t *testing.T) {
	for _, kind := range []string{RoundRobin, LeastConn, RandomTwo, Hash} {
		p := mustNew(t, kind, members(1, 1, 1))
		for i := range 50 {
			only2 := func(m int) bool { return m == 2 }
			if got := p.Pick(uint64(i)*0x9e3779b97f4a7c15, only2, idle); got != 2 {
				t.Fatalf("%s: picked %d, want the only usable member 2", kind, got)
			}
			if got := p.Pick(uint64(i), func(int) bool { return false }, idle); got != -1 {
				t.Fatalf("%s: picked %d with nothing usable", kind, got)
			}
		}
	}
}

func TestEmptyPolicyPicksNothing(t *testing.T) {
	for _, kind := range []string{RoundRobin, LeastConn, RandomTwo, Hash} {
		if got := mustNew(t, kind, nil).Pick(7, all, idle); got != -1 {
			t.Fatalf("%s: picked %d from no members", kind, got)
		}
	}
}

func TestLeastConnPrefersTheIdlestPerWeight(t *testing.T) {
	p := mustNew(t, LeastConn, members(1, 1, 2))
	loads := []int64{2, 3, 4} // per weight: 2, 3, 2 -> tie between 0 and 2
	for range 20 {
		got := p.Pick(0, all, func(i int) int64 { return loads[i] })
		if got != 0 && got != 2 {
			t.Fatalf("picked %d (load per weight 3), want 0 or 2", got)
		}
	}
}

func TestRandomTwoFollowsWeights(t *testing.T) {
	p := mustNew(t, RandomTwo, members(1, 3))
	got := [2]int{}
	for range 40000 {
		got[p.Pick(0, all, idle)]++
	}
	if r := float64(got[1]) / float64(got[0]); r < 2.5 || r > 3.6 {
		t.Fatalf("ratio %.2f (%v), want about 3", r, got)
	}
}

func TestHashSpreadsAndARingWithoutAHostMovesOnlyItsKeys(t *testing.T) {
	full := members(1, 1, 1, 1)
	p := mustNew(t, Hash, full)
	key := func(i int) uint64 { return HashString("192.0.2." + strconv.Itoa(i%250) + "/" + strconv.Itoa(i)) }
	const n = 20000
	got := make([]int, 4)
	before := make([]string, n)
	for i := range n {
		m := p.Pick(key(i), all, idle)
		got[m]++
		before[i] = full[m].Key
	}
	for i, c := range got {
		if math.Abs(float64(c)-n/4) > n/4*0.2 {
			t.Fatalf("member %d got %d of %d (%v): uneven", i, c, n, got)
		}
	}
	// Host 3 leaves rotation: the policy is rebuilt over the other three.
	rest := []Member{full[0], full[1], full[3]}
	q := mustNew(t, Hash, rest)
	moved := 0
	for i := range n {
		after := rest[q.Pick(key(i), all, idle)].Key
		if before[i] != full[2].Key && after != before[i] {
			t.Fatalf("key %d moved from %s, still in rotation, to %s", i, before[i], after)
		}
		if before[i] == full[2].Key {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("no keys were on the host that left")
	}
}

func TestUnknownPolicyIsAnError(t *testing.T) {
	if _, err := New("fastest", members(1)); err == nil {
		t.Fatal("no error for an unknown policy")
	}
}

func TestTried(t *testing.T) {
	var tr Tried
	for _, i := range []int{0, 5, 63, 64, 200} {
		if tr.Has(i) {
			t.Fatalf("%d tried before Add", i)
		}
		tr.Add(i)
		if !tr.Has(i) {
			t.Fatalf("%d not tried after Add", i)
		}
	}
	if tr.Len() != 5 {
		t.Fatalf("Len %d, want 5", tr.Len())
	}
}

func BenchmarkPick(b *testing.B) {
	for _, kind := range []string{RoundRobin, LeastConn, RandomTwo, Hash} {
		p := mustNew(b, kind, members(1, 2, 3, 1))
		b.Run(kind, func(b *testing.B) {
			b.ReportAllocs()
			var tr Tried
			for i := 0; b.Loop(); i++ {
				p.Pick(uint64(i)*0x9e3779b97f4a7c15, func(m int) bool { return !tr.Has(m) }, idle)
			}
		})
	}
}

// A member that may not take a request (slow start, its connection cap)
// gives its share to every other member by weight, not to its neighbour in
// the order; a member that takes requests with a chance (slow start) gets
// its weight times that chance.
func TestAnUnusableMembersShareIsSpreadByWeight(t *testing.T) {
	for _, kind := range []string{RoundRobin, LeastConn, RandomTwo} {
		t.Run(kind, func(t *testing.T) {
			p := mustNew(t, kind, members(1, 1, 2, 1))
			const n = 50000
			got := make([]float64, 4)
			for range n {
				got[p.Pick(0, func(m int) bool { return m != 1 }, idle)]++
			}
			// Member 1 out: weights 1, 2, 1 of 4.
			for i, want := range []float64{0.25, 0, 0.5, 0.25} {
				if math.Abs(got[i]/n-want) > 0.02 {
					t.Fatalf("shares %v, want %v of %d", got, []float64{0.25, 0, 0.5, 0.25}, n)
				}
			}
			// Member 0 ramping up, taking a request with a 10% chance: its
			// effective weight is 0.1 against 1, 2, 1.
			got = make([]float64, 4)
			for range n {
				got[p.Pick(0, func(m int) bool { return m != 0 || rand.IntN(10) == 0 }, idle)]++
			}
			total := 0.1 + 1 + 2 + 1
			for i, w := range []float64{0.1, 1, 2, 1} {
				if math.Abs(got[i]/n-w/total) > 0.02 {
					t.Fatalf("shares %v, want weights 0.1/1/2/1 of %d", got, n)
				}
			}
		})
	}
}
