package h1client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// drainThenFail is a client's side of a splice that failed after the
// splice had taken what it was given: Linux's splice moves the backend's
// bytes into a pipe before it writes them, so a write to the client that
// fails loses bytes the backend's socket no longer holds. It reads src to
// its end (or error) and fails with the client's error, or src's.
type drainThenFail struct{ clientErr error }

// Write takes the bytes the connection's reader held already.
func (w drainThenFail) Write(p []byte) (int, error) { return len(p), nil }

func (w drainThenFail) ReadFrom(src io.Reader) (int64, error) {
	n, err := io.Copy(io.Discard, src)
	if err != nil {
		return n, err
	}
	return n, w.clientErr
}

// A spliced body whose whole rest was drained, the backend having then
// closed its side in order, when the write to the client failed (a
// stalled client's send timeout, a client's reset) is the client's
// failure: an orderly close ends a splice without an error. A backend
// that resets after sending is still the backend's.
func TestSpliceAfterTheBackendClosedInOrderIsTheClientsFailure(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux splices")
	}
	const size = 256 << 10
	for _, reset := range []bool{false, true} {
		t.Run(fmt.Sprintf("reset=%v", reset), func(t *testing.T) {
			sent, head := make(chan struct{}), make(chan struct{})
			s := newRawServer(t, func(s *rawServer, c net.Conn) {
				s.readRequest(bufio.NewReader(c))
				n := size
				if reset {
					n = size / 2 // owes the rest, then resets
				}
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", size, strings.Repeat("x", n))
				if reset {
					select { // the client has the head before the reset
					case <-head:
					case <-time.After(10 * time.Second): // a bound should the test fail first
					}
					c.(*net.TCPConn).SetLinger(0)
				}
				c.Close()
				close(sent)
			})
			c := New(Options{})
			resp, err := c.RoundTrip(newRequest(t, context.Background(), "GET", s.url("/"), nil))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			close(head)
			<-sent
			time.Sleep(50 * time.Millisecond) // real: the kernel delivers the FIN or RST; nothing to poll without reading
			sp := resp.Body.(interface {
				SpliceTo(io.Writer, int64) (int64, error, error, bool)
			})
			clientErr := fmt.Errorf("write to the client: %w", os.ErrDeadlineExceeded)
			_, readErr, writeErr, ok := sp.SpliceTo(drainThenFail{clientErr}, 0)
			if !ok {
				t.Fatal("SpliceTo declined")
			}
			if reset {
				if readErr == nil {
					t.Fatalf("a backend that reset mid-body: readErr nil, writeErr %v; want the backend's failure", writeErr)
				}
				return
			}
			if readErr != nil || !errors.Is(writeErr, os.ErrDeadlineExceeded) {
				t.Fatalf("readErr %v, writeErr %v; want the client's failure, not the backend's", readErr, writeErr)
			}
		})
	}
}
