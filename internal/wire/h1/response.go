package h1

import (
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

// exchange is one request and its response: the http.ResponseWriter the
// handler gets, and the request body it reads. Its rules for the response
// head are net/http's (see chunkWriter.writeHeader there), so a handler
// answers alike on either front end.
type exchange struct {
	c         *conn
	req       *http.Request
	url       url.URL              // the request's URL when plainTarget could fill it
	vals      [inlineFields]string // the request header's values when they fit
	ctx       reqCtx               // the request's context
	body      body
	remaining int64 // request body bytes not read yet

	header        http.Header
	status        int
	wroteHeader   bool
	committed     bool // the head is in the write buffer
	chunking      bool
	contentLength int64 // declared by the handler; -1 when not
	written       int64
	closeAfter    bool
	broken        bool // a write failed or the handler panicked
	werr          error
	fullDuplex    bool
	pend          []byte      // written before the framing was known
	snap          http.Header // the header as WriteHeader saw it, until committed
	trailers      []string    // declared in the Trailer field
}

// inlineFields is how many request header fields an exchange holds
// without a slice of its own: most clients' requests fit.
const inlineFields = 16

// pendSize is how much body is held back before choosing between
// Content-Length and chunked, as net/http's bufferBeforeChunkingSize.
const pendSize = 2048

func (x *exchange) Header() http.Header {
	if x.header == nil {
		x.header = make(http.Header, 8)
	}
	return x.header
}

func (x *exchange) WriteHeader(code int) {
	if x.wroteHeader {
		x.c.srv.logf("h1: superfluous WriteHeader call (status %d after %d)", code, x.status)
		return
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		x.informational(code)
		return
	}
	x.wroteHeader = true
	x.status = code
	x.contentLength = -1
	if cl := x.header["Content-Length"]; len(cl) > 0 {
		if v, err := strconv.ParseInt(cl[0], 10, 64); err == nil && v >= 0 {
			x.contentLength = v
		} else {
			x.c.srv.logf("h1: invalid Content-Length of %q", cl[0])
			delete(x.header, "Content-Length")
		}
	}
	// The head is what the header was now, as on net/http: later changes
	// are the trailers'. A head whose framing and type are settled goes
	// into the write buffer at once; another is a copy until it can.
	if x.header == nil {
		return
	}
	_, haveType := x.header["Content-Type"]
	if x.contentLength >= 0 && (haveType || !x.bodyAllowed() || x.isHead()) || !x.bodyAllowed() {
		x.commit(false, nil)
		return
	}
	x.snap = x.header.Clone()
}

// informational writes a 1xx head at once, as net/http does.
func (x *exchange) informational(code int) {
	bw := x.writer()
	writeStatusLine(bw, x.req.ProtoMinor == 1, code)
	keys := make([]string, 0, len(x.header))
	for k := range x.header {
		if k != "Content-Length" && k != "Transfer-Encoding" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		writeField(bw, k, x.header[k])
	}
	bw.WriteString("\r\n")
	if err := bw.Flush(); err != nil {
		x.fail(err)
	}
}

func (x *exchange) writer() *writer {
	c := x.c
	if c.bw == nil {
		c.bw = writerPool.Get().(*writer)
		c.bw.Reset(c.nc)
		c.bw.dl = &c.wdl
	}
	return c.bw
}

func (x *exchange) fail(err error) {
	if x.werr == nil {
		x.werr = err
	}
	x.broken = true
	x.ctx.cancel() // as net/http: the client cannot be answered any more
}

func (x *exchange) isHead() bool { return x.req.Method == http.MethodHead }

func (x *exchange) bodyAllowed() bool {
	return x.status != http.StatusNoContent && x.status != http.StatusNotModified && (x.status < 100 || x.status > 199)
}

func (x *exchange) Write(p []byte) (int, error) {
	if !x.wroteHeader {
		x.WriteHeader(http.StatusOK)
	}
	if x.werr != nil {
		return 0, x.werr
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !x.bodyAllowed() {
		return 0, http.ErrBodyNotAllowed
	}
	x.written += int64(len(p))
	if x.contentLength != -1 && x.written > x.contentLength {
		return 0, http.ErrContentLength
	}
	n := len(p)
	if !x.committed {
		if x.contentLength == -1 {
			// Hold the first pendSize bytes: if the handler returns
			// before more come, they get a Content-Length; either way they
			// are what the type is sniffed from.
			if x.pend == nil {
				x.pend = make([]byte, 0, pendSize)
			}
			k := min(len(p), pendSize-len(x.pend))
			x.pend = append(x.pend, p[:k]...)
			p = p[k:]
			if len(p) == 0 {
				return n, nil
			}
		}
		x.commit(false, p)
		if x.werr != nil {
			return 0, x.werr
		}
	}
	if x.isHead() {
		return n, nil
	}
	if err := x.writeBody(p); err != nil {
		return 0, err
	}
	return n, nil
}

// writeBody writes p as the body's next bytes: one chunk when chunking.
func (x *exchange) writeBody(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	bw := x.c.bw
	if x.chunking {
		bw.Write(strconv.AppendInt(bw.AvailableBuffer(), int64(len(p)), 16))
		bw.WriteString("\r\n")
		bw.Write(p)
		_, err := bw.WriteString("\r\n")
		if err != nil {
			x.fail(err)
		}
		return x.werr
	}
	if _, err := bw.Write(p); err != nil {
		x.fail(err)
	}
	return x.werr
}

// commit writes the response head into the write buffer, choosing the
// framing and the fields net/http's server would add. final means the
// handler has returned, so everything it wrote is in pend; first is
// the body's first bytes when they are not in pend, for sniffing.
func (x *exchange) commit(final bool, first []byte) {
	x.committed = true
	h := x.header
	if x.snap != nil {
		h = x.snap
	}
	if h == nil {
		h = http.Header{}
		x.header = h
	}
	excl := exclusions{}
	hasTrailers := false
	// One pass over the keys: the trailers to come, and the fields.
	var arr [32]string
	keys := arr[:0]
	for k := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			hasTrailers = true
			continue
		}
		keys = append(keys, k)
	}
	for _, v := range h["Trailer"] {
		hasTrailers = true
		for _, name := range strings.Split(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				if name = http.CanonicalHeaderKey(name); httpguts.ValidTrailerHeader(name) {
					x.trailers = append(x.trailers, name)
				}
			}
		}
	}
	te := ""
	if v := h["Transfer-Encoding"]; len(v) > 0 {
		te = v[0]
	}
	hasTE := te != ""
	var autoLength int64 = -1
	if final && !hasTrailers && !hasTE && x.bodyAllowed() && len(h["Content-Length"]) == 0 && (!x.isHead() || len(x.pend) > 0) {
		autoLength = int64(len(x.pend))
		x.contentLength = autoLength
	}
	minor := x.req.ProtoMinor
	wants10KeepAlive := minor == 0 && !x.req.Close
	hasCL := x.contentLength != -1
	setConnection := ""
	if wants10KeepAlive && (x.isHead() || hasCL || !x.bodyAllowed()) {
		if _, ok := h["Connection"]; !ok {
			setConnection = "keep-alive"
		}
	} else if minor == 0 || x.req.Close {
		x.closeAfter = true
	}
	if headerIs(h, "Connection", "close") || x.c.srv.closing.Load() {
		x.closeAfter = true
	}
	if x.req.ContentLength != 0 && !x.closeAfter && !x.fullDuplex && x.discardBody() {
		// The body was too big to drop: close after this answer.
		x.closeAfter = true
		x.c.unread = true
		excl.add("Connection")
		setConnection = "close"
	}
	setType := ""
	if x.bodyAllowed() {
		_, haveType := h["Content-Type"]
		if len(x.pend) > 0 {
			first = x.pend
		}
		if len(h.Get("Content-Encoding")) == 0 && !haveType && !hasTE && len(first) > 0 {
			setType = http.DetectContentType(first)
		}
	} else {
		excl.add("Content-Length")
		excl.add("Transfer-Encoding")
		if x.status == http.StatusNotModified {
			excl.add("Content-Type")
		}
	}
	if hasCL && hasTE && te != "identity" {
		x.c.srv.logf("h1: WriteHeader called with both Transfer-Encoding of %q and a Content-Length of %d", te, x.contentLength)
		excl.add("Content-Length")
		hasCL = false
		x.contentLength = -1
	}
	setTE := false
	switch {
	case x.isHead() || !x.bodyAllowed():
		excl.add("Transfer-Encoding")
	case hasCL:
		excl.add("Transfer-Encoding")
	case minor == 1:
		if hasTE && te == "identity" {
			x.closeAfter = true
			excl.add("Transfer-Encoding")
		} else {
			x.chunking = true
			setTE = true
			excl.add("Transfer-Encoding")
		}
	default:
		x.closeAfter = true
		excl.add("Transfer-Encoding")
	}
	if x.chunking {
		excl.add("Content-Length")
	}
	if x.closeAfter && !httpguts.HeaderValuesContainsToken(h["Connection"], "close") {
		excl.add("Connection")
		if minor == 1 {
			setConnection = "close"
		}
	}

	bw := x.writer()
	writeStatusLine(bw, minor == 1, x.status)
	slices.Sort(keys)
	for _, k := range keys {
		if !excl.has(k) {
			writeField(bw, k, h[k])
		}
	}
	if _, ok := h["Date"]; !ok {
		bw.Write(x.c.srv.dateField(time.Now()))
	}
	if autoLength >= 0 {
		bw.WriteString("Content-Length: ")
		bw.Write(strconv.AppendInt(bw.AvailableBuffer(), autoLength, 10))
		bw.WriteString("\r\n")
	}
	if setType != "" {
		writeOne(bw, "Content-Type", setType)
	}
	if setConnection != "" {
		writeOne(bw, "Connection", setConnection)
	}
	if setTE {
		bw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if _, err := bw.WriteString("\r\n"); err != nil {
		x.fail(err)
	}
	if len(x.pend) > 0 {
		pend := x.pend
		x.pend = nil
		if !x.isHead() {
			x.writeBody(pend)
		}
	}
}

// discardBody drops what the handler left of the request body before
// the response goes out, as net/http does: a client that sends its whole
// request before reading could otherwise deadlock. A body too large to
// drop closes the connection after the answer.
func (x *exchange) discardBody() (tooBig bool) {
	b := &x.body
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil || x.remaining == 0 {
		return false
	}
	if x.remaining >= maxDrain {
		return true
	}
	b.drainLocked()
	return false
}

func (x *exchange) Flush() { x.FlushError() }

// FlushError is what http.ResponseController.Flush calls.
func (x *exchange) FlushError() error {
	if !x.wroteHeader {
		x.WriteHeader(http.StatusOK)
	}
	if x.werr != nil {
		return x.werr
	}
	if !x.committed {
		x.commit(false, nil)
	}
	if err := x.c.bw.Flush(); err != nil {
		x.fail(err)
	}
	return x.werr
}

// ReadFrom lets a body of declared length be spliced from a backend's
// connection to the client's (see internal/proxy's splicer).
func (x *exchange) ReadFrom(src io.Reader) (int64, error) {
	if !x.wroteHeader {
		x.WriteHeader(http.StatusOK)
	}
	_, haveType := x.header["Content-Type"]
	if x.committed && x.chunking || x.contentLength == -1 || x.c.tcp == nil || !x.bodyAllowed() || x.isHead() ||
		!x.committed && !haveType {
		return copyBuffered(writerOnly{x}, src)
	}
	if x.werr != nil {
		return 0, x.werr
	}
	if !x.committed {
		x.commit(false, nil)
	}
	if err := x.c.bw.Flush(); err != nil {
		x.fail(err)
		return 0, err
	}
	x.c.wdl.apply() // a splice waits for the client in the kernel's own way
	n, err := x.c.tcp.ReadFrom(src)
	x.written += n
	if err != nil {
		// One splice moves the bytes from src to the client, and its
		// error does not say which side failed: src's reader tells (see
		// internal/wire/h1client's SpliceTo). So the request is not canceled
		// here, as it is when a write to the client fails (net/http's
		// ReadFrom does not cancel either); the connection is not reused.
		if x.werr == nil {
			x.werr = err
		}
		x.broken = true
	}
	return n, err
}

func (x *exchange) SetReadDeadline(t time.Time) error  { return x.c.setRead(t) }
func (x *exchange) SetWriteDeadline(t time.Time) error { return x.c.wdl.set(t) }

// EnableFullDuplex lets the handler read the request body while it
// writes the response.
func (x *exchange) EnableFullDuplex() error {
	x.fullDuplex = true
	return nil
}

// finish completes the response after the handler returned.
func (x *exchange) finish() {
	if x.broken {
		return
	}
	if !x.wroteHeader {
		x.WriteHeader(http.StatusOK)
	}
	if !x.committed {
		x.commit(true, nil)
	}
	bw := x.c.bw
	if x.chunking && !x.broken {
		bw.WriteString("0\r\n")
		for _, k := range x.trailers {
			if vv := x.header[k]; len(vv) > 0 {
				writeField(bw, k, vv)
			}
		}
		for k, vv := range x.header {
			if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok && httpguts.ValidTrailerHeader(http.CanonicalHeaderKey(name)) {
				writeField(bw, name, vv)
			}
		}
		bw.WriteString("\r\n")
	}
	if err := bw.Flush(); err != nil {
		x.fail(err)
	}
	if !x.isHead() && x.contentLength != -1 && x.bodyAllowed() && x.contentLength != x.written {
		x.closeAfter = true // short: the client would wait for the rest
	}
}

// finishConn ends the exchange and reports whether the connection may
// carry another request.
func (x *exchange) finishConn() bool {
	x.finish()
	drained := x.body.end()
	if !drained {
		x.c.unread = true
	}
	return !x.broken && !x.closeAfter && !x.req.Close && drained && !x.c.srv.closing.Load()
}

func writeStatusLine(bw *writer, is11 bool, code int) {
	if is11 {
		bw.WriteString("HTTP/1.1 ")
	} else {
		bw.WriteString("HTTP/1.0 ")
	}
	bw.Write(strconv.AppendInt(bw.AvailableBuffer(), int64(code), 10))
	if text := http.StatusText(code); text != "" {
		bw.WriteByte(' ')
		bw.WriteString(text)
	} else {
		bw.WriteString(" status code ")
		bw.Write(strconv.AppendInt(bw.AvailableBuffer(), int64(code), 10))
	}
	bw.WriteString("\r\n")
}

// writeField writes one field line per value, as net/http's
// Header.Write: invalid names are skipped, line breaks in values become
// spaces, values are trimmed.
func writeField(bw *writer, k string, vv []string) {
	if !httpguts.ValidHeaderFieldName(k) {
		return
	}
	for _, v := range vv {
		writeOne(bw, k, v)
	}
}

func writeOne(bw *writer, k, v string) {
	bw.WriteString(k)
	bw.WriteString(": ")
	v = textproto.TrimString(v)
	if strings.ContainsAny(v, "\r\n") {
		for i := 0; i < len(v); i++ {
			if c := v[i]; c == '\r' || c == '\n' {
				bw.WriteByte(' ')
			} else {
				bw.WriteByte(c)
			}
		}
	} else {
		bw.WriteString(v)
	}
	bw.WriteString("\r\n")
}

func headerIs(h http.Header, k, v string) bool {
	vv := h[k]
	return len(vv) > 0 && vv[0] == v
}

// exclusions is the small set of keys a head leaves out.
type exclusions struct {
	n    int
	keys [8]string
	more []string
}

func (e *exclusions) add(k string) {
	if e.n < len(e.keys) {
		e.keys[e.n] = k
		e.n++
		return
	}
	e.more = append(e.more, k)
}

func (e *exclusions) has(k string) bool {
	for _, x := range e.keys[:e.n] {
		if x == k {
			return true
		}
	}
	return slices.Contains(e.more, k)
}

// writerOnly hides ReadFrom, so that copying does not call it again.
type writerOnly struct{ io.Writer }

var copyPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func copyBuffered(w io.Writer, src io.Reader) (int64, error) {
	b := copyPool.Get().(*[]byte)
	defer copyPool.Put(b)
	return io.CopyBuffer(w, src, *b)
}
