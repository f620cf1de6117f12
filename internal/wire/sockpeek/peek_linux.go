// Package sockpeek looks at a socket without reading from it: one
// non-blocking MSG_PEEK of one byte, for the upstream client's liveness
// check of an idle connection and the native front end's wait for a
// request. Call it inside syscall.RawConn.Read.
package sockpeek

import (
	"syscall"
	"unsafe"
)

// One peeks at fd: n bytes waiting (0: EOF) or the error; EAGAIN means
// open with nothing waiting. b is the one-byte buffer the kernel may
// fill; it belongs to the caller so that peeking allocates nothing.
func One(fd uintptr, b *[1]byte) (uintptr, syscall.Errno) {
	for {
		n, _, errno := syscall.Syscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		if errno != syscall.EINTR {
			return n, errno
		}
	}
}
