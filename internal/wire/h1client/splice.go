package h1client

import (
	"context"
	"io"
	"net"
)

// SpliceTo moves the rest of a fixed-length or close-delimited body to w
// through w's ReadFrom, which on Linux, from one TCP connection to
// another, is splice(2): the bytes go from socket to socket in the kernel
// without being copied through sturdy. The bytes the connection's reader
// holds already are written first.
//
// It declines (ok false, nothing read or written) unless the body is
// fixed-length or close-delimited, the backend connection is plain TCP, w
// has ReadFrom, and, for a fixed length, at least min bytes are still in
// the socket: below that a copy is cheaper than the splice's system calls.
//
// Which side failed is reported apart, because the one system call that
// moves the bytes fails for either: readErr when the backend's side broke
// (it closed or reset early, or the request's deadline passed) — the body
// is then broken, as from Read — and writeErr when writing to w failed
// or the request was canceled while the backend was still sending.
func (b *body) SpliceTo(w io.Writer, min int64) (n int64, readErr, writeErr error, ok bool) {
	if !canSplice || b.err != nil || b.x == nil || (b.kind != bodyFixed && b.kind != bodyClose) {
		return 0, nil, nil, false
	}
	rf, isRF := w.(io.ReaderFrom)
	tc, isTCP := b.x.pc.nc.(*net.TCPConn)
	if !isRF || !isTCP {
		return 0, nil, nil, false
	}
	fixed := b.kind == bodyFixed
	if fixed && b.n-int64(b.br.Buffered()) < min {
		return 0, nil, nil, false
	}
	for b.br.Buffered() > 0 && (!fixed || b.n > 0) {
		p, _ := b.br.Peek(b.br.Buffered())
		if fixed && int64(len(p)) > b.n {
			p = p[:b.n]
		}
		m, err := w.Write(p)
		b.br.Discard(m)
		n += int64(m)
		if fixed {
			b.n -= int64(m)
		}
		if err != nil {
			return n, nil, err, true
		}
	}
	var src io.Reader = tc
	if fixed {
		if b.n == 0 {
			b.end()
			return n, nil, nil, true
		}
		src = &io.LimitedReader{R: tc, N: b.n}
	}
	m, err := rf.ReadFrom(src)
	n += m
	if fixed {
		b.n -= m
	}
	switch {
	case err == nil && (!fixed || b.n == 0):
		b.end()
		return n, nil, nil, true
	case err == nil:
		return n, b.fail(io.ErrUnexpectedEOF), nil, true
	}
	// Whether the backend's side looks broken is asked before whether the
	// request was canceled, never after: a front end cancels the request
	// when its write to the client fails, and the abort that follows on
	// the context's goroutine expires this connection's deadlines, which
	// makes it look broken. Asked in this order, an abort seen here means
	// the context had ended before it, so a cancel is never missed.
	backend := b.x.pc.aborted.Load() || b.x.pc.broken()
	if b.x.ctx.Err() != context.Canceled && backend {
		return n, b.fail(err), nil, true
	}
	// The client's side failed, or the request was canceled (the client
	// went away) while the backend was sending: the body is neither read
	// nor broken, and Close closes the connection.
	return n, nil, err, true
}
