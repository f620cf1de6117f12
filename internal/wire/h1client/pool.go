package h1client

import (
	"bufio"
	"context"
	"net"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// conn is one connection to a backend and, while an exchange uses them,
// its buffers (see takeWriter).
type conn struct {
	hp   *hostPool
	nc   net.Conn
	wire wire            // nc as the buffers see it, counting bytes
	raw  syscall.RawConn // for the liveness check; nil when unavailable
	// tcpRaw is nc's own, when nc is a *net.TCPConn: flushAwait waits on
	// it for the response (nil: a connection it cannot see through).
	tcpRaw syscall.RawConn
	br     *bufio.Reader // nil unless a response is being read (see takeReader)
	bw     *bufio.Writer // nil unless a request is being written
	head   head          // response head parsing state, reused
	idleAt time.Time
	used   bool // has carried a request
	// keepFor is how long the connection may stay idle and still be
	// reused: the backend's Keep-Alive timeout less a margin (see
	// keepAliveFor); 0 when the backend named none.
	keepFor time.Duration

	// aborted is set when the request's context ended and the connection's
	// deadlines were expired: it must not be used again.
	aborted atomic.Bool
	// async is set while a request body goroutine may still use bw (it
	// returns bw itself when done); closeNow then leaves br to the garbage
	// collector, not pooled.
	async bool
	// headDeadline is set while the response-header deadline of the
	// last exchange is still on the socket: that exchange read its whole
	// response with the head, so nothing read under it, and clearing it
	// would be one timer update per request more. Whatever reads the
	// connection next sets its own or clears it first (clearHeadDeadline).
	headDeadline bool

	// prev and next link the connections in use (hostPool.busy), under
	// hostPool.mu; awaiting is set while a request waits for its response
	// head; cut is set when Client.Cut ended that wait.
	prev, next *conn
	inUse      bool
	awaiting   atomic.Bool
	cut        atomic.Bool

	abortFn func()             // c.abort, made once per connection
	peekFn  func(uintptr) bool // c.peek, made once per connection
	flushFn func(uintptr) bool // c.flushThenWait, made once per connection
	// flushThenWait's state for one flushAwait.
	wrote    bool
	writeErr error
	peekRes  int // result of the last peek: see alive
	peekBuf  [1]byte
	probe    [1]byte // the first byte of a request body of unknown length
}

// wire is the connection under the buffers: it counts the bytes each way,
// so that a failed exchange knows whether any of the response arrived and
// any of the request left (see Client.roundTrip's retry).
type wire struct {
	nc      net.Conn
	in, out atomic.Int64
}

func (w *wire) Read(p []byte) (int, error) {
	n, err := w.nc.Read(p)
	w.in.Add(int64(n))
	return n, err
}

func (w *wire) Write(p []byte) (int, error) {
	n, err := w.nc.Write(p)
	w.out.Add(int64(n))
	return n, err
}

// abort expires the connection's deadlines so that a blocked read or write
// returns at once. It runs on the context's goroutine.
func (c *conn) abort() {
	c.aborted.Store(true)
	c.nc.SetDeadline(aLongTimeAgo)
}

// hostPool is the pool of connections to one address.
type hostPool struct {
	c    *Client
	addr string

	mu      sync.Mutex // guards idle, open, waiters and busy
	idle    []*conn    // LIFO: the most recently used is last
	open    int        // connections dialing, in use or idle
	waiters []*waiter  // FIFO of requests waiting for MaxConnsPerHost
	busy    *conn      // connections in use, linked through conn.next
	retired bool       // the address left its pool: close connections as they come back

	// closedSoon is when (Unix nanoseconds) the host was last seen closing
	// a kept-alive connection soon after a response, without saying so:
	// see closesSoon.
	closedSoon atomic.Int64
}

// cautiousIdle is how long a connection may have been idle and still
// carry a request that cannot be sent again after the keep-alive race
// (not idempotent, or its body not to be had again); such a request gets
// a new connection after that. A backend closes an idle connection when
// its own timeout ends, and the request that meets the close cannot be
// resent: app servers' timeouts run from 2s (gunicorn) and 5s (Node,
// Apache, uvicorn) up (nginx 75s), so a connection idle for less than a
// second is safe from all of them. The cost is one connect for a POST
// after a quiet second, which is what nginx pays on every request to an
// upstream without keepalive.
const cautiousIdle = time.Second

// trustIdle is how long a connection may have been idle and still be
// taken without the liveness check (a one-byte MSG_PEEK, a system call
// per request that nginx does not make) by a request that can be sent
// again. A backend rarely closes a connection within this long of its
// last response without saying so; when one does, the request meets the
// close, fails before any of the response, and roundTrip sends it once
// more on a new connection, as it does after the keep-alive race. A
// request that cannot be sent again (not idempotent, a body not to be
// had again, WithoutResend) is always checked. Kept short so that the
// skipped check only ever saves work under steady traffic: an idle
// backend's connections are checked as before.
const trustIdle = 100 * time.Millisecond

// closingMemory is how long a host that closed a connection idle for
// less than cautiousIdle (one that closes after every response without
// Connection: close, or with a timeout shorter than a second) is
// remembered to do so: meanwhile requests that cannot be sent again get
// a new connection to it, whatever the idle one's age.
const closingMemory = 30 * time.Second

// keepAliveMargin is taken off a backend's Keep-Alive timeout: its timer
// starts when it sent the response and ours when we read it, and the
// request must arrive before the backend's fires, not merely leave.
const keepAliveMargin = time.Second

// keepAliveFor is how long a connection whose backend said Keep-Alive:
// timeout=secs may stay idle and be reused: the timeout less
// keepAliveMargin, or half of a timeout too short for the margin; 0
// means no limit (secs < 0: none named), negative means not at all.
func keepAliveFor(secs int) time.Duration {
	switch {
	case secs < 0:
		return 0
	case secs == 0:
		return -1
	}
	d := time.Duration(secs) * time.Second
	if d > 2*keepAliveMargin {
		return d - keepAliveMargin
	}
	return d / 2
}

// sawClosedSoon records that a connection idle for idle was found closed
// by the backend.
func (hp *hostPool) sawClosedSoon(idle time.Duration, now time.Time) {
	if idle < cautiousIdle {
		hp.closedSoon.Store(now.UnixNano())
	}
}

// closesSoon reports whether the host was seen closing connections soon
// after responses within closingMemory.
func (hp *hostPool) closesSoon(now time.Time) bool {
	t := hp.closedSoon.Load()
	return t != 0 && now.UnixNano()-t < int64(closingMemory)
}

// waiter is a request waiting for a connection when its host is full. It
// receives either an idle connection or nil, meaning a slot was freed for
// it to dial.
type waiter struct{ ch chan *conn }

func (c *Client) hostPool(addr string) *hostPool {
	if v, ok := c.hosts.Load(addr); ok {
		return v.(*hostPool)
	}
	v, _ := c.hosts.LoadOrStore(addr, &hostPool{c: c, addr: addr})
	return v.(*hostPool)
}

// get returns a connection to the host: an idle one that passed the
// liveness check, or a new one. fresh skips the idle ones. cautious is
// for a request that cannot be sent again if the backend closes the
// connection as it arrives: it takes an idle connection only when the
// newest is younger than cautiousIdle and the host is not known to close
// connections soon after responses. resendable is for a request that
// roundTrip may send once more on a new connection when a reused one
// turns out closed (see trustIdle): it skips the liveness check of a
// connection idle for less than trustIdle.
func (hp *hostPool) get(ctx context.Context, fresh, cautious, resendable bool) (pc *conn, err error) {
	c := hp.c
	if cautious && !fresh && hp.closesSoon(time.Now()) {
		fresh = true
	}
	for {
		hp.mu.Lock()
		full := c.o.MaxConnsPerHost > 0 && hp.open >= c.o.MaxConnsPerHost
		if n := len(hp.idle); n > 0 && cautious && !fresh && time.Since(hp.idle[n-1].idleAt) > cautiousIdle {
			fresh = true // the newest is too old for it: so are the others
		}
		if n := len(hp.idle); n > 0 && (!fresh || full) {
			pc = hp.idle[n-1]
			hp.idle[n-1] = nil
			hp.idle = hp.idle[:n-1]
			if fresh {
				// A fresh connection is wanted and the host is full: close
				// an idle one to make room.
				hp.mu.Unlock()
				hp.discard(pc)
				continue
			}
			now := time.Now()
			idle := now.Sub(pc.idleAt)
			if c.o.IdleTimeout > 0 && idle > c.o.IdleTimeout {
				// The newest is too old: so are all the others.
				stale := hp.idle
				hp.idle = hp.idle[:0]
				hp.open -= len(stale) + 1
				hp.mu.Unlock()
				for i, s := range stale {
					s.closeNow()
					stale[i] = nil
				}
				pc.closeNow()
				hp.wakeAfterClose(len(stale) + 1)
				continue
			}
			hp.use(pc)
			hp.mu.Unlock()
			if pc.keepFor > 0 && idle >= pc.keepFor {
				hp.discard(pc) // past the backend's own Keep-Alive timeout
				continue
			}
			if resendable && idle < c.trust && pc.buffered() == 0 && !hp.closesSoon(now) {
				return pc, nil
			}
			if pc.alive() {
				return pc, nil
			}
			hp.sawClosedSoon(idle, now)
			hp.discard(pc)
			continue
		}
		if max := c.o.MaxConnsPerHost; max > 0 && hp.open >= max {
			w := &waiter{ch: make(chan *conn, 1)}
			hp.waiters = append(hp.waiters, w)
			hp.mu.Unlock()
			select {
			case pc = <-w.ch:
			case <-ctx.Done():
				hp.mu.Lock()
				queued := hp.removeWaiter(w)
				hp.mu.Unlock()
				if !queued {
					// Something was handed to us meanwhile: pass it on.
					if pc = <-w.ch; pc != nil {
						hp.put(pc)
					} else {
						hp.release()
					}
				}
				return nil, ctx.Err()
			}
			if pc != nil {
				if !fresh && pc.alive() {
					return pc, nil
				}
				hp.discard(pc)
				continue
			}
			// A slot was freed and counted for us: dial.
		} else {
			hp.open++
			hp.mu.Unlock()
		}
		pc, err = hp.dial(ctx)
		if err != nil {
			hp.release()
			return nil, err
		}
		hp.mu.Lock()
		hp.use(pc)
		hp.mu.Unlock()
		return pc, nil
	}
}

func (hp *hostPool) removeWaiter(w *waiter) bool {
	for i, x := range hp.waiters {
		if x == w {
			copy(hp.waiters[i:], hp.waiters[i+1:])
			hp.waiters[len(hp.waiters)-1] = nil
			hp.waiters = hp.waiters[:len(hp.waiters)-1]
			return true
		}
	}
	return false
}

func (hp *hostPool) dial(ctx context.Context) (*conn, error) {
	c := hp.c
	// The proxy times new connections for its access log this way, as
	// http.Transport lets it; looked up only when dialing.
	trace := httptrace.ContextClientTrace(ctx)
	if trace != nil && trace.ConnectStart != nil {
		trace.ConnectStart("tcp", hp.addr)
	}
	nc, err := c.dial(ctx, "tcp", hp.addr)
	if trace != nil && trace.ConnectDone != nil {
		trace.ConnectDone("tcp", hp.addr, err)
	}
	if err != nil {
		return nil, err
	}
	pc := &conn{hp: hp, nc: nc}
	pc.wire.nc = nc
	if sc, ok := nc.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			pc.raw = raw
		}
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		pc.tcpRaw, _ = tc.SyscallConn()
	}
	pc.abortFn = pc.abort
	pc.peekFn = pc.peek
	pc.flushFn = pc.flushThenWait
	return pc, nil
}

// put returns a connection whose exchange ended cleanly: to a waiting
// request, to the idle stack, or closed when the stack is full.
func (hp *hostPool) put(pc *conn) {
	c := hp.c
	pc.used = true
	pc.idleAt = time.Now() // outside the lock: every request takes it twice
	hp.mu.Lock()
	if len(hp.waiters) > 0 && !hp.retired {
		w := hp.waiters[0]
		copy(hp.waiters, hp.waiters[1:])
		hp.waiters[len(hp.waiters)-1] = nil
		hp.waiters = hp.waiters[:len(hp.waiters)-1]
		hp.mu.Unlock()
		w.ch <- pc
		return
	}
	hp.unuse(pc)
	if c.closed.Load() || hp.retired || len(hp.idle) >= c.maxIdle {
		hp.mu.Unlock()
		hp.discard(pc)
		return
	}
	hp.idle = append(hp.idle, pc)
	hp.mu.Unlock()
	if c.o.IdleTimeout > 0 && !c.janitorOn.Load() && c.janitorOn.CompareAndSwap(false, true) {
		c.janitorWG.Add(1)
		go c.janitor()
	}
}

// discard closes a connection that is not idle and frees its slot.
func (hp *hostPool) discard(pc *conn) {
	hp.mu.Lock()
	hp.unuse(pc)
	hp.mu.Unlock()
	pc.closeNow()
	hp.release()
}

// release frees one connection slot: a waiter gets it, or the count drops.
func (hp *hostPool) release() {
	hp.mu.Lock()
	if len(hp.waiters) > 0 {
		w := hp.waiters[0]
		copy(hp.waiters, hp.waiters[1:])
		hp.waiters[len(hp.waiters)-1] = nil
		hp.waiters = hp.waiters[:len(hp.waiters)-1]
		hp.mu.Unlock()
		w.ch <- nil
		return
	}
	hp.open--
	hp.mu.Unlock()
}

// wakeAfterClose hands n freed slots (already subtracted from open) to
// waiters, if any.
func (hp *hostPool) wakeAfterClose(n int) {
	for ; n > 0; n-- {
		hp.mu.Lock()
		if len(hp.waiters) == 0 {
			hp.mu.Unlock()
			return
		}
		w := hp.waiters[0]
		copy(hp.waiters, hp.waiters[1:])
		hp.waiters[len(hp.waiters)-1] = nil
		hp.waiters = hp.waiters[:len(hp.waiters)-1]
		hp.open++
		hp.mu.Unlock()
		w.ch <- nil
	}
}

// closeIdle closes idle connections: all of them, or only those idle
// longer than IdleTimeout when expiredOnly. It returns how many stay idle.
func (hp *hostPool) closeIdle(expiredOnly bool) int {
	var victims []*conn
	hp.mu.Lock()
	if expiredOnly {
		// Oldest first: stop at the first one still fresh.
		now := time.Now()
		n := 0
		for n < len(hp.idle) && now.Sub(hp.idle[n].idleAt) > hp.c.o.IdleTimeout {
			n++
		}
		victims = append(victims, hp.idle[:n]...)
		k := copy(hp.idle, hp.idle[n:])
		clear(hp.idle[k:])
		hp.idle = hp.idle[:k]
	} else {
		victims = append(victims, hp.idle...)
		clear(hp.idle)
		hp.idle = hp.idle[:0]
	}
	hp.open -= len(victims)
	left := len(hp.idle)
	hp.mu.Unlock()
	for _, pc := range victims {
		pc.closeNow()
	}
	hp.wakeAfterClose(len(victims))
	return left
}

// janitor closes connections idle longer than IdleTimeout. It runs only
// while some connection is idle, so a Client that is dropped without Close
// leaves no goroutine behind for long.
func (c *Client) janitor() {
	defer c.janitorWG.Done()
	every := max(c.o.IdleTimeout/2, 10*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-c.done:
			c.janitorOn.Store(false)
			return
		}
		if c.sweep(true) > 0 {
			continue
		}
		c.janitorOn.Store(false)
		// A connection put idle after the sweep saw janitorOn still true
		// and started nobody: look again now that it is false.
		if c.sweep(false) == 0 || !c.janitorOn.CompareAndSwap(false, true) {
			return
		}
	}
}

// sweep closes expired idle connections when close is set, and returns
// how many connections stay idle.
func (c *Client) sweep(close bool) int {
	left := 0
	c.hosts.Range(func(_, v any) bool {
		hp := v.(*hostPool)
		if close {
			left += hp.closeIdle(true)
		} else {
			hp.mu.Lock()
			left += len(hp.idle)
			hp.mu.Unlock()
		}
		return true
	})
	return left
}

// closeNow closes the connection and recycles its buffers when no body
// goroutine may still use them.
func (pc *conn) closeNow() {
	pc.nc.Close()
	if pc.async {
		return
	}
	pc.releaseWriter()
	if pc.br != nil {
		pc.br.Reset(nil)
		pc.hp.c.rbufs.Put(pc.br)
		pc.br = nil
	}
}

// A connection holds its buffers (ReadBufferSize and WriteBufferSize, 32
// KiB each by default) only while it uses them: the write buffer from the
// request's head until it is sent, the read buffer from the response's
// first bytes (from the request's end when its body goes on a goroutine
// of its own) until the response's body ends. Between, while it waits for the
// response and while it is idle, they are back in the client's pools, so
// that the buffers in memory follow the exchanges moving bytes at the
// moment, not the connections open: at 64 busy connections on one core
// that is a few of each instead of 64 (4 MiB of heap, twice that resident
// with the collector's headroom). The sizes, and so the system calls per
// request, are unchanged.

// takeWriter gives the connection a write buffer for a request.
func (pc *conn) takeWriter() {
	if pc.bw != nil {
		return
	}
	c := pc.hp.c
	if v := c.wbufs.Get(); v != nil {
		pc.bw = v.(*bufio.Writer)
		pc.bw.Reset(&pc.wire)
	} else {
		pc.bw = bufio.NewWriterSize(&pc.wire, c.o.WriteBufferSize)
	}
}

// releaseWriter returns the write buffer once the request is sent (or
// failed to be).
func (pc *conn) releaseWriter() {
	if pc.bw == nil {
		return
	}
	pc.bw.Reset(nil)
	pc.hp.c.wbufs.Put(pc.bw)
	pc.bw = nil
}

// takeReader gives the connection a read buffer for a response.
func (pc *conn) takeReader() {
	if pc.br != nil {
		return
	}
	c := pc.hp.c
	if v := c.rbufs.Get(); v != nil {
		pc.br = v.(*bufio.Reader)
		pc.br.Reset(&pc.wire)
	} else {
		pc.br = bufio.NewReaderSize(&pc.wire, c.o.ReadBufferSize)
	}
}

// releaseReader returns the read buffer of a connection going idle,
// unless it holds bytes past the response: those stay for the liveness
// check to find (see alive).
func (pc *conn) releaseReader() {
	if pc.br == nil || pc.br.Buffered() > 0 {
		return
	}
	pc.br.Reset(nil)
	pc.hp.c.rbufs.Put(pc.br)
	pc.br = nil
}

// buffered is how many bytes the read buffer holds that no response took.
func (pc *conn) buffered() int {
	if pc.br == nil {
		return 0
	}
	return pc.br.Buffered()
}

// alive reports whether an idle connection can carry a request: nothing
// arrived on it while idle (no data, no FIN, no RST). A backend that closed
// the connection between requests is caught here, before anything is
// written, instead of failing the request or retrying it.
func (pc *conn) alive() bool {
	if pc.buffered() > 0 {
		return false // unsolicited bytes: the framing is off
	}
	if pc.raw == nil {
		return true
	}
	pc.clearHeadDeadline() // it may have passed: the peek would fail
	pc.peekRes = peekDead
	if err := pc.raw.Read(pc.peekFn); err != nil {
		return false
	}
	return pc.peekRes == peekEmpty
}

// clearHeadDeadline takes a response-header deadline left on the socket
// off, for a read that is not bounded by it.
func (pc *conn) clearHeadDeadline() {
	if pc.headDeadline {
		pc.headDeadline = false
		pc.nc.SetReadDeadline(time.Time{})
	}
}

// flushAwait writes the buffered request and waits until the response
// begins to arrive (or the connection ends, or its read deadline passes),
// so that the read that follows finds bytes: reading at once, as
// net.Conn's Read does, would almost always meet an empty socket first,
// a system call returning EAGAIN for each exchange. The write happens in
// the wait's own callback, after the poller's readiness was reset for it,
// so that no byte of the response can come before the wait began and be
// missed. A wait that ends in an error is left to the read that follows,
// which meets the same error.
//
// The write buffer goes back to the pool once the request is sent, not
// after the wait.
func (pc *conn) flushAwait() error {
	defer pc.releaseWriter()
	if pc.tcpRaw == nil || pc.bw.Buffered() == 0 {
		return pc.bw.Flush()
	}
	pc.wrote, pc.writeErr = false, nil
	pc.tcpRaw.Read(pc.flushFn)
	if !pc.wrote {
		// The wait failed before its callback ran (closed, deadline).
		return pc.bw.Flush()
	}
	err := pc.writeErr
	pc.writeErr = nil
	return err
}

// flushThenWait is flushAwait's callback: it writes on its first call
// and reports readability on the next.
func (pc *conn) flushThenWait(uintptr) bool {
	if pc.wrote {
		return true
	}
	pc.wrote = true
	pc.writeErr = pc.bw.Flush()
	pc.releaseWriter()
	return pc.writeErr != nil
}

// Outcomes of peek.
const (
	peekEmpty = iota // nothing to read: alive
	peekDead         // EOF, data or an error
)
