package upstream

import (
	"syscall"
	"unsafe"
)

// peekOne is one non-blocking MSG_PEEK of one byte: n bytes waiting
// (0: EOF) or the error; EAGAIN means open with nothing waiting.
func (pc *conn) peekOne(fd uintptr) (uintptr, syscall.Errno) {
	for {
		n, _, errno := syscall.Syscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&pc.peekBuf[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		if errno != syscall.EINTR {
			return n, errno
		}
	}
}

// peek runs inside RawConn.Read, for the liveness check of an idle
// connection: anything but EAGAIN (EOF, unsolicited data, a reset) means
// it cannot carry a request.
func (pc *conn) peek(fd uintptr) bool {
	if _, errno := pc.peekOne(fd); errno == syscall.EAGAIN {
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
		n, errno := pc.peekOne(fd)
		res = errno != syscall.EAGAIN && (errno != 0 || n == 0)
		return true
	})
	return err != nil || res
}
