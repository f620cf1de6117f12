package h1client

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// A response read whole with its head leaves the response-header
// deadline on the connection (clearing it was a timer update per
// request); the next use sets its own or clears it first. So a kept
// connection idle past that deadline still passes the liveness check and
// is reused, for a GET (checked when idle longer than the trust time)
// and for a POST (always checked), and a body that streams for longer
// than the deadline after its head is not cut by it.
func TestResponseHeaderDeadlineLeftOnDoesNotOutliveItsUse(t *testing.T) {
	s := newRawServer(t, func(s *rawServer, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, _, err := s.readRequest(br)
			if err != nil {
				return
			}
			if req.URL.Path != "/slow" {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				continue
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nsl")
			time.Sleep(150 * time.Millisecond) // real: past the deadline, which only the kernel's clock moves
			io.WriteString(c, "ow")
		}
	})
	c := New(Options{ResponseHeaderTimeout: 50 * time.Millisecond})
	do(t, c, "GET", s.url("/"))
	time.Sleep(150 * time.Millisecond) // real, as above: idle past the deadline
	do(t, c, "GET", s.url("/"))
	time.Sleep(150 * time.Millisecond)
	resp, err := c.RoundTrip(newRequest(t, context.Background(), "POST", s.url("/"), strings.NewReader("x")))
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	if _, body := do(t, c, "GET", s.url("/slow")); body != "slow" {
		t.Fatalf("slow body %q", body)
	}
	if n := s.accepted.Load(); n != 1 {
		t.Fatalf("%d connections for 4 requests, want 1: a connection idle past the deadline was taken for dead", n)
	}
}
