package ratelimit

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

const ms = time.Millisecond

type step struct {
	after time.Duration // sleep before the request (fake time)
	key   string
	want  Decision
}

// run plays steps against a fresh table at 10r/s in a synctest bubble.
func run(t *testing.T, size, burst, delay int, steps []step) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		tb := NewTable(size, 100*ms)
		for i, s := range steps {
			time.Sleep(s.after)
			key := s.key
			if key == "" {
				key = "k"
			}
			got, _ := tb.Take(key, time.Now(), burst, delay)
			if got != s.want {
				t.Errorf("step %d (%s): got %v %v, want %v %v", i, key, got.Verdict, got.Wait, s.want.Verdict, s.want.Wait)
			}
		}
	})
}

var (
	allow = Decision{}
	delay = func(d time.Duration) Decision { return Decision{Verdict: Delay, Wait: d} }
	rej   = func(d time.Duration) Decision { return Decision{Verdict: Reject, Wait: d} }
)

// nginx: limit_req zone=z (rate=10r/s), no burst: one request per 100ms,
// anything faster is refused until its slot.
func TestWithoutBurstOneRequestPerInterval(t *testing.T) {
	run(t, 16, 0, 0, []step{
		{0, "", allow},
		{0, "", rej(100 * ms)},
		{40 * ms, "", rej(60 * ms)},
		{60 * ms, "", allow},
		{100 * ms, "", allow},
		{0, "other", allow}, // keys have their own buckets
		{300 * ms, "", allow},
		{0, "", rej(100 * ms)},
	})
}

// nginx: limit_req zone=z burst=5: the burst is queued and passed at the
// rate, so the n-th excess request waits n intervals; the one after the
// burst is refused, and refused requests are not charged.
func TestBurstIsDelayedUntilEachSlot(t *testing.T) {
	run(t, 16, 5, 0, []step{
		{0, "", allow},
		{0, "", delay(100 * ms)},
		{0, "", delay(200 * ms)},
		{0, "", delay(300 * ms)},
		{0, "", delay(400 * ms)},
		{0, "", delay(500 * ms)},
		{0, "", rej(100 * ms)},
		{0, "", rej(100 * ms)}, // not charged: the same wait
		{100 * ms, "", delay(500 * ms)},
		{550 * ms, "", delay(50 * ms)}, // the queue drained to half a slot
		{time.Second, "", allow},
	})
}

// nginx: burst=5 nodelay: the burst passes at once, slots come back at the
// rate.
func TestNodelayPassesTheBurstAtOnce(t *testing.T) {
	steps := []step{}
	for range 6 {
		steps = append(steps, step{0, "", allow})
	}
	steps = append(steps,
		step{0, "", rej(100 * ms)},
		step{100 * ms, "", allow},
		step{0, "", rej(100 * ms)},
		step{550 * ms, "", allow}, // 5.5 slots drained: half a slot still owed
		step{0, "", allow},
		step{0, "", allow},
		step{0, "", allow},
		step{0, "", allow},
		step{0, "", rej(50 * ms)},
	)
	run(t, 16, 5, -1, steps)
}

// nginx: burst=5 delay=2: two excess requests pass at once, the rest of the
// burst is spaced from there.
func TestTwoStageDelay(t *testing.T) {
	run(t, 16, 5, 2, []step{
		{0, "", allow},
		{0, "", allow},
		{0, "", allow},
		{0, "", delay(100 * ms)},
		{0, "", delay(200 * ms)},
		{0, "", delay(300 * ms)},
		{0, "", rej(100 * ms)},
	})
}

func TestRefundGivesBackTheSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := NewTable(4, 100*ms)
		tb.Take("k", time.Now(), 0, 0)
		if d, _ := tb.Take("k", time.Now(), 1, 0); d.Verdict != Delay {
			t.Fatalf("second request: %v", d.Verdict)
		}
		tb.Refund("k")
		if d, _ := tb.Take("k", time.Now(), 1, 0); d != delay(100*ms) {
			t.Fatalf("after refund: %v %v, want a delay of one interval", d.Verdict, d.Wait)
		}
	})
}

func TestBlockedPeeksWithoutCharging(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := NewTable(4, 100*ms)
		if b, _ := tb.Blocked("k", time.Now(), 1); b {
			t.Fatal("an unknown key is not blocked")
		}
		tb.Take("k", time.Now(), 1, -1)
		tb.Take("k", time.Now(), 1, -1)
		for range 3 {
			if b, w := tb.Blocked("k", time.Now(), 1); !b || w != 100*ms {
				t.Fatalf("Blocked = %v %v, want true after 100ms", b, w)
			}
		}
		time.Sleep(100 * ms)
		if b, _ := tb.Blocked("k", time.Now(), 1); b {
			t.Fatal("still blocked after its slot")
		}
	})
}

// A full table forgets the least recently used idle key; while every key is
// still being limited, a new key passes untracked and limited keys stay
// limited.
func TestFullTableEvictsIdleKeysAndLetsNewKeysThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := NewTable(4, 100*ms)
		if len(tb.shards) != 1 || tb.Size() != 4 {
			t.Fatalf("a 4-key table should be one shard of 4, got %d shards, size %d", len(tb.shards), tb.Size())
		}
		for _, k := range []string{"a", "b", "c", "d"} {
			tb.Take(k, time.Now(), 0, 0)
			tb.Take(k, time.Now(), 1, -1) // in debt: still limited for 100ms
		}
		d, untracked := tb.Take("e", time.Now(), 0, 0)
		if !untracked || d.Verdict != Allow {
			t.Fatalf("new key on a full table: %v untracked=%v, want allowed untracked", d.Verdict, untracked)
		}
		if d, _ := tb.Take("a", time.Now(), 1, -1); d.Verdict != Reject {
			t.Fatalf("a limited key lost its bucket: %v", d.Verdict)
		}
		time.Sleep(200 * ms) // every bucket has drained
		tb.Take("b", time.Now(), 0, 0)
		tb.Take("b", time.Now(), 1, -1) // b is in use and in debt again
		if _, untracked := tb.Take("e", time.Now(), 0, 0); untracked {
			t.Fatal("idle keys were not evicted for a new one")
		}
		st := tb.Stats()
		if st.Untracked != 1 || st.Evicted != 1 || st.Keys != 4 {
			t.Fatalf("stats %+v, want 1 untracked, 1 evicted, 4 keys", st)
		}
		// Last use, oldest first, was c, d, a, b: c made room.
		hasA, hasC := tb.has("a"), tb.has("c")
		if hasC || !hasA {
			t.Fatalf("evicted the wrong key: a kept=%v c kept=%v; want c (least recently used) gone", hasA, hasC)
		}
	})
}

// Concurrent requests of one key at one instant: exactly burst+1 pass,
// whatever the interleaving (run with -race).
func TestConcurrentTakesNeverOverspendTheBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb := NewTable(1<<14, 100*ms)
		var passed atomic.Int64
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				for i := range 50 {
					key := "shared"
					if i%2 == 1 {
						key = fmt.Sprintf("own-%d-%d", g, i) // new keys on other shards too
					}
					if d, _ := tb.Take(key, time.Now(), 9, -1); d.Verdict == Allow && key == "shared" {
						passed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if n := passed.Load(); n != 10 {
			t.Fatalf("%d requests of one key passed at one instant, want burst+1 = 10", n)
		}
	})
}

func TestShardsAreSizedToTheTable(t *testing.T) {
	for _, tc := range []struct{ size, shards int }{{1, 1}, {511, 1}, {512, 2}, {65536, 64}, {1 << 20, 64}} {
		tb := NewTable(tc.size, ms)
		if len(tb.shards) != tc.shards || tb.Size() < tc.size {
			t.Errorf("size %d: %d shards holding %d, want %d shards holding at least %d", tc.size, len(tb.shards), tb.Size(), tc.shards, tc.size)
		}
	}
}

func TestKnownKeyDoesNotAllocate(t *testing.T) {
	tb := NewTable(1024, ms)
	key := string([]byte("192.0.2.10"))
	tb.Take(key, time.Now(), 10, -1)
	if n := testing.AllocsPerRun(1000, func() { tb.Take(key, time.Now(), 10, -1) }); n != 0 {
		t.Errorf("%v allocations per known key", n)
	}
}

func (t *Table) has(key string) bool {
	h, s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idx.find(s.ents, h, key) >= 0
}

// The index against a map under the churn of a full table: random keys
// added and evicted, every key findable after every step.
func TestIndexSurvivesChurn(t *testing.T) {
	tb := NewTable(64, time.Millisecond)
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Now()
	want := map[string]bool{}
	for step := range 20000 {
		key := fmt.Sprintf("k%d", rng.IntN(500))
		now = now.Add(time.Millisecond) // every other key is idle: each new key evicts one
		tb.Take(key, now, 0, -1)
		want[key] = true
		if step%97 == 0 {
			n := 0
			for k := range want {
				if tb.has(k) {
					n++
				} else {
					delete(want, k) // evicted
				}
			}
			if n != tb.Len() || n > 64 {
				t.Fatalf("step %d: %d of the remembered keys found, table holds %d", step, n, tb.Len())
			}
		}
		if !tb.has(key) {
			t.Fatalf("step %d: %s just taken but not found", step, key)
		}
	}
}
