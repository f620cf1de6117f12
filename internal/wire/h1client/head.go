package h1client

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/textproto"

	"github.com/sturdyproxy/sturdy/internal/wire/httphead"
)

// head is the parsed head of one response. Its buffers belong to the
// connection and are reused from one response to the next; only the final
// response's header map and one string holding its bytes are allocated.
type head struct {
	buf    []byte  // status line and field lines, CRLFs removed
	fields []field // offsets into buf
	status int
	minor  int   // HTTP/1.minor
	text   span  // status code and reason ("200 OK"), in buf
	cl     int64 // Content-Length; -1 when absent
	nCL    int   // Content-Length fields seen (all equal)
	nTE    int   // Transfer-Encoding fields seen (all "chunked")
	close  bool  // Connection: close
	trail  bool  // a Trailer field is present
	// keepAlive is the Keep-Alive field's timeout in seconds: how long
	// the backend keeps the connection idle; -1 when it did not say.
	keepAlive int
}

type (
	span  = httphead.Span
	field = httphead.Field
)

// Field kinds that decide the framing.
const (
	kindContentLength    = httphead.ContentLength
	kindTransferEncoding = httphead.TransferEncoding
	kindConnection       = httphead.Connection
	kindTrailer          = httphead.Trailer
	kindKeepAlive        = httphead.KeepAlive
)

// parseField parses the field line l found at offset base of the head.
func parseField(l []byte, base int) (field, error) {
	f, why := httphead.ParseField(l, base)
	if why != "" {
		return field{}, bad(why)
	}
	return f, nil
}

// read reads one response head from br: the status line and the header
// fields up to the empty line. budget is what remains of maxHeaderBytes
// for this exchange. atStart reports that no byte of the exchange's
// response has been read: io.EOF then means the backend closed without
// answering at all.
//
// The rules, any breach of which is a *BadResponseError:
//   - every line ends in CRLF; CR, LF and NUL appear nowhere else;
//   - the status line is exactly "HTTP/1.0" or "HTTP/1.1", SP, three
//     digits 100-599, and optionally SP and a reason of visible
//     characters, spaces and tabs;
//   - a field line is a token, a colon, and a value of visible
//     characters, spaces, tabs and obs-text; no space before the colon,
//     no line starting with whitespace (obs-fold);
//   - the head is at most maxHeaderBytes, 1xx heads included;
//   - and the framing rules of frame.
func (h *head) read(br *bufio.Reader, budget *int, atStart bool) error {
	h.buf = h.buf[:0]
	h.fields = h.fields[:0]
	h.cl, h.nCL, h.nTE, h.close, h.trail, h.keepAlive = -1, 0, 0, false, false, -1
	for line := 0; ; line++ {
		start := len(h.buf)
		for {
			frag, err := br.ReadSlice('\n')
			*budget -= len(frag)
			if *budget < 0 {
				return bad("response head larger than 1 MiB")
			}
			h.buf = append(h.buf, frag...)
			if err == nil {
				break
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err == io.EOF {
				if atStart && len(h.buf) == 0 {
					return io.EOF
				}
				return io.ErrUnexpectedEOF
			}
			return err
		}
		n := len(h.buf)
		if n-start < 2 || h.buf[n-2] != '\r' {
			return bad("line not ended by CRLF")
		}
		h.buf = h.buf[:n-2]
		l := h.buf[start:]
		switch {
		case line == 0:
			if err := h.statusLine(l, start); err != nil {
				return err
			}
		case len(l) == 0:
			return h.frame()
		default:
			f, err := parseField(l, start)
			if err != nil {
				return err
			}
			h.fields = append(h.fields, f)
		}
	}
}

func (h *head) statusLine(l []byte, base int) error {
	if len(l) < 12 || string(l[:7]) != "HTTP/1." || (l[7] != '0' && l[7] != '1') || l[8] != ' ' {
		return bad("malformed status line")
	}
	status := 0
	for _, c := range l[9:12] {
		if c < '0' || c > '9' {
			return bad("malformed status code")
		}
		status = status*10 + int(c-'0')
	}
	if status < 100 || status > 599 {
		return bad("status code out of range")
	}
	if len(l) > 12 {
		if l[12] != ' ' {
			return bad("malformed status line")
		}
		for _, c := range l[13:] {
			if !httphead.ValueByte(c) {
				return bad("invalid byte in reason phrase")
			}
		}
	}
	h.status = status
	h.minor = int(l[7] - '0')
	h.text = span{A: int32(base + 9), B: int32(base + len(l))}
	return nil
}

// frame checks the fields that decide where the response ends:
//   - Content-Length is 1 to 18 digits; repeated, every value is the same;
//   - Transfer-Encoding appears at most once, is exactly "chunked" (any
//     case), only in HTTP/1.1, and never with Content-Length.
func (h *head) frame() error {
	var clv []byte
	for _, f := range h.fields {
		v := h.buf[f.Value.A:f.Value.B]
		switch f.Kind {
		case kindContentLength:
			if h.nCL == 0 {
				n, ok := httphead.ContentLengthValue(v)
				if !ok {
					return bad("invalid Content-Length")
				}
				h.cl, clv = n, v
			} else if !bytes.Equal(v, clv) {
				return bad("conflicting Content-Length fields")
			}
			h.nCL++
		case kindTransferEncoding:
			if !httphead.EqualFold(v, "chunked") {
				return bad("Transfer-Encoding other than chunked")
			}
			h.nTE++
		case kindConnection:
			if httphead.HasToken(v, "close") {
				h.close = true
			}
		case kindTrailer:
			h.trail = true
		case kindKeepAlive:
			h.keepAlive = httphead.KeepAliveTimeout(v)
		}
	}
	if h.nTE > 0 {
		switch {
		case h.minor == 0:
			return bad("Transfer-Encoding in an HTTP/1.0 response")
		case h.nTE > 1:
			return bad("more than one Transfer-Encoding field")
		case h.nCL > 0:
			return bad("both Content-Length and Transfer-Encoding")
		}
	}
	return nil
}

// Body framings.
const (
	bodyNone    uint8 = iota
	bodyFixed         // Content-Length
	bodyChunked       // Transfer-Encoding: chunked
	bodyClose         // until the backend closes
)

// chunkedTE is Response.TransferEncoding for chunked responses. Shared:
// callers must not modify it.
var chunkedTE = []string{"chunked"}

// response is a Response, its body and the exchange behind them in one
// allocation.
type response struct {
	http.Response
	body body
	x    exchange
	vals [inlineFields]string // the header's values when they fit
}

// inlineFields is how many header fields a response holds without a
// slice of its own: a typical backend's answer fits.
const inlineFields = 8

// readResponse reads the response to a request with the given method into
// r: 1xx heads are read and dropped, the final head becomes r.Response and
// r.body, which reads from br (the caller connects it to the exchange).
func readResponse(br *bufio.Reader, h *head, method string, r *response) error {
	budget := maxHeaderBytes
	for atStart := true; ; atStart = false {
		if err := h.read(br, &budget, atStart); err != nil {
			return err
		}
		if h.status >= 200 {
			break
		}
		if h.status == http.StatusSwitchingProtocols {
			return bad("101 Switching Protocols to a request that did not ask for it")
		}
	}
	resp := &r.Response
	resp.StatusCode = h.status
	resp.ProtoMajor, resp.ProtoMinor = 1, h.minor
	resp.Proto = "HTTP/1.1"
	if h.minor == 0 {
		resp.Proto = "HTTP/1.0"
	}
	chunked := h.nTE > 0
	kind := bodyClose
	switch {
	case method == http.MethodHead:
		kind = bodyNone
		resp.ContentLength = h.cl
	case h.status == http.StatusNoContent || h.status == http.StatusNotModified:
		kind = bodyNone
	case chunked:
		kind = bodyChunked
		resp.ContentLength = -1
	case h.cl == 0:
		kind = bodyNone
	case h.cl > 0:
		kind = bodyFixed
		resp.ContentLength = h.cl
	default:
		resp.ContentLength = -1
	}
	if chunked {
		resp.TransferEncoding = chunkedTE
	}
	resp.Close = h.minor == 0 || h.close || kind == bodyClose

	s := string(h.buf) // the one string every name and value slices
	resp.Status = s[h.text.A:h.text.B]
	hdr := make(http.Header, len(h.fields))
	vals := r.vals[:]
	if len(h.fields) > len(vals) {
		vals = make([]string, len(h.fields))
	}
	seenCL := false
	for _, f := range h.fields {
		switch f.Kind {
		case kindTransferEncoding:
			continue // as http.ReadResponse: moved to TransferEncoding
		case kindTrailer:
			if chunked {
				if err := announceTrailers(resp, s[f.Value.A:f.Value.B]); err != nil {
					return err
				}
				continue
			}
		case kindConnection:
			if h.close && h.minor == 1 {
				continue // as http.ReadResponse: Close says it
			}
		case kindContentLength:
			if seenCL {
				continue // duplicates were equal: keep one
			}
			seenCL = true
		}
		httphead.Put(hdr, &vals, httphead.CanonicalKey(s, h.buf, f.Name), s[f.Value.A:f.Value.B])
	}
	resp.Header = hdr
	r.body = body{br: br, resp: resp, kind: kind, n: h.cl}
	if kind == bodyChunked {
		r.body.n = 0
		r.body.st = stSize
	}
	return nil
}

// announceTrailers records the names a chunked response's Trailer field
// announces, as http.ReadResponse does: keys with nil values.
func announceTrailers(resp *http.Response, v string) error {
	for len(v) > 0 {
		var name string
		if i := indexByte(v, ','); i >= 0 {
			name, v = v[:i], v[i+1:]
		} else {
			name, v = v, ""
		}
		name = trimOWS(name)
		if name == "" {
			continue
		}
		for i := 0; i < len(name); i++ {
			if !httphead.TokenByte(name[i]) {
				return bad("invalid name in Trailer")
			}
		}
		key := textproto.CanonicalMIMEHeaderKey(name)
		switch key {
		case "Transfer-Encoding", "Trailer", "Content-Length":
			return bad("Trailer announces " + key)
		}
		if resp.Trailer == nil {
			resp.Trailer = make(http.Header)
		}
		resp.Trailer[key] = nil
	}
	return nil
}

// readTrailers reads the trailer section after the last chunk, at most
// limit bytes including the final CRLF, with the rules of field lines.
func readTrailers(br *bufio.Reader, limit int) (http.Header, error) {
	var t http.Header
	for {
		line, err := br.ReadSlice('\n')
		limit -= len(line)
		if limit < 0 || err == bufio.ErrBufferFull {
			return nil, bad("trailer section too large")
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if len(line) < 2 || line[len(line)-2] != '\r' {
			return nil, bad("trailer line not ended by CRLF")
		}
		l := line[:len(line)-2]
		if len(l) == 0 {
			return t, nil
		}
		f, err := parseField(l, 0)
		if err != nil {
			return nil, err
		}
		if f.Kind == kindContentLength || f.Kind == kindTransferEncoding || f.Kind == kindTrailer {
			return nil, bad("framing field in trailers")
		}
		s := string(l)
		key := httphead.CanonicalKey(s, l, f.Name)
		if t == nil {
			t = make(http.Header)
		}
		t[key] = append(t[key], s[f.Value.A:f.Value.B])
	}
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
