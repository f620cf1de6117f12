package h1client

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/sturdyproxy/sturdy/internal/wire/httphead"
)

// writeHead buffers the request line and header fields. Nothing is sent
// yet unless the head is larger than the write buffer. Names and values
// are checked: no field the proxy forwards can inject a line. It reports
// whether the request asks to close the connection.
func (pc *conn) writeHead(req *http.Request, mode uint8, cl int64) (wantsClose bool, err error) {
	bw := pc.bw
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	if !validToken(method) {
		return false, fmt.Errorf("upstream: invalid method %q", method)
	}
	bw.WriteString(method)
	bw.WriteByte(' ')
	if err := writeTarget(bw, req.URL); err != nil {
		return false, err
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if !validHost(host) {
		return false, fmt.Errorf("upstream: invalid Host %q", host)
	}
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\n")
	wantsClose = req.Close
	hasConnection := false
	for k, vv := range req.Header {
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding", "Trailer":
			continue // written from the request's fields
		case "User-Agent":
			if len(vv) == 1 && vv[0] == "" {
				continue // as net/http: an empty User-Agent means none
			}
		case "Connection":
			hasConnection = true
			for _, v := range vv {
				if httphead.HasToken([]byte(v), "close") {
					wantsClose = true
				}
			}
		}
		if !validToken(k) {
			return false, fmt.Errorf("upstream: invalid header field name %q", k)
		}
		for _, v := range vv {
			if !validValue(v) {
				return false, fmt.Errorf("upstream: invalid header field value for %q", k)
			}
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(v)
			bw.WriteString("\r\n")
		}
	}
	if req.Close && !hasConnection {
		bw.WriteString("Connection: close\r\n")
	}
	switch mode {
	case bodyFixed:
		bw.WriteString("Content-Length: ")
		bw.Write(strconv.AppendInt(bw.AvailableBuffer(), cl, 10))
		bw.WriteString("\r\n")
	case bodyChunked:
		bw.WriteString("Transfer-Encoding: chunked\r\n")
		if len(req.Trailer) > 0 {
			bw.WriteString("Trailer: ")
			sep := ""
			for k := range req.Trailer {
				if !validToken(k) {
					return false, fmt.Errorf("upstream: invalid trailer name %q", k)
				}
				bw.WriteString(sep)
				bw.WriteString(k)
				sep = ", "
			}
			bw.WriteString("\r\n")
		}
	default:
		switch method {
		case "POST", "PUT", "PATCH":
			bw.WriteString("Content-Length: 0\r\n") // as net/http
		}
	}
	_, err = bw.WriteString("\r\n")
	return wantsClose, err
}

// writeTarget writes the request target: the path as the client sent it
// (RawPath when it encodes Path, so that %2F and the like survive), and
// RawQuery as given. Nothing is re-encoded; bytes that could end the
// request line are refused.
func writeTarget(bw *bufio.Writer, u *url.URL) error {
	if u.Opaque != "" {
		t := u.RequestURI()
		if !validTarget(t) {
			return fmt.Errorf("upstream: invalid request target %q", t)
		}
		bw.WriteString(t)
		return nil
	}
	p := u.RawPath
	if p == "" || !rawPathEncodes(p, u.Path) {
		p = u.Path
		if needsEscape(p) {
			p = u.EscapedPath()
		}
	}
	if p == "" {
		p = "/"
	}
	if !validTarget(p) {
		return fmt.Errorf("upstream: invalid request path %q", p)
	}
	bw.WriteString(p)
	if u.RawQuery != "" || u.ForceQuery {
		if !validTarget(u.RawQuery) {
			return fmt.Errorf("upstream: invalid request query %q", u.RawQuery)
		}
		bw.WriteByte('?')
		bw.WriteString(u.RawQuery)
	}
	return nil
}

// rawPathEncodes reports whether raw is an encoding of path with no '?'
// (which would start the query): the RawPath a server parsed.
func rawPathEncodes(raw, path string) bool {
	j := 0
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch c {
		case '?':
			return false
		case '%':
			if i+2 >= len(raw) {
				return false
			}
			h, l := httphead.Unhex(raw[i+1]), httphead.Unhex(raw[i+2])
			if h < 0 || l < 0 {
				return false
			}
			c = byte(h<<4 | l)
			i += 2
		}
		if j >= len(path) || path[j] != c {
			return false
		}
		j++
	}
	return j == len(path)
}

// needsEscape reports whether path holds a byte that url.URL.EscapedPath
// would escape.
func needsEscape(path string) bool {
	for i := 0; i < len(path); i++ {
		c := path[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			continue
		}
		switch c {
		case '-', '_', '.', '~', '$', '&', '+', ',', '/', ':', ';', '=', '@':
			continue
		}
		return true
	}
	return false
}

// validTarget refuses what could end or split the request line: controls
// and spaces. obs-text passes as the client sent it.
func validTarget(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

func validHost(s string) bool { return s != "" && validTarget(s) }

func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !httphead.TokenByte(s[i]) {
			return false
		}
	}
	return true
}

func validValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// writeFixed copies n bytes of body into the write buffer, reading
// straight into its free space, flushing when it is full. srcErr is a
// failure to read the body, wireErr one to write to the backend.
func (pc *conn) writeFixed(body io.Reader, n int64) (srcErr, wireErr error) {
	bw := pc.bw
	empty := 0
	for n > 0 {
		if bw.Available() == 0 {
			if err := bw.Flush(); err != nil {
				return nil, err
			}
		}
		buf := bw.AvailableBuffer()[:bw.Available()]
		if int64(len(buf)) > n {
			buf = buf[:n]
		}
		m, err := body.Read(buf)
		if m > 0 {
			bw.Write(buf[:m])
			n -= int64(m)
			empty = 0
		} else if empty++; empty > 100 {
			return io.ErrNoProgress, nil
		}
		if err == io.EOF {
			if n > 0 {
				return fmt.Errorf("upstream: request body ended %d bytes before its ContentLength", n), nil
			}
			break
		}
		if err != nil {
			return err, nil
		}
	}
	return nil, nil
}

// chunkBufs are the buffers a chunked request body is read into.
var chunkBufs = sync.Pool{New: func() any { b := make([]byte, DefaultBufferSize-32); return &b }}

// writeChunked streams body in chunks, one flush per chunk so that a
// streaming client's data reaches the backend as it comes, then the last
// chunk and the trailers (read from trailer after the body ended).
func (pc *conn) writeChunked(body io.Reader, first []byte, trailer http.Header) (srcErr, wireErr error) {
	bw := pc.bw
	if err := bw.Flush(); err != nil { // the head, before waiting for the body
		return nil, err
	}
	chunk := func(p []byte) error {
		bw.Write(strconv.AppendInt(bw.AvailableBuffer(), int64(len(p)), 16))
		bw.WriteString("\r\n")
		bw.Write(p)
		bw.WriteString("\r\n")
		return bw.Flush()
	}
	if len(first) > 0 {
		if err := chunk(first); err != nil {
			return nil, err
		}
	}
	bp := chunkBufs.Get().(*[]byte)
	defer chunkBufs.Put(bp)
	buf := *bp
	empty := 0
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if werr := chunk(buf[:n]); werr != nil {
				return nil, werr
			}
			empty = 0
		} else if empty++; empty > 100 {
			return io.ErrNoProgress, nil
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err, nil
		}
	}
	bw.WriteString("0\r\n")
	for k, vv := range trailer {
		if !validToken(k) {
			return fmt.Errorf("upstream: invalid trailer name %q", k), nil
		}
		for _, v := range vv {
			if !validValue(v) {
				return fmt.Errorf("upstream: invalid trailer value for %q", k), nil
			}
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(v)
			bw.WriteString("\r\n")
		}
	}
	bw.WriteString("\r\n")
	return nil, bw.Flush()
}

// bodyWriter writes a large or streamed request body on a goroutine of
// its own while the caller waits for the response head.
type bodyWriter struct {
	pc      *conn
	body    io.ReadCloser
	cl      int64 // -1: chunked
	first   []byte
	trailer http.Header
	timeout time.Duration // ResponseHeaderTimeout, armed once the body is written

	done    chan struct{} // closed when srcErr and wireErr are set
	srcErr  error         // reading the request body failed
	wireErr error         // writing to the backend failed

	mu      sync.Mutex // guards gotHead
	gotHead bool
}

func (w *bodyWriter) run() {
	pc := w.pc
	var srcErr, wireErr error
	if w.cl < 0 {
		srcErr, wireErr = pc.writeChunked(w.body, w.first, w.trailer)
	} else {
		srcErr, wireErr = pc.writeFixed(w.body, w.cl)
		if srcErr == nil && wireErr == nil {
			wireErr = pc.bw.Flush()
		}
	}
	w.body.Close()
	// The buffer is this goroutine's until done is closed (pc.async keeps
	// closeNow off it), so it goes back from here.
	pc.releaseWriter()
	if srcErr == nil && wireErr == nil && w.timeout > 0 {
		w.mu.Lock()
		if !w.gotHead {
			pc.nc.SetReadDeadline(time.Now().Add(w.timeout))
		}
		w.mu.Unlock()
	}
	w.srcErr, w.wireErr = srcErr, wireErr
	close(w.done)
	if srcErr != nil {
		// The request cannot be completed: stop waiting for an answer to
		// it. A write error needs no such help, and the backend may still
		// have answered.
		pc.abort()
	}
}

// finished reports whether the writer has ended, waiting up to wait.
func (w *bodyWriter) finished(wait time.Duration) bool {
	select {
	case <-w.done:
		return true
	default:
	}
	if wait <= 0 {
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-w.done:
		return true
	case <-t.C:
		return false
	}
}

// headDone tells the writer the response head has been read (or failed),
// so that it no longer arms the response-header timeout, and clears it.
func (w *bodyWriter) headDone() {
	w.mu.Lock()
	w.gotHead = true
	w.mu.Unlock()
	if w.timeout > 0 {
		w.pc.nc.SetReadDeadline(time.Time{})
	}
}
