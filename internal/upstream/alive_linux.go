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
