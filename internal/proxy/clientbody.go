package proxy

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sturdyproxy/sturdy/internal/edge"
	"github.com/sturdyproxy/sturdy/internal/wire/framing"
)

// clientBody is the client's request body on its way to a backend. It
// bounds the wait for each read (the route's client_body timeout, armed
// before every read so that only a stall ends the upload), asks the
// connection's framing tracker whether the chunking broke a rule net/http
// lets pass, and keeps the first error, so that an attempt that failed
// because of the body is the client's, not the host's.
//
// http.Transport closes the body it is given even on failure, so Close is
// a no-op; the server closes the real body when the handler returns.
type clientBody struct {
	rc   io.ReadCloser
	dl   deadliner // nil: no timeout
	idle idleDeadline
	fc   *framing.Conn // nil: not followed
	read atomic.Int64  // counted by the transport's goroutine, read by the handler's
	err  error         // the first error other than io.EOF, for the reading goroutine
	// broke is err, for the handler's goroutine: the upstream client may
	// still be reading the body in its own when the attempt fails.
	broke atomic.Pointer[error]
	ended bool
	// trailers, when the client announced some, go to the outbound
	// request once the body has ended (trailers.go).
	trailers *trailers
}

func (b *clientBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.dl != nil {
		if t := b.idle.due(); !t.IsZero() {
			b.dl.SetReadDeadline(t)
		}
	}
	n, err := b.rc.Read(p)
	b.read.Add(int64(n))
	if err != nil && err != io.EOF && b.dl != nil && b.idle.expired(time.Now()) {
		// The deadline fired, whatever net/http made of it: a stalled
		// trailer section comes back as "suspiciously long trailer".
		err = &stallError{err}
	}
	if b.fc != nil {
		if why := b.fc.BodyError(); why != "" {
			err = &malformedError{why}
		}
	}
	switch {
	case err == io.EOF:
		if b.trailers != nil {
			b.trailers.finish()
			b.trailers = nil
		}
		b.end()
	case err != nil:
		b.err = err
		failure := err // a copy of its own: taking err's address would move it to the heap on every read
		b.broke.Store(&failure)
		if b.dl != nil && clientBroke(err) {
			// Leave the connection's reads failing: net/http would
			// otherwise wait for the rest of the body, forever, to skip it
			// before closing.
			b.ended = true
			b.dl.SetReadDeadline(aLongTimeAgo)
		}
		b.end()
	}
	return n, err
}

// aLongTimeAgo is a deadline in the past: reads fail at once.
var aLongTimeAgo = time.Unix(1, 0)

// end clears the read deadline: net/http reads the connection in the
// background once the body is done, and a deadline left armed there would
// end the request when it fires.
func (b *clientBody) end() {
	if b.ended {
		return
	}
	b.ended = true
	if b.dl != nil && !b.idle.armed.IsZero() {
		b.dl.SetReadDeadline(time.Time{})
	}
}

func (b *clientBody) Close() error { return nil }

func (b *clientBody) started() bool { return b.read.Load() > 0 }

// failed reports whether reading the body failed.
func (b *clientBody) failed() bool { return b.broke.Load() != nil }

// failure is the error that reading the body failed with, or nil (also
// for no streamed body).
func (b *clientBody) failure() error {
	if b == nil {
		return nil
	}
	if p := b.broke.Load(); p != nil {
		return *p
	}
	return nil
}

// stallError is a body read that failed because the client sent nothing
// for the route's client_body timeout.
type stallError struct{ err error }

func (e *stallError) Error() string {
	return "the client stopped sending the request body: " + e.err.Error()
}
func (e *stallError) Unwrap() error   { return e.err }
func (e *stallError) Timeout() bool   { return true }
func (e *stallError) Temporary() bool { return true }

// malformedError is a chunked body the framing tracker found malformed.
type malformedError struct{ why string }

func (e *malformedError) Error() string { return "malformed request body: " + e.why }

// bodyFault names what went wrong with a request body, from its read
// error.
func bodyFault(err error) edge.Reason {
	var ne net.Error
	switch {
	case isBodyTooLarge(err):
		return edge.RejectTooLarge
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return edge.FaultBodyTimeout
	case errors.Is(err, io.ErrUnexpectedEOF):
		return edge.FaultShortBody
	}
	return edge.FaultMalformedBody
}

// clientBroke reports whether a body read error is the client's doing
// even though the request's context ended with it: net/http ends the
// context on any error reading the connection, a stall (the deadline) or
// a client that closed its side mid-body and a chunked body the framing
// tracker stopped reading (framing.ErrMalformedBody) included. Those
// clients may still read an answer.
func clientBroke(err error) bool {
	var ne net.Error
	var me *malformedError
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() ||
		errors.As(err, &me) || errors.Is(err, framing.ErrMalformedBody)
}

// readBody reads the whole body into memory when it is at most limit
// bytes. A longer body is returned as what was read so far, with more
// set: the rest streams. A read error is returned as it is.
func readBody(b *clientBody, size, limit int64) (buf []byte, more bool, err error) {
	if size > 0 {
		buf = make([]byte, size)
		if _, err := io.ReadFull(b, buf); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, false, err
		}
		// net/http reports the end with the last bytes; make sure the
		// deadline is cleared whatever the reader did.
		b.end()
		return buf, false, nil
	}
	buf = make([]byte, 0, min(limit+1, 4<<10))
	for {
		if int64(len(buf)) > limit {
			return buf, true, nil
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := b.Read(buf[len(buf):min(int64(cap(buf)), limit+1)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, false, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
}

// prefixBody is a body whose first bytes were read already.
type prefixBody struct {
	prefix []byte
	rest   io.Reader
}

func (p *prefixBody) Read(b []byte) (int, error) {
	if len(p.prefix) > 0 {
		n := copy(b, p.prefix)
		p.prefix = p.prefix[n:]
		return n, nil
	}
	return p.rest.Read(b)
}

func (p *prefixBody) Close() error { return nil }

// bufferable reports whether a body of unknown length may be read whole
// before a backend is chosen. A gRPC or other HTTP/2 stream may be a
// conversation (the client waits for an answer before sending more), so
// only HTTP/1.x chunked uploads are.
func bufferable(r *http.Request) bool {
	if r.ContentLength >= 0 {
		return true
	}
	if r.ProtoMajor != 1 {
		return false
	}
	ct := r.Header["Content-Type"]
	return len(ct) == 0 || !strings.HasPrefix(ct[0], "application/grpc")
}
