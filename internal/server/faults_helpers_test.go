package server

import (
	"errors"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/outcome"
	"github.com/sturdyproxy/sturdy/internal/testing/fake"
)

// rawReply is what a raw client read back: every byte until the server
// closed the connection or the wait ended.
type rawReply struct {
	text   string
	closed bool // the server closed the connection (EOF or reset)
}

var statusLine = regexp.MustCompile(`HTTP/1\.[01] (\d{3})`)

// statuses are the status codes of every response in the reply.
func (r rawReply) statuses() []int {
	var out []int
	for _, m := range statusLine.FindAllStringSubmatch(r.text, -1) {
		n, _ := strconv.Atoi(m[1])
		out = append(out, n)
	}
	return out
}

// first is the first response's status, or 0.
func (r rawReply) first() int {
	if s := r.statuses(); len(s) > 0 {
		return s[0]
	}
	return 0
}

// rawSend writes the exact bytes from source address from to addr, then
// reads until the server closes the connection or wait passes.
func rawSend(t testing.TB, from, addr, data string, wait time.Duration) rawReply {
	t.Helper()
	c := rawDial(t, from, addr)
	defer c.Close()
	if _, err := io.WriteString(c, data); err != nil {
		t.Fatalf("write: %v", err)
	}
	return rawRead(c, wait)
}

func rawDial(t testing.TB, from, addr string) net.Conn {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 2 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rawRead reads c until it closes or wait passes.
func rawRead(c net.Conn, wait time.Duration) rawReply {
	c.SetReadDeadline(time.Now().Add(wait))
	b, err := io.ReadAll(c)
	var ne net.Error
	timedOut := errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
	return rawReply{text: string(b), closed: !timedOut}
}

// recorders starts n recording backends on 127.1.12.1, 127.1.12.2, ...
func recorders(t testing.TB, n int) []*fake.Recorder {
	t.Helper()
	var rs []*fake.Recorder
	for i := range n {
		r, err := fake.NewRecorder("127.1.12." + strconv.Itoa(i+1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		rs = append(rs, r)
	}
	return rs
}

// hostsClean fails the test when anything was held against a host: a
// state other than healthy, a failure in the passive window, an attempt
// whose outcome counts against hosts, or a host-attributed failure.
func hostsClean(t testing.TB, s *Server) {
	t.Helper()
	now := time.Now()
	for _, p := range s.Runtime().Pools {
		for _, h := range p.Hosts {
			if h.Mode() != health.Healthy {
				t.Errorf("host %s is %s", h.Addr, h.Mode())
			}
			if w := h.Window(now); w.Failures != 0 {
				t.Errorf("host %s: %d failures in its window", h.Addr, w.Failures)
			}
			for _, c := range outcome.All() {
				if c.Failure() && h.Attempts(c) != 0 {
					t.Errorf("host %s: %d attempts classed %s", h.Addr, h.Attempts(c), c)
				}
			}
		}
	}
	if n := s.Monitor().AttributedCount(health.AttrHost); n != 0 {
		t.Errorf("%d failures attributed to hosts", n)
	}
}

// allAttempts sums a class's attempts over every host.
func allAttempts(s *Server, c outcome.Class) uint64 {
	var n uint64
	for _, p := range s.Runtime().Pools {
		for _, h := range p.Hosts {
			n += h.Attempts(c)
		}
	}
	return n
}
