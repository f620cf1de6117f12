package h1

import (
	"context"
	"sync"
	"sync/atomic"
)

// reqCtx is a request's context: the connection's, canceled when the
// client leaves, a write to it fails, or the handler returns. It is part
// of the exchange, so that a request makes no context of its own:
// context.WithCancel would allocate the context, its cancel function,
// its done channel when asked, and, for each context.AfterFunc on it
// (the upstream client makes one per exchange), a context, a closure and
// the parent's map of children: five to seven allocations a request.
// Here the channel is made only for a caller of Done, and AfterFunc
// (which the context package and the upstream client use when a context
// has it) costs one closure.
type reqCtx struct {
	context.Context // the connection's: its values, no deadline, never done

	ended atomic.Bool // Err's fast path: set once err is
	mu    sync.Mutex
	err   error
	done  chan struct{} // made by Done; closed on cancel
	// What AfterFunc registered and stop has not taken back: one slot
	// for the common case, more in the slice.
	one  func()
	more []func()
}

// closedDone is what Done returns when it is first asked after the end.
var closedDone = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (c *reqCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		if c.err != nil {
			return closedDone
		}
		c.done = make(chan struct{})
	}
	return c.done
}

func (c *reqCtx) Err() error {
	if !c.ended.Load() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// AfterFunc is context.AfterFunc's contract: f runs in a goroutine of
// its own once the context ends (at once if it has), unless stop, called
// before, takes it back and reports true.
func (c *reqCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	i := -1
	if c.one == nil {
		c.one = f
	} else {
		i = len(c.more)
		c.more = append(c.more, f)
	}
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.err != nil {
			return false // ended: f has been started
		}
		if i < 0 {
			stopped := c.one != nil
			c.one = nil
			return stopped
		}
		stopped := c.more[i] != nil
		c.more[i] = nil
		return stopped
	}
}

// cancel ends the context; the first call counts.
func (c *reqCtx) cancel() {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = context.Canceled
	c.ended.Store(true)
	if c.done != nil {
		close(c.done)
	}
	one, more := c.one, c.more
	c.one, c.more = nil, nil
	c.mu.Unlock()
	if one != nil {
		go one()
	}
	for _, f := range more {
		if f != nil {
			go f()
		}
	}
}

func (c *reqCtx) String() string { return "h1.requestContext" }
