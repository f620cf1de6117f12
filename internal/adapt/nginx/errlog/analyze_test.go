package errlog

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2024, 3, 5, 8, 0, 0, 0, time.UTC)

func logLine(at time.Duration, level, msg, client, req, upstream string, conn int) string {
	return fmt.Sprintf(`%s [%s] 1#1: *%d %s, client: %s, server: s, request: "%s", upstream: "%s", host: "s"`,
		t0.Add(at).Format("2006/01/02 15:04:05"), level, conn, msg, client, req, upstream)
}

func analyze(t *testing.T, opt Options, lines ...string) *Result {
	t.Helper()
	a := New(opt)
	if err := a.Read(context.Background(), strings.NewReader(strings.Join(lines, "\n")+"\n"), "error.log"); err != nil {
		t.Fatal(err)
	}
	return a.Result()
}

const (
	timedOut = "upstream timed out (110: Connection timed out) while reading response header from upstream"
	noLive   = "no live upstreams while connecting to upstream"
	disabled = "upstream server temporarily disabled while reading response header from upstream"
)

func TestEpisodeAttribution(t *testing.T) {
	upstreamOf := func(addr string) string {
		if strings.HasPrefix(addr, "10.0.0.") {
			return "app"
		}
		return "other"
	}
	lines := []string{
		// long before: outside the lookback
		logLine(0, "error", timedOut, "9.9.9.9", "GET /old HTTP/1.1", "http://10.0.0.1:80/old", 1),
		logLine(10*time.Minute, "error", timedOut, "1.1.1.1", "POST /report HTTP/1.1", "http://10.0.0.1:80/report", 2),
		// nginx's echo of the same connection: an ejection, not a second error
		logLine(10*time.Minute, "warn", disabled, "1.1.1.1", "POST /report HTTP/1.1", "http://10.0.0.1:80/report", 2),
		logLine(10*time.Minute+time.Second, "error", timedOut, "2.2.2.2", "POST /report HTTP/1.1", "http://10.0.0.2:80/report", 3),
		// an error of another pool: not this episode's
		logLine(10*time.Minute+2*time.Second, "error", timedOut, "3.3.3.3", "GET /x HTTP/1.1", "http://10.9.0.1:80/x", 4),
		logLine(10*time.Minute+5*time.Second, "error", noLive, "4.4.4.4", "GET /home HTTP/1.1", "http://app/home", 5),
		logLine(10*time.Minute+6*time.Second, "error", noLive, "5.5.5.5", "GET /home HTTP/1.1", "http://app/home", 6),
		logLine(10*time.Minute+8*time.Second, "error", timedOut, "6.6.6.6", "POST /report?id=1 HTTP/1.1", "http://10.0.0.1:80/report", 7),
		// a second episode after a quiet gap
		logLine(30*time.Minute, "error", noLive, "4.4.4.4", "GET /home HTTP/1.1", "http://app/home", 8),
	}
	r := analyze(t, Options{UpstreamOf: upstreamOf}, lines...)
	if len(r.Episodes) != 2 {
		t.Fatalf("episodes = %d, want 2", len(r.Episodes))
	}
	ep := r.Episodes[0]
	if ep.Upstream != "app" || ep.NoLive != 2 || ep.Victims != 2 {
		t.Errorf("episode = %+v", ep)
	}
	if ep.Errors != 3 || ep.Ejections != 1 || ep.DistinctBackends != 2 || ep.DistinctClients != 3 {
		t.Errorf("errors=%d ejections=%d backends=%d clients=%d, want 3 1 2 3", ep.Errors, ep.Ejections, ep.DistinctBackends, ep.DistinctClients)
	}
	if len(ep.Routes) == 0 || ep.Routes[0] != (Count{"POST /report", 3}) {
		t.Errorf("routes = %v", ep.Routes)
	}
	if !strings.HasPrefix(ep.FirstLine, "error.log:6: ") {
		t.Errorf("first line %q lacks its position", ep.FirstLine)
	}
	if r.Episodes[1].Errors != 0 {
		t.Errorf("second episode errors = %d, want 0", r.Episodes[1].Errors)
	}
	if len(r.Kinds) != 3 || r.Kinds[0].Kind != "no live upstreams" || r.Kinds[0].Total != 3 {
		t.Errorf("kinds = %+v", r.Kinds)
	}
}

func TestTimelineAndBackends(t *testing.T) {
	r := analyze(t, Options{},
		logLine(0, "error", timedOut, "1.1.1.1", "GET / HTTP/1.1", "http://10.0.0.1:80/", 1),
		logLine(30*time.Second, "error", timedOut, "1.1.1.2", "GET / HTTP/1.1", "http://10.0.0.1:80/", 2),
		"continuation line without a timestamp",
		logLine(2*time.Minute, "error", noLive, "1.1.1.3", "GET / HTTP/1.1", "http://u/", 3),
	)
	if len(r.Timeline) != 2 || r.Timeline[0].Kinds["upstream timed out"] != 2 || r.Timeline[1].Kinds["no live upstreams"] != 1 {
		t.Errorf("timeline = %+v", r.Timeline)
	}
	if r.Lines != 4 || r.Parsed != 3 || r.PeakMinute.Time != t0 {
		t.Errorf("lines=%d parsed=%d peak=%v", r.Lines, r.Parsed, r.PeakMinute.Time)
	}
	if len(r.Backends) != 1 || r.Backends[0].Errors != 2 || r.Backends[0].DistinctClients != 2 {
		t.Errorf("backends = %+v", r.Backends)
	}
}

func TestBounds(t *testing.T) {
	var lines []string
	for i := 0; i < 50; i++ {
		lines = append(lines, logLine(time.Duration(i)*time.Hour, "error", timedOut, fmt.Sprintf("10.1.0.%d", i), "GET / HTTP/1.1", "http://10.0.0.1:80/", i+1))
		lines = append(lines, logLine(time.Duration(i)*time.Hour+time.Second, "error", noLive, "1.1.1.1", "GET / HTTP/1.1", "http://u/", 100+i))
	}
	r := analyze(t, Options{MaxKeys: 3, MaxMinutes: 10, MaxEpisodes: 5}, lines...)
	if !r.TimelineTruncated || len(r.Timeline) != 10 {
		t.Errorf("timeline truncated=%v len=%d, want true 10", r.TimelineTruncated, len(r.Timeline))
	}
	if len(r.Episodes) != 6 || r.EpisodesDropped != 44 { // 5 closed + the open one
		t.Errorf("episodes=%d dropped=%d", len(r.Episodes), r.EpisodesDropped)
	}
	if len(r.Backends) != 1 || r.Backends[0].DistinctClients != 50 {
		t.Errorf("backends = %+v", r.Backends)
	}
}

func TestReadGzipAndLongLines(t *testing.T) {
	var plain bytes.Buffer
	plain.WriteString(logLine(0, "error", timedOut, "1.1.1.1", "GET /"+strings.Repeat("a", readBufSize*2)+" HTTP/1.1", "http://10.0.0.1:80/", 1) + "\n")
	plain.WriteString(logLine(time.Second, "error", noLive, "1.1.1.1", "GET / HTTP/1.1", "http://u/", 2) + "\n")
	plain.WriteString(logLine(2*time.Second, "error", noLive, "1.1.1.1", "GET / HTTP/1.1", "http://u/", 3)) // no final newline
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(plain.Bytes())
	zw.Close()
	for name, data := range map[string][]byte{"plain": plain.Bytes(), "gzip": gz.Bytes()} {
		t.Run(name, func(t *testing.T) {
			a := New(Options{})
			if err := a.Read(context.Background(), bytes.NewReader(data), "x.log"); err != nil {
				t.Fatal(err)
			}
			r := a.Result()
			f := r.Files[0]
			if f.Lines != 3 || f.LongLines != 1 || f.Bytes != int64(plain.Len()) || f.Gzip != (name == "gzip") {
				t.Errorf("file = %+v, want 3 lines, 1 long, %d bytes", f, plain.Len())
			}
			if len(r.Episodes) != 1 || r.Episodes[0].NoLive != 2 {
				t.Errorf("episodes = %+v", r.Episodes)
			}
		})
	}
}

func TestReadErrors(t *testing.T) {
	a := New(Options{})
	err := a.Read(context.Background(), bytes.NewReader([]byte{0x1f, 0x8b, 0, 0}), "bad.gz")
	if err == nil || !strings.Contains(err.Error(), "bad.gz: looks gzip-compressed") {
		t.Errorf("error = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.Read(ctx, strings.NewReader("x\n"), "x.log"); !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", err)
	}
}

// writeSynthetic writes about size bytes of an error log with a realistic
// mix: many clients, routes and backends, and a pool-empty episode. Lines
// are built by appending (not fmt) so that generating stays cheap under -race.
func writeSynthetic(w io.Writer, size int) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	var b []byte
	stamp, stampSec := "", int64(-1)
	num := strconv.AppendInt
	for i, written := 0, 0; written < size; i++ {
		at := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		if sec := at.Unix(); sec != stampSec {
			stamp, stampSec = at.Format("2006/01/02 15:04:05"), sec
		}
		b = append(b[:0], stamp...)
		b = append(b, " [error] 1#1: *"...)
		b = num(b, int64(i), 10)
		switch i % 10 {
		case 0:
			b = append(b, " no live upstreams while connecting to upstream"...)
		case 1:
			b = append(b[:len(stamp)], " [alert] 1#1: 1024 worker_connections are not enough\n"...)
			n, err := bw.Write(b)
			if err != nil {
				return err
			}
			written += n
			continue
		default:
			b = append(b, " upstream timed out (110: Connection timed out) while reading response header from upstream"...)
		}
		b = append(b, ", client: 10."...)
		b = num(b, int64(i%7), 10)
		b = append(b, '.')
		b = num(b, int64((i/7)%250), 10)
		b = append(b, '.')
		b = num(b, int64(i%249), 10)
		b = append(b, ", server: s, request: \"POST /api/v1/items/"...)
		b = num(b, int64(i%20000), 10)
		b = append(b, "?q="...)
		b = num(b, int64(i), 10)
		b = append(b, " HTTP/1.1\", upstream: \""...)
		if i%10 == 0 {
			b = append(b, "http://app/p"...)
		} else {
			b = append(b, "http://10.0."...)
			b = num(b, int64(i%3), 10)
			b = append(b, '.')
			b = num(b, int64(i%200), 10)
			b = append(b, ":8080/api"...)
		}
		b = append(b, "\", host: \"s\"\n"...)
		n, err := bw.Write(b)
		if err != nil {
			return err
		}
		written += n
	}
	return bw.Flush()
}

// TestStreamingMemory checks that analysing a large log keeps the heap
// small: the log streams through a pipe and is never held in memory.
func TestStreamingMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("large synthetic log")
	}
	tests := []struct {
		name string
		size int
		gz   bool
	}{
		{"plain 50 MiB", 50 << 20, false},
		{"gzip 8 MiB", 8 << 20, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			go func() {
				var w io.Writer = pw
				var zw *gzip.Writer
				if tt.gz {
					zw, _ = gzip.NewWriterLevel(pw, gzip.BestSpeed)
					w = zw
				}
				err := writeSynthetic(w, tt.size)
				if zw != nil && err == nil {
					err = zw.Close()
				}
				pw.CloseWithError(err)
			}()
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			a := New(Options{UpstreamOf: func(string) string { return "app" }})
			if err := a.Read(context.Background(), pr, "big.log"); err != nil {
				t.Fatal(err)
			}
			r := a.Result()
			runtime.ReadMemStats(&after)
			if r.Bytes < int64(tt.size) || len(r.Episodes) != 1 {
				t.Fatalf("read %d bytes, %d episodes", r.Bytes, len(r.Episodes))
			}
			grown := int64(after.HeapSys) - int64(before.HeapSys)
			const limit = 64 << 20
			if grown > limit || after.HeapInuse > limit+before.HeapInuse {
				t.Errorf("heap grew by %d MiB (in use %d MiB) for a %d MiB log; want under 64 MiB", grown>>20, after.HeapInuse>>20, tt.size>>20)
			}
			t.Logf("%d MiB log: heap grew %d MiB, %d minutes, %d episode errors", r.Bytes>>20, grown>>20, len(r.Timeline), r.Episodes[0].Errors)
		})
	}
}
