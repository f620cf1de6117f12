package h2conn

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// loopback returns both ends of a TCP connection on 127.0.0.1.
func loopback(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// recorder is a real connection that notes each write it is given and
// holds the first one until released, so that what a Conn batches
// meanwhile is known.
type recorder struct {
	net.Conn
	entered chan struct{} // closed when the first write began
	release chan struct{} // the first write waits for it
	fail    error         // returned by every write when set

	mu     sync.Mutex
	writes []string
}

func newRecorder(c net.Conn) *recorder {
	return &recorder{Conn: c, entered: make(chan struct{}), release: make(chan struct{})}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.writes = append(r.writes, string(p))
	first := len(r.writes) == 1
	r.mu.Unlock()
	if first {
		close(r.entered)
		<-r.release
	}
	if r.fail != nil {
		return 0, r.fail
	}
	return r.Conn.Write(p)
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.writes...)
}

func readN(t *testing.T, c net.Conn, n int) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("reading %d bytes: %v", n, err)
	}
	return string(b)
}

func TestWritesMadeWhileABatchIsOnItsWayLeaveTogether(t *testing.T) {
	client, server := loopback(t)
	rec := newRecorder(server)
	c := Wrap(rec)
	for _, s := range []string{"HEADERS", "DATA"} {
		if n, err := c.Write([]byte(s)); err != nil || n != len(s) {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
		if s == "HEADERS" {
			<-rec.entered // the first batch is on its way, and held
		}
	}
	if _, err := c.Write([]byte("TRAILERS")); err != nil {
		t.Fatal(err)
	}
	close(rec.release)
	if got := readN(t, client, len("HEADERSDATATRAILERS")); got != "HEADERSDATATRAILERS" {
		t.Fatalf("the peer read %q", got)
	}
	if got := rec.seen(); len(got) != 2 || got[1] != "DATATRAILERS" {
		t.Fatalf("the connection was given %q; want the first write alone, then the two made meanwhile in one", got)
	}
}

func TestALargeWriteOnAnIdleConnectionGoesStraightThrough(t *testing.T) {
	client, server := loopback(t)
	rec := newRecorder(server)
	close(rec.release)
	c := Wrap(rec)
	big := bytes.Repeat([]byte("d"), direct)
	if _, err := c.Write(big); err != nil {
		t.Fatal(err)
	}
	// Written by Write itself: the connection has it when Write returns.
	if got := rec.seen(); len(got) != 1 || len(got[0]) != direct {
		t.Fatalf("after Write returned the connection was given %d writes; want the one", len(got))
	}
	if got := readN(t, client, direct); got != string(big) {
		t.Fatal("the peer read other bytes")
	}
}

func TestCloseWritesWhatWasAcceptedFirst(t *testing.T) {
	client, server := loopback(t)
	rec := newRecorder(server)
	c := Wrap(rec)
	if _, err := c.Write([]byte("GOAWAY")); err != nil {
		t.Fatal(err)
	}
	<-rec.entered
	if _, err := c.Write([]byte("-last")); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("late")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close: %v, want net.ErrClosed", err)
	}
	close(rec.release)
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(client)
	if err != nil || string(got) != "GOAWAY-last" {
		t.Fatalf("the peer read %q, %v; want every accepted byte, then the end", got, err)
	}
}

func TestAFailedWriteFailsTheNextAndClosesTheConnection(t *testing.T) {
	client, server := loopback(t)
	rec := newRecorder(server)
	rec.fail = errors.New("connection reset by peer")
	c := Wrap(rec)
	if _, err := c.Write([]byte("frame")); err != nil {
		t.Fatal(err) // taken; the failure comes later
	}
	close(rec.release)
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := io.ReadAll(client); err != nil || len(b) != 0 {
		t.Fatalf("the peer read %q, %v; want the connection closed", b, err)
	}
	if _, err := c.Write([]byte("next")); !errors.Is(err, rec.fail) {
		t.Fatalf("the next Write returned %v, want the failure", err)
	}
}

func TestAFullBufferHoldsTheWriterUntilItDrains(t *testing.T) {
	client, server := loopback(t)
	go io.Copy(io.Discard, client)
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder(server)
		c := Wrap(rec)
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		<-rec.entered
		if _, err := c.Write(make([]byte, Limit)); err != nil {
			t.Fatal(err) // up to Limit pending is taken at once
		}
		done := make(chan error, 1)
		go func() {
			_, err := c.Write([]byte("y"))
			done <- err
		}()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("a Write past Limit returned (%v) while nothing drained", err)
		default:
		}
		close(rec.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

func TestReadsOfAPlainConnectionAreBuffered(t *testing.T) {
	client, server := loopback(t)
	c := Wrap(server).(*Conn)
	if c.r == nil {
		t.Fatal("a plain connection's reads are not buffered")
	}
	if _, err := client.Write([]byte("frame-headerpayload")); err != nil {
		t.Fatal(err)
	}
	if got := readN(t, c, len("frame-header")); got != "frame-header" {
		t.Fatalf("read %q", got)
	}
	// The rest came with the first read: the second needs no socket.
	if c.r.Buffered() != len("payload") {
		t.Fatalf("%d bytes buffered, want the payload's %d", c.r.Buffered(), len("payload"))
	}
	if got := readN(t, c, len("payload")); got != "payload" {
		t.Fatalf("read %q", got)
	}
}
