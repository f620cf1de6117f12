package compress

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Writer compresses one response. Create it with Wrap, write the response
// through it, and Close it when the handler is done; it is not safe for
// concurrent use (no ResponseWriter is).
type Writer struct {
	rw     http.ResponseWriter
	p      *Policy
	enc    Encoding // what this client gets if the response qualifies; Identity if nothing
	head   bool
	state  state
	status int     // held while pending
	buf    *[]byte // pending body, from p.bufs
	e      encoder
	err    error // the first write error, returned by Close
	vary   bool  // Vary: Accept-Encoding was added here
}

type state uint8

const (
	untouched   state = iota // nothing written yet
	pending                  // compressible, length unknown: status held, body buffered
	identity                 // passing through
	compressing              // through e
	closed
)

var (
	varyAE    = []string{"Accept-Encoding"}
	errClosed = errors.New("compress: write after Close")
)

// Wrap returns a Writer for the response to r, or nil when p is nil (the
// route has compression off): then the caller uses w as it is and pays
// nothing. The caller must Close a non-nil Writer when the handler is done:
//
//	if cw := compress.Wrap(w, r, rt.Compress); cw != nil {
//		defer cw.Close()
//		w = cw
//	}
func Wrap(w http.ResponseWriter, r *http.Request, p *Policy) *Writer {
	if p == nil {
		return nil
	}
	return &Writer{rw: w, p: p, enc: p.Negotiate(r), head: r.Method == http.MethodHead}
}

// Encoding reports the coding the response is being sent in (Identity
// until the decision, and when it was not compressed).
func (w *Writer) Encoding() Encoding {
	if w.state == compressing {
		return w.enc
	}
	return Identity
}

// Header returns the response's header map.
func (w *Writer) Header() http.Header { return w.rw.Header() }

// Unwrap lets http.ResponseController reach the connection (deadlines,
// Hijack for upgrades).
func (w *Writer) Unwrap() http.ResponseWriter { return w.rw }

// WriteHeader decides, from the headers now complete, whether the body
// will be compressed. 1xx answers pass through.
func (w *Writer) WriteHeader(code int) {
	if w.state != untouched {
		return
	}
	if code < 200 {
		w.rw.WriteHeader(code)
		if code == http.StatusSwitchingProtocols {
			w.state = identity
		}
		return
	}
	h := w.rw.Header()
	if !w.p.qualifies(code, h) {
		w.pass(code)
		return
	}
	length := int64(-1)
	if cl := h["Content-Length"]; len(cl) == 1 {
		if n, err := strconv.ParseInt(cl[0], 10, 64); err == nil {
			length = n
		}
	}
	if length >= 0 && length < int64(w.p.minLength) {
		// Too small for any client: the answer does not vary.
		w.pass(code)
		return
	}
	// Some client would get this compressed: caches must keep variants apart.
	w.vary = addVary(h)
	switch {
	case w.enc == Identity || w.head:
		w.pass(code)
	case length >= 0 || w.p.minLength == 0 || len(h["Trailer"]) > 0:
		// A response with trailers is not held back: values the handler
		// sets after its body must reach the client as trailers, which
		// they only do once the header has gone.
		w.start(code)
	default:
		w.state, w.status = pending, code
	}
}

func (w *Writer) pass(code int) {
	w.state = identity
	w.rw.WriteHeader(code)
}

// start sends the headers of a compressed response and takes an encoder.
func (w *Writer) start(code int) {
	h := w.rw.Header()
	delete(h, "Content-Length")
	delete(h, "Accept-Ranges") // ranges of the compressed bytes are not offered
	h["Content-Encoding"] = w.enc.ContentEncoding()
	// The bytes differ from the identity response's: a strong validator
	// would claim byte equality (RFC 9110 8.8.1), so weaken it, as nginx does.
	if et := h["Etag"]; len(et) == 1 && strings.HasPrefix(et[0], `"`) {
		h["Etag"] = []string{"W/" + et[0]}
	}
	w.rw.WriteHeader(code)
	w.e = w.p.getEncoder(w.enc, w.rw)
	w.state = compressing
}

// Write writes body bytes, compressed or buffered as decided.
func (w *Writer) Write(b []byte) (int, error) {
	if w.state == untouched {
		w.WriteHeader(http.StatusOK)
	}
	switch w.state {
	case identity:
		return w.rw.Write(b)
	case compressing:
		n, err := w.e.Write(b)
		w.noteErr(err)
		return n, err
	case pending:
		held := 0
		if w.buf != nil {
			held = len(*w.buf)
		}
		if held+len(b) < w.p.minLength {
			if len(b) > 0 {
				buf := w.pendingBuf()
				*buf = append(*buf, b...)
			}
			return len(b), nil
		}
		// Long enough: compress what was held, then b.
		if err := w.startPending(); err != nil {
			return 0, err
		}
		n, err := w.e.Write(b)
		w.noteErr(err)
		return n, err
	}
	return 0, errClosed
}

func (w *Writer) pendingBuf() *[]byte {
	if w.buf == nil {
		w.buf = w.p.bufs.Get().(*[]byte)
	}
	return w.buf
}

// startPending begins compression of a response whose length was unknown
// and writes the buffered bytes into the encoder.
func (w *Writer) startPending() error {
	w.start(w.status)
	if w.buf == nil {
		return nil
	}
	_, err := w.e.Write(*w.buf)
	w.releaseBuf()
	w.noteErr(err)
	return err
}

func (w *Writer) releaseBuf() {
	if w.buf != nil {
		*w.buf = (*w.buf)[:0]
		w.p.bufs.Put(w.buf)
		w.buf = nil
	}
}

func (w *Writer) noteErr(err error) {
	if err != nil && w.err == nil {
		w.err = err
	}
}

// ReadFrom copies r into the response; while passing through it hands r to
// the underlying writer, so that files still go out with sendfile.
func (w *Writer) ReadFrom(r io.Reader) (int64, error) {
	if w.state == untouched {
		w.WriteHeader(http.StatusOK)
	}
	if w.state == identity {
		if rf, ok := w.rw.(io.ReaderFrom); ok {
			return rf.ReadFrom(r)
		}
	}
	return io.Copy(writerOnly{w}, r)
}

// writerOnly hides ReadFrom, so that io.Copy does not call it back.
type writerOnly struct{ io.Writer }

// FlushError sends what was written so far: a response still undecided is
// compressed from here on, since a handler that flushes is streaming and
// its later bytes count more than the first few (min_length does not hold
// it back); then the encoder is flushed, then the connection.
func (w *Writer) FlushError() error {
	if w.state == untouched {
		w.WriteHeader(http.StatusOK)
	}
	switch w.state {
	case pending:
		if err := w.startPending(); err != nil {
			return err
		}
		fallthrough
	case compressing:
		if err := w.e.Flush(); err != nil {
			w.noteErr(err)
			return err
		}
	case closed:
		return errClosed
	}
	switch f := w.rw.(type) {
	case interface{ FlushError() error }:
		return f.FlushError()
	case http.Flusher:
		f.Flush()
		return nil
	}
	return http.NewResponseController(w.rw).Flush()
}

// Flush is FlushError for callers of http.Flusher.
func (w *Writer) Flush() { _ = w.FlushError() }

// Close ends the response: a body shorter than MinLength goes out as it
// is, with its Content-Length, and a compressed one gets its final block.
// The encoder returns to the pool; the Writer must not be used again.
// Close returns the first error writing the response met.
func (w *Writer) Close() error {
	switch w.state {
	case pending:
		var body []byte
		if w.buf != nil {
			body = *w.buf
		}
		h := w.rw.Header()
		h["Content-Length"] = []string{strconv.Itoa(len(body))}
		if w.vary {
			removeVary(h)
		}
		w.rw.WriteHeader(w.status)
		_, err := w.rw.Write(body)
		w.noteErr(err)
		w.releaseBuf()
	case compressing:
		w.noteErr(w.e.Close())
		w.p.putEncoder(w.enc, w.e)
		w.e = nil
	}
	w.state = closed
	return w.err
}

// qualifies reports whether a response with this status and headers may
// be compressed for a client that accepts it.
func (p *Policy) qualifies(code int, h http.Header) bool {
	switch code {
	case http.StatusNoContent, http.StatusPartialContent, http.StatusNotModified:
		return false
	}
	if len(h["Content-Encoding"]) > 0 || len(h["Content-Range"]) > 0 {
		return false
	}
	ct := h["Content-Type"]
	if len(ct) == 0 || !p.compressible(ct[0]) {
		return false
	}
	return !hasToken(h["Cache-Control"], "no-transform")
}

// addVary adds Accept-Encoding to Vary unless it is there or Vary is "*",
// and reports whether it added it.
func addVary(h http.Header) bool {
	vv := h["Vary"]
	if len(vv) == 0 {
		h["Vary"] = varyAE[:1:1]
		return true
	}
	if hasToken(vv, "accept-encoding") || hasToken(vv, "*") {
		return false
	}
	h["Vary"] = append(vv[:len(vv):len(vv)], "Accept-Encoding")
	return true
}

// removeVary takes back what addVary added, for a body that turned out too
// short to compress for anyone.
func removeVary(h http.Header) {
	vv := h["Vary"]
	if len(vv) == 0 {
		return
	}
	if len(vv) == 1 {
		delete(h, "Vary")
		return
	}
	h["Vary"] = vv[:len(vv)-1]
}

// hasToken reports whether a comma-separated header holds token,
// case-insensitively.
func hasToken(lines []string, token string) bool {
	for _, line := range lines {
		for line != "" {
			var item string
			item, line, _ = strings.Cut(line, ",")
			if strings.EqualFold(strings.TrimSpace(item), token) {
				return true
			}
		}
	}
	return false
}
