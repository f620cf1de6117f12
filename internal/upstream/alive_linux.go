package upstream

import (
	"syscall"
	"unsafe"
)

// peek runs inside RawConn.Read: one non-blocking MSG_PEEK of one byte.
// EAGAIN means the connection is open and nothing is waiting on it.
func (pc *conn) peek(fd uintptr) bool {
	for {
		n, _, errno := syscall.Syscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&pc.peekBuf[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		switch {
		case errno == syscall.EINTR:
			continue
		case errno == syscall.EAGAIN:
			pc.peekRes = peekEmpty
		default:
			// n == 0: EOF; n > 0: unsolicited data; else an error (RST).
			_ = n
			pc.peekRes = peekDead
		}
		return true // never wait for readability
	}
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
		for {
			n, _, errno := syscall.Syscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&pc.peekBuf[0])), 1,
				syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
			if errno == syscall.EINTR {
				continue
			}
			res = errno != syscall.EAGAIN && (errno != 0 || n == 0)
			return true
		}
	})
	return err != nil || res
}
