package proxy

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"testing"
	"testing/synctest"
	"time"
)

// pacedConn is a client connection whose ReadFrom (the splice) moves
// bytes at rate per second, failing when the write deadline passes, as
// the kernel's splice does.
type pacedConn struct {
	rate     int64 // bytes per second
	header   http.Header
	deadline time.Time
	pieces   []int64
}

func (c *pacedConn) Header() http.Header         { return c.header }
func (c *pacedConn) WriteHeader(int)             {}
func (c *pacedConn) Write(p []byte) (int, error) { return len(p), nil }
func (c *pacedConn) SetReadDeadline(time.Time) error {
	return nil
}
func (c *pacedConn) SetWriteDeadline(t time.Time) error {
	c.deadline = t
	return nil
}

func (c *pacedConn) ReadFrom(r io.Reader) (int64, error) {
	var n int64
	buf := make([]byte, 1024)
	for {
		k, err := r.Read(buf)
		if k > 0 {
			time.Sleep(time.Duration(int64(k) * int64(time.Second) / c.rate)) // fake: used inside synctest
			if !c.deadline.IsZero() && time.Now().After(c.deadline) {
				return n, os.ErrDeadlineExceeded
			}
			n += int64(k)
		}
		if err == io.EOF {
			c.pieces = append(c.pieces, n)
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// A spliced body goes in pieces with the send timeout armed before each:
// a reader that keeps reading slowly is never cut, a fast one gets large
// pieces, and one that stops is cut. Fake time.
func TestSendTimeoutOverSplice(t *testing.T) {
	const timeout = 30 * time.Second
	for _, c := range []struct {
		name    string
		rate    int64
		size    int64
		cut     bool
		biggest int64 // the largest piece at least
	}{
		{"fast", 100 << 20, 16 << 20, false, spliceMaxPiece},
		{"slow but moving", 3 << 10, 512 << 10, false, 0},
		{"a trickle under the bound", 1 << 10, 256 << 10, true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				conn := &pacedConn{rate: c.rate, header: http.Header{}}
				s := clientSink{w: conn, dl: conn, idle: idleDeadline{timeout: timeout}}
				src := &io.LimitedReader{R: bytes.NewReader(make([]byte, c.size)), N: c.size}
				n, err := s.ReadFrom(src)
				if c.cut {
					if err == nil || !s.cut {
						t.Fatalf("not cut: %d bytes, %v", n, err)
					}
					return
				}
				if err != nil || n != c.size || s.cut {
					t.Fatalf("got %d of %d bytes, err %v, cut %v; pieces %v", n, c.size, err, s.cut, conn.pieces)
				}
				var biggest int64
				for _, p := range conn.pieces {
					biggest = max(biggest, p)
					if p < spliceMinPiece && p != conn.pieces[len(conn.pieces)-1] {
						t.Errorf("a piece of %d bytes, below the least %d", p, spliceMinPiece)
					}
				}
				if biggest < c.biggest || biggest > spliceMaxPiece {
					t.Errorf("largest piece %d, want %d..%d; pieces %v", biggest, c.biggest, spliceMaxPiece, conn.pieces)
				}
			})
		})
	}
}
