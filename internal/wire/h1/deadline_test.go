package h1

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

type writeDeadliner interface{ SetWriteDeadline(time.Time) error }

// A handler's write deadline goes on the socket only when a write has to
// wait for the client (each deadline set and cleared on the socket is a
// runtime timer update; the proxy sets one before every response). So a
// write the socket takes at once is not failed by it, even when it has
// passed (which a socket's deadline would do)...
func TestWriteDeadlineBindsOnlyAWriteThatWaits(t *testing.T) {
	addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.(writeDeadliner).SetWriteDeadline(time.Now().Add(-time.Second))
		io.WriteString(w, "taken at once")
	}), nil)
	c, br := dialRaw(t, addr)
	for range 2 {
		if _, body := roundTrip(t, c, br, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); body != "taken at once" {
			t.Fatalf("body %q", body)
		}
	}
}

// ...while a client that stops reading is still cut by it, whether the
// writes are buffered ones or larger than the buffer.
func TestWriteDeadlineCutsAClientThatStopsReading(t *testing.T) {
	for _, size := range []int{1 << 10, 64 << 10} {
		failed := make(chan error, 1)
		addr, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			chunk := bytes.Repeat([]byte("x"), size)
			rc := http.NewResponseController(w)
			for range 64 << 20 / size { // far more than the sockets hold
				rc.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
				if _, err := w.Write(chunk); err != nil {
					failed <- err
					return
				}
				if err := rc.Flush(); err != nil {
					failed <- err
					return
				}
			}
			failed <- nil
		}), nil)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.(*net.TCPConn).SetReadBuffer(4 << 10)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n") // and never read
		select {
		case err := <-failed:
			if !isTimeout(err) {
				t.Fatalf("%d-byte writes: the write ended with %v, want a timeout", size, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%d-byte writes: never cut", size)
		}
	}
}
