package outcome

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "net/http: timeout awaiting response headers" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

var classCases = []struct {
	name string
	err  error
	gone bool
	want Class
}{
	{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: &net.OpError{Err: syscall.ECONNREFUSED}}, false, ConnectRefused},
	{"dial timeout", &net.OpError{Op: "dial", Net: "tcp", Err: timeoutErr{}}, false, ConnectTimeout},
	{"unreachable", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.EHOSTUNREACH}, false, ConnectError},
	{"dns", &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "x"}}, false, DNSError},
	{"reset", fmt.Errorf("read: %w", &net.OpError{Op: "read", Err: syscall.ECONNRESET}), false, Reset},
	{"eof", io.EOF, false, EOFBeforeResponse},
	{"unexpected eof", fmt.Errorf("wrapped: %w", io.ErrUnexpectedEOF), false, EOFBeforeResponse},
	{"server closed", errors.New("net/http: HTTP/1.x transport connection broken: server closed idle connection"), false, EOFBeforeResponse},
	{"header timeout", timeoutErr{}, false, ResponseTimeout},
	{"deadline", context.DeadlineExceeded, false, ResponseTimeout},
	{"garbage", errors.New(`malformed HTTP response "\x00\x01"`), false, BadResponse},
	{"client left", context.Canceled, true, ClientCancel},
	{"not processed", fmt.Errorf("http2 GOAWAY: %w", ErrNotProcessed), false, StreamRefused},
	{"not processed, client left", fmt.Errorf("%w", ErrNotProcessed), true, ClientCancel},
	{"stale connection", fmt.Errorf("%w: %w", ErrStaleConnection, &net.OpError{Op: "read", Err: syscall.ECONNRESET}), false, StaleConnection},
	// sturdy's own limits, whichever step hit them, are never the host's.
	{"emfile on dial", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", syscall.EMFILE)}, false, LocalError},
	{"enfile on dial", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", syscall.ENFILE)}, false, LocalError},
	{"enobufs on write", fmt.Errorf("write: %w", &net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.ENOBUFS)}), false, LocalError},
	{"enomem", &net.OpError{Op: "dial", Err: syscall.ENOMEM}, false, LocalError},
	{"no local port", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.EADDRNOTAVAIL)}, false, LocalError},
}

func TestClassify(t *testing.T) {
	for _, c := range classCases {
		if got := Classify(c.err, c.gone); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestSentAndFailure(t *testing.T) {
	for _, c := range All() {
		notSent := c == ConnectRefused || c == ConnectTimeout || c == DNSError || c == TLSError || c == ConnectError || c == StreamRefused || c == LocalError
		if c.Sent() == notSent {
			t.Errorf("%s: Sent() = %v", c, c.Sent())
		}
		if c.String() == "unknown" || c.String() == "" {
			t.Errorf("class %d has no name", c)
		}
	}
	if OK.Failure() || ClientCancel.Failure() || ClientBodyError.Failure() || LocalError.Failure() || StaleConnection.Failure() || !Reset.Failure() || !ConnectError.Failure() {
		t.Error("Failure() wrong")
	}
	for _, c := range All() {
		if c.NotHosts() != (c == ClientCancel || c == ClientBodyError || c == LocalError || c == StaleConnection) {
			t.Errorf("%s: NotHosts() = %v", c, c.NotHosts())
		}
	}
}

// A real refused connection and a real timeout classify as such.
func TestClassifyRealDials(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	_, err := (&net.Dialer{}).Dial("tcp", addr)
	if got := Classify(err, false); got != ConnectRefused {
		t.Errorf("refused dial: %s (%v)", got, err)
	}
	d := &net.Dialer{Timeout: time.Nanosecond}
	if _, err := d.Dial("tcp", "127.0.0.1:9"); err != nil {
		if got := Classify(err, false); got != ConnectTimeout && got != ConnectRefused {
			t.Errorf("timed-out dial: %s (%v)", got, err)
		}
	}
}
