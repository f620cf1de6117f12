package h1

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"runtime"
	"testing"
	"time"
)

// parkedCount is how many connections the parker holds.
func (s *Server) parkedCount() int {
	s.parked.mu.Lock()
	defer s.parked.mu.Unlock()
	return len(s.parked.due)
}

// waitFor polls cond until it holds; the bound only ends a broken run.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// An idle connection whose server goroutine was retired is parked: no
// goroutine of its own. The client's next request brings it back, and is
// answered as on any connection, again and again.
func TestIdleConnectionIsParkedAndServedAgain(t *testing.T) {
	addr, s := start(t, echo(), func(s *Server) { s.park = 10 * time.Millisecond })
	c, br := dialRaw(t, addr)
	for i := range 3 {
		waitFor(t, "the idle connection parked", func() bool { return i == 0 || s.parkedCount() == 1 })
		if _, body := roundTrip(t, c, br, "POST /again HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"); body != `POST /again host=x body="hi"` {
			t.Fatalf("request %d after parking: %q", i, body)
		}
	}
	waitFor(t, "the idle connection parked", func() bool { return s.parkedCount() == 1 })
	// A request in two parts: the parker wakes on the first.
	io.WriteString(c, "GET /split HTTP/1.1\r\n")
	time.Sleep(5 * time.Millisecond) // real: lets the first part arrive alone
	if _, body := roundTrip(t, c, br, "Host: x\r\n\r\n"); body != `GET /split host=x body=""` {
		t.Fatalf("a request sent in two parts to a parked connection: %q", body)
	}
}

// A parked connection's idle timeout still ends it.
func TestParkedConnectionIdleTimeout(t *testing.T) {
	addr, s := start(t, echo(), func(s *Server) {
		s.park = 10 * time.Millisecond
		s.IdleTimeout = 300 * time.Millisecond
	})
	c, br := dialRaw(t, addr)
	roundTrip(t, c, br, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	waitFor(t, "the idle connection parked", func() bool { return s.parkedCount() == 1 })
	expectClosed(t, br)
	waitFor(t, "the server forgot the connection", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.conns) == 0 })
}

// A client that leaves while its connection is parked is forgotten.
func TestParkedConnectionClientLeaves(t *testing.T) {
	addr, s := start(t, echo(), func(s *Server) { s.park = 10 * time.Millisecond })
	c, br := dialRaw(t, addr)
	roundTrip(t, c, br, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	waitFor(t, "the idle connection parked", func() bool { return s.parkedCount() == 1 })
	c.Close()
	waitFor(t, "the server forgot the connection", func() bool { s.mu.Lock(); defer s.mu.Unlock(); return len(s.conns) == 0 })
	if n := s.parkedCount(); n != 0 {
		t.Fatalf("%d connections still parked", n)
	}
}

// Shutdown closes parked connections, returns, and stops the parker.
func TestShutdownClosesParkedConnections(t *testing.T) {
	for _, useClose := range []bool{false, true} {
		addr, s := start(t, echo(), func(s *Server) { s.park = 10 * time.Millisecond })
		c, br := dialRaw(t, addr)
		roundTrip(t, c, br, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		waitFor(t, "the idle connection parked", func() bool { return s.parkedCount() == 1 })
		if useClose {
			s.Close()
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := s.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown with a parked connection: %v", err)
			}
			cancel()
		}
		expectClosed(t, br)
		s.parked.mu.Lock()
		running, parked := s.parked.running, len(s.parked.due)
		s.parked.mu.Unlock()
		if running || parked != 0 {
			t.Fatalf("after Shutdown (Close: %v): parker running %v with %d parked", useClose, running, parked)
		}
	}
}

// BenchmarkIdleConnMemory reports what an idle keep-alive connection
// holds on the server, in heap and goroutine stacks after a collection:
// 1,000 connections each answered once and then left idle until parked.
// (The socket's kernel memory is not counted; the runtime's poll
// descriptor, off the Go heap, is not either: about 250 bytes more.)
//
//	go test -run '^$' -bench IdleConnMemory ./internal/wire/h1
func BenchmarkIdleConnMemory(b *testing.B) {
	const n = 1000
	for range b.N {
		b.StopTimer()
		bytesPerConn := idleConnMemory(b, n)
		b.StartTimer()
		b.ReportMetric(bytesPerConn, "bytes/conn")
	}
}

func idleConnMemory(b *testing.B, n int) float64 {
	// No idle timeout ends a connection while the others are dialled and
	// parked, however long a loaded machine takes over them: the wait
	// below is for the parker's count, not against a time budget.
	addr, s := start(b, echo(), func(s *Server) { s.park, s.IdleTimeout = 10*time.Millisecond, 24*time.Hour })
	before := heapAndStacks()
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range n {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%8))}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
			b.Fatal(err)
		}
	}
	for s.parkedCount() < n {
		s.mu.Lock()
		open := len(s.conns)
		s.mu.Unlock()
		if open < n {
			b.Fatalf("%d of %d connections closed before all parked (%d parked)", n-open, n, s.parkedCount())
		}
		time.Sleep(time.Millisecond)
	}
	after := heapAndStacks()
	return float64(after-before) / float64(n)
}

// heapAndStacks is the heap in use and the goroutine stacks, after a
// collection.
func heapAndStacks() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc + m.StackInuse)
}
