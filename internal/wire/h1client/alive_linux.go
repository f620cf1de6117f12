package h1client

import (
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sturdyproxy/sturdy/internal/wire/sockpeek"
)

// peek runs inside RawConn.Read, for the liveness check of an idle
// connection: anything but EAGAIN (EOF, unsolicited data, a reset) means
// it cannot carry a request.
func (pc *conn) peek(fd uintptr) bool {
	if _, errno := sockpeek.One(fd, &pc.peekBuf); errno == syscall.EAGAIN {
		pc.peekRes = peekEmpty
	} else {
		pc.peekRes = peekDead
	}
	return true // never wait for readability
}

// canSplice: TCPConn.ReadFrom splices on Linux.
const canSplice = true

// broken tells, after a transfer from the connection failed, whether the
// backend's side is why: the connection reset, or failed otherwise.
// Unread bytes waiting mean the backend was still sending, so the failure
// was the other side's. So does an orderly close (FIN, the socket in
// CLOSE_WAIT): a splice that reaches the backend's EOF ends without an
// error, so one that failed did on the other side. That close is seen
// when the splice had taken the rest of the body into its pipe before the
// write to the client failed (the client stalled or left), and the
// backend, done sending, had closed its side: that is the client's
// failure, not the backend's. A reset whose error the splice has already
// reported reads as EOF too, but leaves the socket CLOSE.
func (pc *conn) broken() bool {
	if pc.raw == nil {
		return true
	}
	res := true
	err := pc.raw.Read(func(fd uintptr) bool {
		n, errno := sockpeek.One(fd, &pc.peekBuf)
		res = errno != syscall.EAGAIN && (errno != 0 || n == 0)
		if res && errno == 0 && n == 0 {
			ti, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
			res = err != nil || ti.State != tcpCloseWait
		}
		return true
	})
	return err != nil || res
}

// tcpCloseWait is Linux's TCP_CLOSE_WAIT (include/net/tcp_states.h): the
// peer closed its side in order and this one is still open.
const tcpCloseWait = 8

// unacked reports whether no byte written after the first out was
// acknowledged by the backend: read when it closed the connection under a
// request (EOF before any response), it proves the backend never received
// the request. The close's FIN carries the acknowledgement of everything
// the backend's side had received, and it is processed before the EOF can
// be read; a backend that had the request (read or not) acknowledges it
// in that FIN, or resets instead of closing in order. (A backend that
// half-closes and then still reads could acknowledge later: that only
// makes this report false.) tcpi_bytes_acked counts the SYN as one.
func (pc *conn) unacked(out int64) bool {
	if pc.raw == nil {
		return false
	}
	res := false
	err := pc.raw.Control(func(fd uintptr) {
		ti, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		res = err == nil && ti.Bytes_acked <= uint64(out)+1
	})
	return err == nil && res
}
