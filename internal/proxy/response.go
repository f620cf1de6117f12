package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sturdyproxy/sturdy/internal/edge"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// bufPool holds copy buffers. 32 KiB keeps syscalls per 64 KiB body low
// (see docs/performance.md) without much memory per connection.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// respond streams resp, which host sent, to the client, releases host when
// done, and returns the status the client got.
func (f *forwarder) respond(host *health.Host, resp *http.Response) int {
	defer host.Release()
	// The bytes the host sent (cached routes count theirs as the cache
	// reads them: releasingBody.Read); deferred, so that a body that
	// breaks halfway is counted too.
	defer func() { host.Received(f.bytes) }()
	return f.stream(resp, f.pool, host)
}

// stream is the one way a response reaches the client, whether a backend
// or the cache produced it: hop-by-hop fields dropped, Via added, trailers
// announced and sent after the body, Content-Type never sniffed, streams
// (unknown length, text/event-stream) flushed as they come, the body bytes
// counted. host, when not nil, sent resp from pool: a body that breaks after
// the header is charged to it. stream closes resp.Body and returns the
// status the client got.
func (f *forwarder) stream(resp *http.Response, pool *health.Pool, host *health.Host) int {
	defer resp.Body.Close()
	w := f.w
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return f.upgrade(resp)
	}
	h := w.Header()
	copyResponseHeader(h, resp.Header)
	if prior := h["Via"]; len(prior) > 0 {
		h["Via"] = append(prior[:len(prior):len(prior)], via[0])
	} else {
		h["Via"] = via
	}
	announced := len(resp.Trailer)
	if announced > 0 {
		names := make([]string, 0, announced)
		for k := range resp.Trailer {
			names = append(names, k)
		}
		h["Trailer"] = []string{strings.Join(names, ", ")}
		// HTTP/1.1 carries trailers only in a chunked body, and an HTTP/2
		// backend (Go's, grpc-go) sends a length with its trailers.
		delete(h, "Content-Length")
	}
	w.WriteHeader(resp.StatusCode)
	if f.grpc != nil && f.grpc.late {
		http.NewResponseController(w).Flush() // a streaming call's headers, before its first message
	}
	if f.r.Method == http.MethodHead {
		return resp.StatusCode
	}
	flush := resp.ContentLength == -1 || isEventStream(resp.Header)
	// The sink escapes (a splice hands it on as an io.Writer) but lives
	// only for the copy: pooled, it costs no allocation per response.
	sink := sinkPool.Get().(*clientSink)
	sink.w = w
	if t := f.rt.SendTimeout; t > 0 && f.dl != nil {
		sink.dl, sink.idle.timeout, sink.conn = f.dl, t, f.conn
	}
	n, err := copyBody(sink, resp.Body, flush)
	*sink = clientSink{}
	sinkPool.Put(sink)
	f.bytes = n
	if err != nil {
		if err == errUpstreamBody {
			// A late failure: counted against nobody, but counted. A
			// request body that broke meanwhile is the client's.
			class, status := outcome.BodyError, http.StatusBadGateway
			switch {
			case f.body != nil && f.body.failed():
				class = outcome.ClientBodyError
			case f.r.Context().Err() != nil || f.callerGone():
				// The client left while the body was being read: its
				// front end canceled the request (it saw the client go,
				// or a write to it failed), and the cancel ended the
				// read from the backend. Or a gRPC caller's deadline
				// passed: sturdy's timer for it ended the read, maybe
				// before the caller's own cancel came. Either is the
				// caller's giving up, as before the response head.
				class, status = outcome.ClientCancel, 499
			}
			if host != nil {
				pool.Record(host, class, nil, f.now)
			}
			f.status = status
			// Headers are gone already; abort so the client sees a broken
			// response, not a short one that looks complete.
			panic(http.ErrAbortHandler)
		}
		if isTimeout(err) {
			// The client stopped reading: cut, and the backend's
			// connection released at once (resp.Body.Close, above).
			// Abort, so that net/http closes the connection: a spliced
			// write's error never reaches it, and it would keep the
			// connection for another request.
			f.countFault(edge.FaultSendTimeout)
			f.status = 499
			panic(http.ErrAbortHandler)
		}
		return 499 // the client went away
	}
	if len(resp.Trailer) > 0 {
		for k, vv := range resp.Trailer {
			if len(resp.Trailer) != announced {
				k = http.TrailerPrefix + k
			}
			h[k] = vv
		}
	}
	if f.grpc != nil && f.grpc.late && host != nil {
		f.grpcSettle(pool, host, resp.Trailer)
	}
	return resp.StatusCode
}

func isEventStream(h http.Header) bool {
	ct := h["Content-Type"]
	return len(ct) > 0 && strings.HasPrefix(ct[0], "text/event-stream")
}

// splicer is a backend's body that can move itself to the client without
// copying through sturdy (internal/wire/h1client's bodies, on Linux, from TCP
// to TCP). It reports a failure of each side apart.
type splicer interface {
	SpliceTo(w io.Writer, min int64) (n int64, readErr, writeErr error, ok bool)
}

// spliceMin is the body still in the backend's socket below which a copy
// through the buffer costs less than splice's pipe and system calls.
const spliceMin = 16 << 10

var errUpstreamBody = fmt.Errorf("upstream body read failed")

// clientSink is the client's side of a streamed response: each write is
// bounded by the route's send timeout, armed before it, so that a client
// that stops reading is cut while one that reads slowly is not.
type clientSink struct {
	w    http.ResponseWriter
	dl   deadliner // nil: no timeout
	idle idleDeadline
	conn *Conn // told that a deadline is armed; nil on HTTP/2
	cut  bool  // a write ran into the deadline
}

var sinkPool = sync.Pool{New: func() any { return new(clientSink) }}

func (s *clientSink) Write(p []byte) (int, error) {
	s.arm()
	return s.w.Write(p)
}

func (s *clientSink) arm() {
	if s.dl != nil {
		if t := s.idle.due(); !t.IsZero() {
			s.dl.SetWriteDeadline(t)
			if s.conn != nil {
				s.conn.writeArmed = true
			}
		}
	}
}

// Pieces of a spliced body, between which the send timeout is armed
// again: a splice is one call however long it takes, so a body spliced
// whole would be bounded by the send timeout as a whole. A piece starts
// at splicePiece, halves when it took more than an eighth of the timeout
// and doubles when it took less than a 64th, within the bounds: a reader
// that keeps taking splicePiece per timeout is never cut, and a fast one
// moves a megabyte per call.
const (
	splicePiece    = 64 << 10
	spliceMinPiece = 16 << 10
	spliceMaxPiece = 1 << 20
)

// ReadFrom lets a backend's body be spliced to the client connection
// (see splicer), in pieces when a send timeout is set.
func (s *clientSink) ReadFrom(r io.Reader) (int64, error) {
	rf, ok := s.w.(io.ReaderFrom)
	if !ok {
		return io.Copy(writerOnly{s}, r)
	}
	if s.dl == nil {
		return rf.ReadFrom(r)
	}
	// Limit the underlying reader itself: the splice recognises an
	// *io.LimitedReader over a TCP connection, not one over another.
	src, left := r, int64(-1)
	if lr, ok := r.(*io.LimitedReader); ok {
		src, left = lr.R, lr.N
	}
	piece := int64(splicePiece)
	var total int64
	for left != 0 {
		n := piece
		if left > 0 && left < n {
			n = left
		}
		s.arm()
		start := time.Now()
		m, err := rf.ReadFrom(&io.LimitedReader{R: src, N: n})
		total += m
		if left > 0 {
			left -= m
		}
		if err != nil || m < n {
			if lr, ok := r.(*io.LimitedReader); ok {
				lr.N = left
			}
			if err != nil && isTimeout(err) {
				s.cut = true
			}
			return total, err // an error, or the end of r
		}
		switch d := time.Since(start); {
		case d > s.idle.timeout>>3 && piece > spliceMinPiece:
			piece >>= 1
		case d < s.idle.timeout>>6 && piece < spliceMaxPiece:
			piece <<= 1
		}
	}
	if lr, ok := r.(*io.LimitedReader); ok {
		lr.N = 0
	}
	return total, nil
}

// copyBody copies the upstream body to the client and returns the bytes
// written. It reports errUpstreamBody when reading from upstream failed and
// the client's write error when writing failed.
func copyBody(w *clientSink, src io.Reader, flush bool) (int64, error) {
	if s, ok := src.(splicer); ok && !flush {
		if n, rerr, werr, ok := s.SpliceTo(w, spliceMin); ok {
			if rerr != nil {
				return n, errUpstreamBody
			}
			return n, werr
		}
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	var rc *http.ResponseController
	if flush {
		rc = http.NewResponseController(w.w)
	}
	var total int64
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			m, werr := w.Write(buf[:n])
			total += int64(m)
			if werr != nil {
				return total, werr
			}
			if flush {
				if err := rc.Flush(); err != nil {
					return total, err
				}
			}
		}
		if rerr == io.EOF {
			return total, nil
		}
		if rerr != nil {
			return total, errUpstreamBody
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// statusWriter remembers the status and the body bytes written by an
// answer that is not streamed from a response (the route's files), for the
// route's counters and the access log.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	send   clientSink // the send timeout, when send.dl is set
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.send.arm()
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	if err != nil && isTimeout(err) {
		w.send.cut = true
	}
	return n, err
}

// Unwrap lets http.ResponseController reach the real writer (Flush, ...).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ReadFrom keeps the client connection's ReadFrom reachable, so that a
// file is sent with sendfile(2) rather than copied through sturdy.
func (w *statusWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	var n int64
	var err error
	if w.send.dl != nil {
		n, err = w.send.ReadFrom(r)
	} else if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(r)
	} else {
		n, err = io.Copy(writerOnly{w.ResponseWriter}, r)
	}
	w.bytes += n
	return n, err
}

// writerOnly hides every method but Write, so io.Copy does not call
// ReadFrom again.
type writerOnly struct{ io.Writer }

// Flush passes flushes on for streamed answers.
func (w *statusWriter) Flush() {
	if fl, ok := w.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}
