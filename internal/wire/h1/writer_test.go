package h1

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
)

// tcpPair is both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// Whatever the mix of small and large writes, the bytes arrive whole and
// in order: a large write after buffered bytes goes out with them.
func TestWriterKeepsOrder(t *testing.T) {
	for _, sizes := range [][]int{
		{10, 40 << 10},          // a head, then a body larger than the buffer
		{100, 8 << 10},          // exactly the buffer after some bytes
		{8 << 10, 1, 20 << 10},  // a full buffer, a byte, a large write
		{0, 64 << 10, 3, 5},     // a large write with nothing buffered
		{7000, 1500, 9000, 100}, // writes that straddle the buffer's end
	} {
		client, server := tcpPair(t)
		w := newWriter(8 << 10)
		w.Reset(server)
		var want bytes.Buffer
		got := make(chan []byte, 1)
		go func() { b, _ := io.ReadAll(client); got <- b }()
		for i, n := range sizes {
			p := bytes.Repeat([]byte{byte('a' + i)}, n)
			want.Write(p)
			if m, err := w.Write(p); m != n || err != nil {
				t.Fatalf("%v: write %d of %d: %d, %v", sizes, i, n, m, err)
			}
		}
		w.WriteString("end")
		w.WriteByte('.')
		want.WriteString("end.")
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		server.Close()
		if b := <-got; !bytes.Equal(b, want.Bytes()) {
			t.Fatalf("%v: the client read %d bytes, want %d in order", sizes, len(b), want.Len())
		}
	}
}

// A failed write is reported by every later call, as bufio.Writer does.
func TestWriterErrorSticks(t *testing.T) {
	client, server := tcpPair(t)
	w := newWriter(8 << 10)
	w.Reset(server)
	client.Close()
	server.Close()
	w.WriteString("head")
	if _, err := w.Write(make([]byte, 32<<10)); err == nil {
		t.Fatal("a write to a closed connection succeeded")
	}
	if err := w.Flush(); err == nil || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Flush after a failed write: %v, want the write's error", err)
	}
	if _, err := w.WriteString("x"); err == nil {
		t.Fatal("a write after a failed one succeeded")
	}
}
