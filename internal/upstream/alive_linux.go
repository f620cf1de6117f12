package upstream

import (
	"syscall"

	"github.com/sturdyproxy/sturdy/internal/sockpeek"
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
// backend's side is why: it closed (EOF with body bytes still owed) or
// the connection reset. Unread bytes waiting mean the backend was still
// sending, so the failure was the other side's.
func (pc *conn) broken() bool {
	if pc.raw == nil {
		return true
	}
	res := true
	err := pc.raw.Read(func(fd uintptr) bool {
		n, errno := sockpeek.One(fd, &pc.peekBuf)
		res = errno != syscall.EAGAIN && (errno != 0 || n == 0)
		return true
	})
	return err != nil || res
}
