package h1

import (
	"net"
	"os"
	"syscall"
)

// writeLazily writes b as net.Conn.Write does, with d pending: the
// deadline goes on the socket only when the socket is full.
func (d *writeDeadline) writeLazily(b []byte) (int, error) {
	if d.raw == nil {
		d.apply()
		return d.nc.Write(b)
	}
	if d.stepFn == nil {
		d.stepFn = d.step
	}
	d.b, d.n, d.errno = b, 0, 0
	err := d.raw.Write(d.stepFn)
	n, errno := d.n, d.errno
	d.b = nil
	switch {
	case errno != 0:
		err = os.NewSyscallError("write", errno)
	case err != nil:
		if oe, ok := err.(*net.OpError); ok {
			err = oe.Err // a deadline, or the socket closed
		}
	default:
		return n, nil
	}
	return n, &net.OpError{Op: "write", Net: "tcp", Source: d.nc.LocalAddr(), Addr: d.nc.RemoteAddr(), Err: err}
}

// step is writeLazily's RawConn.Write callback; false means "wait until
// the socket takes more", bounded by the deadline, on the socket now.
func (d *writeDeadline) step(fd uintptr) bool {
	for d.n < len(d.b) {
		n, err := syscall.Write(int(fd), d.b[d.n:])
		if n > 0 {
			d.n += n
			continue
		}
		switch err {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			if !d.on {
				d.on = true
				d.nc.SetWriteDeadline(d.t)
			}
			return false
		case nil:
			d.errno = syscall.EIO // a write of nothing: as io.ErrShortWrite
		default:
			d.errno = err.(syscall.Errno)
		}
		return true
	}
	return true
}
