package accesslog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

var sample = Record{
	Time: time.Date(2026, 9, 26, 6, 44, 1, 234_000_000, time.UTC), Client: "203.0.113.7", Method: "GET",
	RequestHost: "shop.example", Path: "/caf\xe9/\"q\"\n\u2028", Route: "site", Pool: "web", Host: "10.0.0.2:80",
	Attempts: 2, Outcome: "ok", Attribution: "", Answer: "normal", Cache: "miss",
	Status: 200, Bytes: 5120, Duration: 12345 * time.Microsecond,
}

func TestRecordJSON(t *testing.T) {
	line := sample.AppendJSON(nil)
	if bytes.ContainsAny(line, "\n\r") {
		t.Fatalf("line breaks inside the record: %s", line)
	}
	var got map[string]any
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatalf("invalid JSON %s: %v", line, err)
	}
	want := map[string]any{
		"time": "2026-09-26T06:44:01.234Z", "client": "203.0.113.7", "method": "GET", "request_host": "shop.example",
		"path": "/caf\ufffd/\"q\"\n\u2028", "route": "site", "pool": "web", "host": "10.0.0.2:80", "attempts": 2.0,
		"outcome": "ok", "answer": "normal", "cache": "miss", "status": 200.0, "bytes": 5120.0, "duration_ms": 12.345,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %#v, want %#v", k, got[k], v)
		}
	}
	if _, ok := got["attribution"]; ok {
		t.Error("empty attribution written")
	}
	if len(got) != len(want) {
		t.Errorf("fields %v", got)
	}
}

func TestRecordJSONAnyBytes(t *testing.T) {
	for _, s := range []string{"\x00\x01\x1f\x7f", "\xff\xfe", "a\\b", "\u2029", "日本", "\xe6\x97"} {
		r := Record{Path: s}
		var m map[string]any
		if err := json.Unmarshal(r.AppendJSON(nil), &m); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
}

// run runs l until the returned stop is called; stop returns Run's error.
func run(l *Logger) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	return func() error { cancel(); return <-done }
}

// Records reach the writer within FlushInterval, before Run ends.
func TestFlushedPeriodically(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := &testutil.SyncBuffer{}
		l := New(out, Options{FlushInterval: time.Second})
		defer run(l)()
		l.Log(sample)
		synctest.Wait()
		if out.String() != "" {
			t.Fatal("written before the flush interval; expected buffering")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n := strings.Count(out.String(), "\n"); n != 1 {
			t.Fatalf("%d lines after the interval", n)
		}
		if s := l.Stats(); !s.Enabled || s.Written != 1 || s.Dropped != 0 {
			t.Errorf("stats %+v", s)
		}
	})
}

// blockedWriter blocks every Write until released, like a stalled disk.
type blockedWriter struct{ entered, release chan struct{} }

func (w blockedWriter) Write(p []byte) (int, error) {
	select {
	case w.entered <- struct{}{}:
	default:
	}
	<-w.release
	return len(p), nil
}

// A stalled disk never slows Log: records beyond the queue are dropped
// and counted.
func TestStalledWriterDropsInsteadOfBlocking(t *testing.T) {
	w := blockedWriter{make(chan struct{}, 1), make(chan struct{})}
	l := New(w, Options{Queue: 16})
	stop := run(l)
	// Overflow the 64 KiB buffer so that the writer goroutine blocks in Write.
	big := sample
	big.Path = strings.Repeat("x", 70<<10)
	l.Log(big)
	<-w.entered
	// The writer is held until release below: a Log that waited for it
	// would never return, so returning at all is the check.
	const n = 10_000
	for range n {
		l.Log(sample)
	}
	s := l.Stats()
	// The writer is stuck on the big record; the queue holds 16.
	if s.Dropped != n-16 {
		t.Errorf("dropped %d of %d", s.Dropped, n)
	}
	close(w.release)
	stop()
	if got := l.Stats(); got.Written+got.Dropped != n+1 {
		t.Errorf("written %d + dropped %d != %d", got.Written, got.Dropped, n+1)
	}
	l.Log(sample) // after Run: dropped, no panic
}

func TestFileCloseAndReopen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	stop := run(l)
	l.Log(sample)
	// Rotate: rename, then reopen; the next record lands in a new file.
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	next := sample
	next.Route = "api"
	l.Log(next)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for file, route := range map[string]string{path + ".1": `"route":"site"`, path: `"route":"api"`} {
		lines := readLines(t, file)
		if len(lines) != 1 || !strings.Contains(lines[0], route) {
			t.Errorf("%s: %q", file, lines)
		}
	}
	if err := l.Reopen(); err == nil {
		t.Error("Reopen after Run ended succeeded")
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

func TestNilLoggerIsOff(t *testing.T) {
	var l *Logger
	l.Log(sample)
	if l.Stats().Enabled || l.Run(context.Background()) != nil || l.Reopen() != nil {
		t.Error("nil logger should do nothing")
	}
}

func BenchmarkLog(b *testing.B) {
	l := New(discard{}, Options{})
	defer run(l)()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.Log(sample)
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
