package logagg

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// lines is a concurrency-safe log sink that keeps each JSON record.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lines) records(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, s := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if s == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatalf("bad line %q: %v", s, err)
		}
		out = append(out, m)
	}
	return out
}

func newLogger(w *lines) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, nil))
}

// Test 2 of the issue at this level: a dead default pool under 500 req/s
// for 20 s gives two conditions per request, and the log gets one line per
// condition per 10 s: 4 lines, not 20,000.
func TestDeadPoolUnderLoadLogsFewLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := &lines{}
		a := New(newLogger(out), Options{})
		ctx, stop := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- a.Run(ctx) }()
		const sorry = "requests from route default answered by sorry page"
		const empty = "attempts on pool default found no available host"
		// Requests arrive between ticks, so each interval sees exactly
		// ten seconds of them.
		time.Sleep(500 * time.Millisecond)
		for range 20 { // seconds
			for range 500 {
				a.Add(sorry)
				a.Add(empty)
			}
			time.Sleep(time.Second)
		}
		synctest.Wait()
		got := out.records(t)
		stop()
		<-done
		if len(got) != 4 {
			t.Fatalf("%d lines after 20s, want 4 (2 conditions x 2 intervals): %v", len(got), got)
		}
		want := "5000 " + empty + " in the last 10s"
		if got[0]["msg"] != want || got[0]["level"] != "WARN" || got[0]["count"] != 5000.0 || got[0]["window"] != "10s" {
			t.Errorf("first line %v, want msg %q", got[0], want)
		}
		if got[1]["msg"] != "5000 "+sorry+" in the last 10s" {
			t.Errorf("second line %v", got[1]["msg"])
		}
		if n := len(out.records(t)); n != 4 {
			t.Errorf("the end of Run wrote %d more lines with nothing counted", n-4)
		}
	})
}

// The end of Run flushes what was counted since the last interval, with
// the window it actually covers.
func TestTheEndOfRunFlushesTheRemainder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := &lines{}
		a := New(newLogger(out), Options{Interval: 10 * time.Second})
		ctx, stop := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- a.Run(ctx) }()
		time.Sleep(3 * time.Second)
		a.AddN("requests from route api shed by its limit", 7)
		stop()
		<-done
		got := out.records(t)
		if len(got) != 1 || got[0]["msg"] != "7 requests from route api shed by its limit in the last 3s" {
			t.Fatalf("got %v", got)
		}
	})
}

func TestFlushWithoutRun(t *testing.T) {
	out := &lines{}
	a := New(newLogger(out), Options{})
	a.Add("x")
	a.Flush()
	if got := out.records(t); len(got) != 1 || got[0]["count"] != 1.0 {
		t.Fatalf("got %v", got)
	}
}

// Keys beyond MaxKeys are folded into one overflow line rather than
// growing memory (a key accidentally built from client input).
func TestMaxKeys(t *testing.T) {
	out := &lines{}
	a := New(newLogger(out), Options{MaxKeys: 3})
	for i := range 10 {
		a.Add(fmt.Sprintf("k%d", i))
	}
	a.Flush()
	got := out.records(t)
	if len(got) != 4 {
		t.Fatalf("%d lines: %v", len(got), got)
	}
	if got[3]["aggregated"] != OverflowKey || got[3]["count"] != 7.0 {
		t.Errorf("overflow line %v", got[3])
	}
}

// Idle keys are forgotten after a few flushes, and counting them again
// works; concurrent adders never lose a count across retirements.
func TestConcurrentAddsAreNeverLost(t *testing.T) {
	out := &lines{}
	a := New(newLogger(out), Options{MaxKeys: 10_000})
	const workers, per = 8, 2000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				// Sparse keys go idle and get retired while others add.
				a.Add(fmt.Sprintf("cond %d", (i/50+w)%7))
			}
		}()
	}
	stop := make(chan struct{})
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		for {
			select {
			case <-stop:
				return
			default:
				a.Flush()
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-flushed
	a.Flush()
	var total float64
	for _, r := range out.records(t) {
		total += r["count"].(float64)
	}
	if total != workers*per {
		t.Fatalf("logged %v occurrences, added %d", total, workers*per)
	}
	// After enough idle flushes every key is forgotten.
	for range idleFlushes {
		a.Flush()
	}
	if n := a.count.Load(); n != 0 {
		t.Errorf("%d keys still held after idling", n)
	}
}

func BenchmarkAddParallel(b *testing.B) {
	a := New(slog.New(slog.DiscardHandler), Options{})
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			a.Add("requests from route site answered by sorry page")
		}
	})
}
