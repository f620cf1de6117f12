package h1

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// body is a request body of known length, read from the connection's
// buffer first and then from the socket, never past its end. It may be
// read by another goroutine than the handler's (the upstream client
// streams large bodies from one), hence the lock.
type body struct {
	mu     sync.Mutex
	x      *exchange
	closed bool // the handler returned: reads fail
	err    error
}

func (b *body) start(x *exchange) {
	b.x = x
	if x.remaining == int64(x.c.w-x.c.r) {
		// Nothing of this request is left on the socket, and nothing
		// after it is buffered: watch for the client's leaving now.
		x.c.sendWatch(true)
	}
}

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	x := b.x
	switch {
	case b.closed:
		return 0, http.ErrBodyReadAfterClose
	case b.err != nil:
		return 0, b.err
	case x.remaining == 0:
		return 0, io.EOF
	}
	if int64(len(p)) > x.remaining {
		p = p[:x.remaining]
	}
	c := x.c
	var n int
	if c.r < c.w {
		n = copy(p, (*c.buf)[c.r:c.w])
		c.r += n
	} else {
		var err error
		n, err = c.nc.Read(p)
		if err != nil && n == 0 {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			b.err = err
			return 0, err
		}
	}
	x.remaining -= int64(n)
	if x.remaining == 0 {
		if c.r == c.w {
			c.sendWatch(true)
		}
		return n, io.EOF
	}
	return n, nil
}

func (b *body) Close() error { return nil }

// end is called when the handler has returned: later reads fail, and
// what the handler left unread is drained, up to maxDrain, so that the
// connection can carry the next request. It reports whether it can.
func (b *body) end() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	x := b.x
	if b.err != nil {
		return false
	}
	if x.remaining == 0 {
		return true
	}
	if x.remaining > maxDrain {
		return false
	}
	return b.drainLocked()
}

// drainLocked reads and drops the rest of the body; b.mu is held.
func (b *body) drainLocked() bool {
	x := b.x
	c := x.c
	if k := min(int64(c.w-c.r), x.remaining); k > 0 {
		c.r += int(k)
		x.remaining -= k
	}
	if x.remaining == 0 {
		return true
	}
	c.r, c.w = 0, 0
	c.setRead(time.Now().Add(drainTimeout))
	buf := *c.buf
	for x.remaining > 0 {
		n, err := c.nc.Read(buf[:min(int64(len(buf)), x.remaining)])
		x.remaining -= int64(n)
		if err != nil && x.remaining > 0 {
			b.err = err
			return false
		}
	}
	return true
}

// maxDrain is how much of an unread request body is read and dropped to
// keep the connection, as net/http's server does.
const maxDrain = 256 << 10

// drainTimeout bounds the reading of the rest of a body nobody wants.
const drainTimeout = 5 * time.Second
