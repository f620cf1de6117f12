package recent

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 9, 26, 6, 40, 0, 0, time.UTC)

// A minute-old event is gone; a recent one stays; slots are separate.
func TestWindowSlides(t *testing.T) {
	var w Window
	w.Add(t0.UnixNano(), 5)
	w.Add(t0.UnixNano(), 5)
	w.Add(t0.Add(30*time.Second).UnixNano(), 2)
	if got := w.Sum(t0.Add(31 * time.Second)); got.N[5] != 2 || got.N[2] != 1 {
		t.Fatalf("after 31s: %v", got.N)
	}
	// t0's slice leaves the window between 55 and 60 s later.
	if got := w.Sum(t0.Add(61 * time.Second)); got.N[5] != 0 || got.N[2] != 1 {
		t.Fatalf("after 61s: %v", got.N)
	}
	if got := w.Sum(t0.Add(2 * time.Minute)); got.N[2] != 0 {
		t.Fatalf("after 2m: %v", got.N)
	}
}

// A slice reused a lap later starts from zero, not from the old counts.
func TestWindowClearsOldLap(t *testing.T) {
	var w Window
	for range 10 {
		w.Add(t0.UnixNano(), 1)
	}
	later := t0.Add(Span) // the same slice, one lap on
	w.Add(later.UnixNano(), 1)
	if got := w.Sum(later); got.N[1] != 1 {
		t.Fatalf("one lap later: %d, want 1", got.N[1])
	}
}

func TestWindowSpan(t *testing.T) {
	var w Window
	if s := w.Sum(t0).Span; s != Span-Width {
		t.Errorf("at a slice boundary: %s", s)
	}
	if s := w.Sum(t0.Add(2 * time.Second)).Span; s != Span-Width+2*time.Second {
		t.Errorf("2s into a slice: %s", s)
	}
}

// Concurrent adds are all counted while the slice does not change.
func TestWindowConcurrentAdds(t *testing.T) {
	var w Window
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				w.Add2(t0.UnixNano(), 0, 3)
			}
		})
	}
	wg.Wait()
	if got := w.Sum(t0); got.N[0] != 8000 || got.N[3] != 8000 {
		t.Fatalf("%v", got.N)
	}
}

// BenchmarkAdd is the request path's cost of a Window: one add per answer.
func BenchmarkAdd(b *testing.B) {
	var w Window
	now := time.Now()
	for b.Loop() {
		w.Add(now.UnixNano(), 2)
	}
}

// Adds that race with the first add of a new lap are all counted: one of
// them takes the slice over from the older lap while others already add
// to it. Each round starts a slice's new lap with adders released at once
// from a spin, so the takeover races with adds on every core; a takeover
// that cleared the slice after marking it as its own lost a count in
// most runs of this test.
func TestWindowConcurrentAddsAtRollover(t *testing.T) {
	const (
		rounds = 2000
		each   = 20
	)
	adders := 2 * runtime.GOMAXPROCS(0)
	var w Window
	for r := range rounds {
		at := t0.Add(time.Duration(r) * Span).UnixNano() // the same slice, a lap later each round
		var ready, wg sync.WaitGroup
		start := make(chan struct{})
		ready.Add(adders)
		for range adders {
			wg.Go(func() {
				ready.Done()
				<-start
				for range each {
					w.Add2(at, 0, 3)
				}
			})
		}
		ready.Wait()
		close(start)
		wg.Wait()
		if got := w.Sum(time.Unix(0, at)); got.N[0] != uint64(adders*each) || got.N[3] != uint64(adders*each) {
			t.Fatalf("round %d: counted %d and %d of %d", r, got.N[0], got.N[3], adders*each)
		}
	}
}
