// Package h2conn adapts a connection for the standard library's HTTP/2
// endpoints (golang.org/x/net/http2's server, net/http's client
// connections), which write frame by frame: the server flushes its 4 KiB
// buffer whenever its write queue runs empty, so a response leaves as
// HEADERS, DATA and trailers in three writes (three TLS records) unless
// other streams' frames happen to be queued; the client flushes after the
// headers and after every DATA frame of a request. Neither lets a caller
// size or defer those flushes.
//
// A Conn takes every write into a buffer and hands the buffer to the
// connection from a goroutine of its own, started when the buffer fills
// from empty: the writes a burst makes (the frames of one response, the
// responses of many streams answered one after another) leave together,
// in one system call and, over TLS, one record. Nothing waits for more:
// the goroutine writes as soon as the scheduler runs it, which is after
// the goroutines already runnable (the writer's own next frames among
// them). A full buffer (Limit bytes) makes Write wait until it drains,
// so a slow reader still holds its writer back; the first failed write
// fails every later Write and closes the connection, and Close writes
// what was accepted before it closes (within CloseGrace).
//
// Reads are buffered too when the connection is not a *tls.Conn (which
// reads whole records itself): the HTTP/2 framer reads a frame's 9-byte
// header and then its payload, two system calls per frame on a plain
// socket.
package h2conn

import (
	"bufio"
	"crypto/tls"
	"net"
	"sync"
	"time"
)

const (
	// Limit is the most a Conn holds unwritten before Write waits: four
	// full-size DATA frames and their headers, so that a stream's
	// frames can pile up while the previous batch is on its way.
	Limit = 64 << 10
	// CloseGrace bounds how long Close lets the accepted bytes drain to
	// a peer that does not read.
	CloseGrace = time.Second
	// readBuffer is the read buffer of a plain connection: a request's
	// frames in one system call, as net/http's HTTP/1.1 server reads (a
	// payload larger than the buffer is read straight into the framer's).
	readBuffer = 4 << 10
	// batchBuffer is the starting size of a batch buffer.
	batchBuffer = 16 << 10
	// direct is the size from which a write that finds nothing pending
	// goes to the connection at once: a full-size DATA frame (16 KiB)
	// and its header.
	direct = 16 << 10
	// maxPooled is the largest batch buffer kept for reuse.
	maxPooled = 2 * Limit
)

// bufPool holds the batch buffers: a connection holds them only while
// it writes.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, batchBuffer); return &b }}

// Wrap returns c adapted as the package doc says. The result of a
// *tls.Conn keeps its ConnectionState, so the HTTP/2 server sees the
// connection as TLS (and checks its version and cipher suite).
func Wrap(c net.Conn) net.Conn {
	if tc, ok := c.(*tls.Conn); ok {
		return &tlsConn{Conn: newConn(c, false), tc: tc}
	}
	return newConn(c, true)
}

// WrapUnderTLS returns c with its writes batched, for a connection a TLS
// client will run over (net/http's Transport dials the TCP connection and
// runs TLS itself): TLS reads whole records through its own buffer, and
// its records still leave one per write, but in fewer system calls.
func WrapUnderTLS(c net.Conn) net.Conn {
	return newConn(c, false)
}

func newConn(c net.Conn, bufferReads bool) *Conn {
	b := &Conn{Conn: c}
	b.cond.L = &b.mu
	if bufferReads {
		b.r = bufio.NewReaderSize(c, readBuffer)
	}
	return b
}

// Conn is a connection whose writes are batched; see the package doc.
type Conn struct {
	net.Conn
	r *bufio.Reader // nil: reads go to Conn

	mu      sync.Mutex
	cond    sync.Cond // on mu: pending drained, or a write failed
	pending []byte    // accepted, not yet handed to Conn; guarded by mu
	spare   []byte    // the buffer of the batch on its way; guarded by mu
	writing bool      // a drain goroutine runs; guarded by mu
	err     error     // the first failure; guarded by mu
	closing bool      // Close was called; guarded by mu
}

type tlsConn struct {
	*Conn
	tc *tls.Conn
}

// ConnectionState is the TLS connection's: x/net/http2's server reads it
// to know it serves TLS.
func (c *tlsConn) ConnectionState() tls.ConnectionState { return c.tc.ConnectionState() }

// NetConn is the connection under the TLS one, as (*tls.Conn).NetConn.
func (c *tlsConn) NetConn() net.Conn { return c.tc.NetConn() }

func (c *Conn) Read(p []byte) (int, error) {
	if c.r == nil {
		return c.Conn.Read(p)
	}
	return c.r.Read(p)
}

// Write takes p for the next batch and returns; it waits only while
// Limit bytes are already pending. A large p (a full DATA frame) that
// finds nothing pending is written at once, by the caller: batching it
// would only copy it.
func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.err == nil && !c.closing && len(c.pending) >= Limit {
		c.cond.Wait()
	}
	if c.err != nil {
		return 0, c.err
	}
	if c.closing {
		return 0, net.ErrClosed
	}
	if !c.writing && len(p) >= direct {
		c.writing = true // the writes that come meanwhile wait their turn
		c.mu.Unlock()
		n, err := c.Conn.Write(p)
		c.mu.Lock()
		c.wrote(err)
		if err != nil {
			return n, err
		}
		return n, nil
	}
	if c.pending == nil {
		c.pending = (*bufPool.Get().(*[]byte))[:0]
	}
	c.pending = append(c.pending, p...)
	if !c.writing {
		c.writing = true
		go c.drain()
	}
	return len(p), nil
}

// drain hands the pending bytes to the connection, batch after batch,
// until none are left.
func (c *Conn) drain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drainLocked()
}

func (c *Conn) drainLocked() {
	for len(c.pending) > 0 && c.err == nil {
		batch := c.pending
		c.pending = c.spare[:0]
		c.spare = nil
		c.mu.Unlock()
		_, err := c.Conn.Write(batch)
		c.mu.Lock()
		c.spare = batch
		if err != nil && c.err == nil {
			c.err = err
		}
		c.cond.Broadcast()
	}
	c.writing = false
	// An idle connection keeps no buffer.
	for _, b := range [][]byte{c.pending, c.spare} {
		if b != nil && cap(b) <= maxPooled {
			bufPool.Put(&b)
		}
	}
	c.pending, c.spare = nil, nil
	c.cond.Broadcast()
	if c.err != nil || c.closing {
		// A connection that cannot be written is of no use, and its
		// reader should learn so now rather than at its next write.
		c.Conn.Close()
	}
}

// wrote ends a write made by Write itself: what came meanwhile is
// drained by a goroutine, as Write would have.
func (c *Conn) wrote(err error) {
	if err != nil && c.err == nil {
		c.err = err
	}
	if len(c.pending) > 0 && c.err == nil {
		go c.drain()
		return
	}
	c.drainLocked() // nothing to write: only the idle connection's end
}

// Close writes what Write accepted, within CloseGrace, and closes the
// connection. Reads fail at once.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return net.ErrClosed
	}
	c.closing = true
	c.cond.Broadcast()
	if c.writing {
		// The drain goroutine closes the connection when it is done.
		c.mu.Unlock()
		c.Conn.SetReadDeadline(time.Unix(1, 0))
		c.Conn.SetWriteDeadline(time.Now().Add(CloseGrace))
		return nil
	}
	c.mu.Unlock()
	return c.Conn.Close()
}
