package h1

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sturdyproxy/sturdy/internal/wire/httphead"
)

// A connection has two goroutines. The watcher waits for the socket to
// become readable, without a buffer, and then wakes the server goroutine
// for the requests that arrived; while one is being answered, it watches
// for the client's going away and cancels the request if it does. The
// server goroutine reads and answers requests while bytes remain
// buffered, gives its buffers back, and parks, for a second at most. So
// a connection idle for longer is this struct and, off Linux, the
// watcher's small stack: on Linux the watcher hands the connection to
// the server's parker and exits (see parker), and the parker starts a new
// one when the client sends again.
type conn struct {
	srv    *Server
	nc     net.Conn
	tcp    *net.TCPConn // nc, when it is one: splice for response bodies
	raw    syscall.RawConn
	ctx    context.Context
	remote string
	local  net.Addr

	state atomic.Int32 // stIdle, stActive or stClosed

	// idle is the token of the server goroutine: taken by the watcher
	// to start one, given back by it when it exits.
	idle chan struct{}
	// watchOn: from the server goroutine to the watcher, once per start:
	// true when the socket holds nothing of the requests being answered
	// (watch it), false when the connection is closed or handed off.
	watchOn   chan bool
	watchSent atomic.Bool
	// next wakes the parked server goroutine (true) or retires it
	// (false); closed when the watcher exits.
	next chan bool

	// idleUntil is when the idle (or first-request) timeout ends, in
	// Unix nanoseconds; set by the server goroutine before it exits.
	// Times on the server's monotonic clock (Server.mono).
	idleUntil atomic.Int64
	parkUntil atomic.Int64             // when a parked server goroutine is retired
	born      int64                    // when the connection was accepted
	fresh     atomic.Bool              // no request has begun yet
	cur       atomic.Pointer[exchange] // the request being answered
	handedOff bool                     // set before watchOn <- false
	// Set by the parker, under its lock: the socket's number while
	// parked, and the connection's place in its heap (-1: not parked).
	parkFd  int32
	parkIdx int

	// The peek's result, for the method value given to RawConn.Read.
	peekBuf  [1]byte
	peekEv   event
	peeked   bool
	peekFunc func(uintptr) bool

	// Owned by the server goroutine; nil while idle.
	fields []httphead.Field
	unread bool // the client is still sending what nobody will read
	// blank is how many CR or LF bytes may still be skipped before the
	// next request line: maxBlank after a POST, 0 otherwise (skipBlank).
	blank int
	woke  bool // woken for a request: the wait's deadline is still armed
	buf   *[]byte
	r, w  int // unread bytes are (*buf)[r:w]
	bw    *writer
	wdl   writeDeadline // the handler's write deadline

	// rdl says whether the socket's read deadline is the wait's (the
	// park or idle time, see serve), which a bodiless request leaves on:
	// set and cleared for each request, it cost two timer updates. When
	// such a request outlives it, the watcher clears it (see watch).
	// Every read deadline set after accept goes through setRead.
	rdl struct {
		mu  sync.Mutex
		own bool  // the socket's read deadline is the wait's...
		at  int64 // ...which ends then (mono)
	}
}

const (
	stIdle int32 = iota
	stActive
	stClosed
)

type event uint8

const (
	evData event = iota
	evClosed
	evTimeout
)

func (s *Server) newConn(nc net.Conn) (*conn, error) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil, errors.New("h1: connection without SyscallConn")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, err
	}
	c := &conn{
		srv: s, nc: nc, raw: raw, remote: nc.RemoteAddr().String(), local: nc.LocalAddr(),
		idle: make(chan struct{}, 1), watchOn: make(chan bool, 1), next: make(chan bool),
	}
	c.tcp, _ = nc.(*net.TCPConn)
	c.wdl.nc, c.wdl.raw = nc, raw
	c.parkIdx = -1
	c.fresh.Store(true)
	c.peekFunc = c.peek
	c.idle <- struct{}{}
	ctx := context.WithValue(context.Background(), http.LocalAddrContextKey, c.local)
	if s.ConnContext != nil {
		ctx = s.ConnContext(ctx, nc)
	}
	c.ctx = ctx
	now := time.Now()
	c.born = s.mono(now)
	c.idleUntil.Store(c.born + int64(s.ReadHeaderTimeout))
	if s.ReadHeaderTimeout > 0 {
		nc.SetReadDeadline(now.Add(s.ReadHeaderTimeout))
	}
	return c, nil
}

// watch is the connection's watcher (see conn). It starts with the
// connection, and again when the parker hands back a connection it
// parked: either way no server goroutine is running.
func (c *conn) watch() {
	started, parked := false, false
	defer func() {
		if parked {
			return // the parker has it now
		}
		close(c.next) // a parked server goroutine exits
		c.srv.untrack(c)
		if !c.handedOff {
			c.state.Store(stClosed)
			c.nc.Close()
		}
	}()
	for {
		switch c.wait() {
		case evClosed:
			if x := c.cur.Load(); x != nil {
				x.ctx.cancel() // the client left while its request was answered
			}
			<-c.idle
			return
		case evTimeout:
			if c.outlivedWait() {
				continue // a request outlived the wait's deadline: watch on
			}
			<-c.idle // the deadline may be a handler's: let it finish
			if c.state.Load() == stClosed {
				return // its answer closed the connection
			}
			now := time.Now()
			mono := c.srv.mono(now)
			if mono >= c.idleUntil.Load() {
				return
			}
			if started && mono >= c.parkUntil.Load() {
				// Idle for a while: the server goroutine's stack goes, the
				// next request starts another.
				c.next <- false
				started = false
				c.setRead(now.Add(time.Duration(c.idleUntil.Load() - mono)))
			}
			c.idle <- struct{}{}
			if !started && c.srv.parked.park(c) {
				// Idle with no server goroutine: the watcher's stack goes
				// too; the parker starts a new one when the client sends.
				parked = true
				return
			}
			continue
		}
		<-c.idle
		if !c.state.CompareAndSwap(stIdle, stActive) {
			return // closed by Shutdown or Close
		}
		c.watchSent.Store(false)
		if started {
			c.next <- true
		} else {
			started = true
			go c.serve()
		}
		if !<-c.watchOn {
			return
		}
	}
}

// waitDeadline arms the read deadline of the wait for the next request
// (the park time, or the idle time when that ends first) and makes the
// connection idle. The deadline a bodiless request left on is kept when
// it ends no later than the idle time and no earlier than a sixteenth
// of the park time before the park time would: a busy connection then
// updates its timer once per sixteenth of a second, not twice a request.
// (The park time is the front end's own, of no client's concern; the
// idle time is kept to the nanosecond.)
func (c *conn) waitDeadline() {
	now := time.Now()
	mono := c.srv.mono(now)
	idle, park := c.srv.idleTimeout(), c.srv.parkTime()
	c.idleUntil.Store(mono + int64(idle))
	c.rdl.mu.Lock()
	defer c.rdl.mu.Unlock()
	if at := c.rdl.at; c.rdl.own && at <= mono+int64(idle) && at >= mono+int64(park-park/16) {
		c.parkUntil.Store(at)
	} else {
		c.parkUntil.Store(mono + int64(park))
		d := min(idle, park)
		c.nc.SetReadDeadline(now.Add(d))
		c.rdl.own, c.rdl.at = true, mono+int64(d)
	}
	// Under the lock: the watcher, told of a timeout, must see the
	// request over and the new deadline, or neither (outlivedWait).
	c.state.Store(stIdle)
}

// setRead sets the socket's read deadline to one that is not the wait's.
func (c *conn) setRead(t time.Time) error {
	c.rdl.mu.Lock()
	defer c.rdl.mu.Unlock()
	c.rdl.own = false
	return c.nc.SetReadDeadline(t)
}

// keepWaitDeadline reports whether the wait's deadline is on, for a
// bodiless request to leave it there.
func (c *conn) keepWaitDeadline() bool {
	c.rdl.mu.Lock()
	defer c.rdl.mu.Unlock()
	return c.rdl.own
}

// outlivedWait, for the watcher told of a timeout, clears the wait's
// deadline when a request that left it on is still being answered, and
// reports whether it did: the client's going away is then watched for as
// before, to the request's end.
func (c *conn) outlivedWait() bool {
	c.rdl.mu.Lock()
	defer c.rdl.mu.Unlock()
	if !c.rdl.own || c.state.Load() != stActive {
		return false
	}
	c.rdl.own = false
	c.nc.SetReadDeadline(time.Time{})
	return true
}

// sendWatch tells the watcher, once per wake-up, what to do.
func (c *conn) sendWatch(on bool) {
	if c.watchSent.CompareAndSwap(false, true) {
		c.watchOn <- on
	}
}

// serve is the connection's server goroutine: woken by the watcher, it
// reads and answers requests while bytes remain buffered, gives the
// buffers back and parks until the next wake-up. It stays while requests
// keep coming, so that its stack, grown by the handler once, is not grown
// again for every request; after parkTime without one, the watcher
// retires it, and an idle connection keeps only the watcher.
func (c *conn) serve() {
	for {
		keep, handedOff := c.session()
		if handedOff {
			return
		}
		c.sendWatch(keep)
		if !keep || c.srv.closing.Load() {
			c.state.Store(stClosed)
			if c.unread {
				c.closeWriteAndWait()
			}
			c.nc.Close()
			c.idle <- struct{}{}
			return
		}
		c.waitDeadline()
		c.idle <- struct{}{}
		if run, ok := <-c.next; !ok || !run {
			return
		}
		// Bytes are there, under the deadline armed for waiting: the
		// head gets its own only if one read does not bring all of it
		// (see readHead), which saves a clock read and a timer update
		// for most requests.
		c.woke = true
	}
}

// session serves the requests of one wake-up: while bytes remain
// buffered. It reports whether the connection may carry more, or that it
// was handed off.
func (c *conn) session() (keep, handedOff bool) {
	if c.buf == nil {
		c.buf = bufPool.Get().(*[]byte)
		c.r, c.w = 0, 0
	}
	defer c.releaseBuffers()
	c.fresh.Store(false)
	for {
		var handoff bool
		keep, handoff = c.serveOne()
		if handoff {
			c.handOff()
			return false, true
		}
		// An empty line after a POST's body is skipped now, so that a
		// client that sent one parks the connection as an idle one.
		c.r, c.blank = skipBlank((*c.buf)[:c.w], c.r, c.blank)
		if !keep || c.r == c.w {
			return keep, false
		}
	}
}

// handOff gives the connection, with what was read of it, to Handoff.
func (c *conn) handOff() {
	pending := append([]byte(nil), (*c.buf)[c.r:c.w]...)
	c.r = c.w
	c.releaseBuffers()
	c.handedOff = true
	// Counted until Handoff has taken it: untracked, it would let Shutdown
	// return, and the Handoff's server stop, with the request read.
	c.srv.handing.Add(1)
	defer c.srv.handing.Add(-1)
	c.srv.untrack(c)
	// net/http's server arms its own deadlines; none of a handler's
	// here may outlive the hand-off.
	c.setRead(time.Time{})
	c.wdl.clear()
	c.sendWatch(false)
	rc := &replayConn{Conn: c.nc, pending: pending}
	if c.srv.Handoff == nil || !c.srv.Handoff(rc) {
		c.nc.Close()
	}
}

// headDeadline gives the next head ReadHeaderTimeout from now.
func (c *conn) headDeadline() {
	if t := c.srv.ReadHeaderTimeout; t > 0 {
		c.setRead(time.Now().Add(t))
	} else {
		c.setRead(time.Time{})
	}
}

// closeWriteAndWait, before closing a connection whose client is still
// sending (a body too large to drop), sends a FIN and reads what comes
// for a moment, as net/http does: closing with unread bytes would reset
// the connection and could destroy the answer on its way.
func (c *conn) closeWriteAndWait() {
	if c.tcp == nil {
		return
	}
	c.tcp.CloseWrite()
	c.setRead(time.Now().Add(rstAvoidanceDelay))
	var sink [512]byte
	for {
		if _, err := c.nc.Read(sink[:]); err != nil {
			return
		}
	}
}

// rstAvoidanceDelay is net/http's: how long a half-closed connection is
// read before it is closed.
const rstAvoidanceDelay = 500 * time.Millisecond

func (c *conn) releaseBuffers() {
	if c.buf != nil && c.r == c.w {
		bufPool.Put(c.buf)
		c.buf = nil
	}
	if c.bw != nil {
		c.bw.Reset(nil)
		writerPool.Put(c.bw)
		c.bw = nil
	}
}

// serveOne reads one request and answers it; it reports whether the
// connection may carry another, or that it is to be handed off.
func (c *conn) serveOne() (keep, handoff bool) {
	end, ok := c.readHead()
	if !ok {
		return false, false
	}
	if end < 0 {
		return false, true
	}
	x := &exchange{c: c}
	req, ok := x.parse((*c.buf)[c.r:end])
	if !ok {
		return false, true
	}
	c.r = end
	// The idle or head deadline is not the handler's; it arms its own. A
	// request without a body reads nothing more: the wait's stays on.
	if x.remaining != 0 || !c.keepWaitDeadline() {
		c.setRead(time.Time{})
	}
	x.ctx.Context = c.ctx
	r := req.WithContext(&x.ctx)
	x.req = r
	c.cur.Store(x)
	x.body.start(x)
	x.run(r)
	c.cur.Store(nil)
	x.ctx.cancel()
	c.blank = 0
	if req.Method == http.MethodPost {
		c.blank = maxBlank
	}
	return x.finishConn(), false
}

// maxBlank is how many CR or LF bytes are skipped before the request
// line that follows a POST: net/http's server peeks at 4 and skips those
// that are CR or LF, for old clients that end a POST's body with an
// extra CRLF (RFC 9112 2.2 allows ignoring it). Both front ends skip the
// same bytes, so that which one reads a connection changes nothing.
const maxBlank = 4

// skipBlank skips up to budget CR or LF bytes at r in b and returns the
// new r and what is left of the budget: nothing once the request line
// has begun.
func skipBlank(b []byte, r, budget int) (int, int) {
	for budget > 0 && r < len(b) {
		if c := b[r]; c != '\r' && c != '\n' {
			return r, 0
		}
		r++
		budget--
	}
	return r, budget
}

// readHead reads until the buffer holds a whole request head; it returns
// the offset after the head, -1 when the request is to be handed off
// (a bare LF, a head too large for the buffer), or ok false when the
// connection ended or timed out first.
func (c *conn) readHead() (end int, ok bool) {
	b := *c.buf
	limit := len(b)
	if m := c.srv.MaxHeaderBytes; m > 0 && m < limit {
		limit = m
	}
	scanned := c.r
	if c.r < c.w {
		// A pipelined head: the handler before it may have left any
		// deadline on the connection.
		c.headDeadline()
	}
	woke, arm := c.woke, false
	c.woke = false
	for {
		if c.blank > 0 {
			c.r, c.blank = skipBlank(b[:c.w], c.r, c.blank)
			scanned = max(scanned, c.r)
		}
		switch e := headEnd(b[:c.w], c.r, &scanned); {
		case e > 0:
			if e-c.r > limit {
				return -1, true
			}
			return e, true
		case e < 0:
			return -1, true
		}
		if c.w == len(b) {
			if c.r == 0 {
				return -1, true // net/http reads heads this large
			}
			n := copy(b, b[c.r:c.w])
			scanned -= c.r
			c.r, c.w = 0, n
		}
		if arm {
			c.headDeadline()
			arm = false
		}
		n, err := c.nc.Read(b[c.w:])
		c.w += n
		if woke {
			// That read was under the wait's deadline: the rest of the
			// head, if any, has the head's own. A wait's deadline may end
			// just as the bytes come: then they are read under the head's.
			woke, arm = false, true
			if err != nil && n == 0 && isTimeout(err) {
				continue
			}
		}
		if err != nil && n == 0 {
			if c.r < c.w && !isTimeout(err) {
				return -1, true // let net/http tell a cut-off head
			}
			return 0, false
		}
	}
}

// headEnd finds the end of the head that starts at r in b (the offset
// after its empty line), 0 when it is not all there yet, and -1 when a
// line ends in a bare LF or the head starts with an empty line. scanned
// is where the previous call stopped, so a slow client's head is not
// scanned again from the start.
func headEnd(b []byte, r int, scanned *int) int {
	for i := *scanned; i < len(b); i++ {
		if k := bytes.IndexByte(b[i:], '\n'); k < 0 {
			break
		} else {
			i += k
		}
		if i == r || b[i-1] != '\r' {
			return -1
		}
		if i-1 == r {
			return -1 // an empty line before the request line
		}
		if i >= r+3 && b[i-2] == '\n' && b[i-3] == '\r' {
			return i + 1
		}
		*scanned = i + 1
	}
	if len(b) > *scanned {
		*scanned = len(b)
	}
	return 0
}

// run calls the handler, as net/http does about panics: ErrAbortHandler
// ends the connection quietly, any other is logged with its stack.
func (x *exchange) run(r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			x.broken = true
			if v != http.ErrAbortHandler {
				buf := make([]byte, 64<<10)
				buf = buf[:runtime.Stack(buf, false)]
				x.c.srv.logf("h1: panic serving %s: %v\n%s", x.c.remote, v, buf)
			}
		}
	}()
	x.c.srv.Handler.ServeHTTP(x, r)
}

var (
	bufPool    = sync.Pool{New: func() any { b := make([]byte, readBufSize); return &b }}
	writerPool = sync.Pool{New: func() any { return newWriter(writeBufSize) }}
)

// parkTime is how long a server goroutine waits for its connection's next
// request before it is retired.
const parkTime = time.Second

const (
	readBufSize  = 8 << 10
	writeBufSize = 8 << 10
)

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// replayConn is a handed-off connection: the bytes read before the
// hand-off come first.
type replayConn struct {
	net.Conn
	pending []byte
}

func (rc *replayConn) Read(p []byte) (int, error) {
	if len(rc.pending) > 0 {
		n := copy(p, rc.pending)
		rc.pending = rc.pending[n:]
		return n, nil
	}
	return rc.Conn.Read(p)
}

// NetConn returns the connection underneath.
func (rc *replayConn) NetConn() net.Conn { return rc.Conn }
