package h1

import (
	"net"
	"syscall"
	"time"
)

// writeDeadline is the write deadline the handler set on its connection
// (the proxy's send timeout, before every write of a response), put on
// the socket only once a write has to wait for the client: a write the
// socket takes at once is not bounded by it either way, and most
// responses are one such write. A deadline put on the socket costs a
// runtime timer update each time it is set and cleared, which was two
// per proxied request. The one difference a handler can see: a deadline
// already past does not fail a write the socket takes at once (a
// socket's would); the proxy arms its send timeout ahead of each write.
type writeDeadline struct {
	nc  net.Conn
	raw syscall.RawConn
	t   time.Time // wanted; zero: none
	on  bool      // t is on the socket

	// The write in progress of writeLazily, for step, a method value made
	// once (a closure given to RawConn.Write would be allocated per call).
	b      []byte
	n      int
	errno  syscall.Errno
	stepFn func(uintptr) bool
}

// set is SetWriteDeadline.
func (d *writeDeadline) set(t time.Time) error {
	d.t = t
	if !d.on {
		return nil // put on the socket when a write waits
	}
	d.on = !t.IsZero()
	return d.nc.SetWriteDeadline(t)
}

// pending reports whether a deadline is wanted and not on the socket.
func (d *writeDeadline) pending() bool { return !d.on && !d.t.IsZero() }

// apply puts the wanted deadline on the socket, before a write that may
// wait in a way writeLazily does not cover (a writev, a splice).
func (d *writeDeadline) apply() {
	if d.pending() {
		d.on = true
		d.nc.SetWriteDeadline(d.t)
	}
}

// clear takes any deadline off, for a connection handed to net/http.
func (d *writeDeadline) clear() {
	d.t, d.on = time.Time{}, false
	d.nc.SetWriteDeadline(time.Time{})
}
