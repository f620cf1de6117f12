package h1

import (
	"errors"
	"os"
	"syscall"

	"github.com/sturdyproxy/sturdy/internal/wire/sockpeek"
)

// wait blocks until the socket is readable (a request's first bytes, or
// the client's FIN or reset) or its read deadline passes, without a
// buffer: a non-blocking MSG_PEEK of one byte tells data from EOF, and
// the runtime's poller does the waiting.
func (c *conn) wait() event {
	c.peekEv = evData
	c.peeked = false
	if err := c.raw.Read(c.peekFunc); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return evTimeout
		}
		return evClosed
	}
	return c.peekEv
}

// peek is the RawConn.Read callback of wait; false means "not readable
// yet: wait for the poller". The first call must look (bytes may have
// come before the wait began, and the poller reports only new ones);
// after the poller's wake-up, a connection with no request being answered
// needs no second look: the server goroutine's read tells data from EOF.
func (c *conn) peek(fd uintptr) bool {
	if c.peeked && c.state.Load() == stIdle {
		return true
	}
	c.peeked = true
	switch n, errno := sockpeek.One(fd, &c.peekBuf); {
	case errno == syscall.EAGAIN:
		return false
	case errno != 0 || n == 0:
		c.peekEv = evClosed
	default:
		c.peekEv = evData
	}
	return true
}
