// Package framing follows, byte by byte, where each HTTP/1.x request on a
// client connection begins and ends, so that a request whose framing two
// parsers could read differently is refused before anyone acts on it.
//
// net/http's server reads a request with both Content-Length and
// Transfer-Encoding: chunked as chunked and drops Content-Length; the
// handler cannot tell, and the bytes a front proxy would have counted as
// the body become the next request on the connection (request smuggling,
// CL.TE). RFC 9112 section 6.1 says to refuse such a request or close the
// connection after it. A Conn wraps a plain-HTTP client connection and
// parses what net/http reads through it, passively: it never changes a
// byte, and it remembers the first request whose framing is ambiguous (both
// fields, Content-Length values that differ, a framing header folded over
// two lines, Transfer-Encoding other than chunked or on HTTP/1.0) and the
// first whose chunked body breaks a rule net/http lets pass. The handler
// asks, per request, with Check.
//
// A TLS connection cannot be wrapped this way: net/http decrypts it itself.
// See docs/edge.md for what sturdy does there.
package framing

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"

	"github.com/sturdyproxy/sturdy/internal/wire/httphead"
)

// Conn is a client connection whose request framing is followed. Read is
// called by one reader at a time (net/http's connection reader ensures
// it); Check by the connection's handlers, one request after the other.
type Conn struct {
	net.Conn
	p parser

	// Indices of requests on the connection (0 for the first), published
	// by the parser for the handler. -1 means none.
	bad   atomic.Int64 // first request whose head is ambiguous
	body  atomic.Int64 // first request whose chunked body is malformed
	blind atomic.Int64 // first request after which the parser stopped (an Upgrade)

	why     atomic.Pointer[string] // why bad or body was set
	served  int64                  // requests the handler has seen; handler only
	current int64                  // the request the handler serves now
}

// Wrap returns c with its request framing followed.
func Wrap(c net.Conn) *Conn {
	fc := &Conn{Conn: c}
	fc.bad.Store(-1)
	fc.body.Store(-1)
	fc.blind.Store(-1)
	fc.p.c, fc.p.req = fc, -1
	return fc
}

// ErrMalformedBody is what reads return once a chunked body was found
// malformed: nothing after the fault can be framed, and net/http would
// otherwise wait for bytes that may never come (a trailer section cut
// short by a bare LF, a chunk the client declared larger than it sends)
// before the handler hears of it.
var ErrMalformedBody = errors.New("malformed chunked request body; the connection's reads are over")

func (c *Conn) Read(b []byte) (int, error) {
	if c.body.Load() >= 0 {
		return 0, ErrMalformedBody
	}
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.p.feed(b[:n])
	}
	return n, err
}

// ReadFrom passes the connection's own ReadFrom on (splice and sendfile
// on Linux): net/http looks for it on the connection it serves, and the
// tracker follows only what is read.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(writerOnly{c.Conn}, r)
}

// writerOnly hides every method but Write, so io.Copy does not call
// ReadFrom again.
type writerOnly struct{ io.Writer }

var _ io.ReaderFrom = (*Conn)(nil)

// NetConn returns the wrapped connection.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// Verdict is what Check says about one request.
type Verdict uint8

const (
	// OK: the request's framing is unambiguous.
	OK Verdict = iota
	// Ambiguous: refuse the request and close the connection.
	Ambiguous
	// Unfollowed: the parser stopped following the connection (a request
	// before this one asked to upgrade it, and the upgrade did not
	// happen). Serve the request, then close the connection.
	Unfollowed
)

// Check is called once per request, in order, by the handler. It returns
// the verdict for the request and, for Ambiguous, why.
func (c *Conn) Check() (Verdict, string) {
	k := c.served
	c.served++
	c.current = k
	if b := c.bad.Load(); b >= 0 && b <= k {
		return Ambiguous, c.reason()
	}
	if b := c.blind.Load(); b >= 0 && b < k {
		return Unfollowed, ""
	}
	return OK, ""
}

// BodyError reports why the chunked body of the request being served is
// malformed, or "" when the parser found nothing wrong with it (yet). The
// handler asks once the body has been read.
func (c *Conn) BodyError() string {
	if b := c.body.Load(); b >= 0 && b <= c.current {
		return c.reason()
	}
	return ""
}

func (c *Conn) reason() string {
	if p := c.why.Load(); p != nil {
		return *p
	}
	return "ambiguous request framing"
}

type ctxKey struct{}

// ConnContext is for http.Server.ConnContext: it lets handlers find the
// Conn of their request with FromContext.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if fc, ok := c.(*Conn); ok {
		return context.WithValue(ctx, ctxKey{}, fc)
	}
	return ctx
}

// FromContext returns the Conn a request came on, or nil when its
// connection is not followed (TLS, HTTP/2, or a server without
// ConnContext).
func FromContext(ctx context.Context) *Conn {
	fc, _ := ctx.Value(ctxKey{}).(*Conn)
	return fc
}

// Parser states.
const (
	stRequestLine = iota // the request line of the next head
	stHeader             // a header field line, or the empty line
	stFixed              // n bytes of a Content-Length body
	stChunkSize          // a chunk-size line
	stChunkData          // n bytes of chunk data
	stChunkCR            // the CR after chunk data
	stChunkLF            // the LF after chunk data
	stTrailer            // a trailer field line, or the empty line
	stStopped            // not following any more (ambiguity or upgrade)
)

// h2Preface is the first line of an HTTP/2 connection preface.
var h2Preface = []byte("PRI * HTTP/2.0")

// maxLine is the most of a line the parser keeps; the fields it looks at
// fit well within, and a longer framing line is itself suspicious.
const maxLine = 256

// parser is the state of following one connection.
type parser struct {
	c     *Conn
	st    uint8
	req   int64 // index of the current request; -1 before the first
	n     int64 // bytes left in the fixed body or the chunk
	line  []byte
	long  bool // the current line is longer than maxLine
	last  byte // the last byte of the current line before its LF
	ready bool // line holds a complete line

	// The current head.
	http10    bool
	cl        int64 // -1: none seen
	clSeen    bool
	te        int // Transfer-Encoding fields seen
	chunked   bool
	upgrade   bool
	lastFrame bool // the previous field line was Content-Length or Transfer-Encoding
	nTrailer  int
}

func (p *parser) feed(b []byte) {
	for len(b) > 0 {
		switch p.st {
		case stStopped:
			return
		case stFixed, stChunkData:
			k := int64(len(b))
			if k > p.n {
				k = p.n
			}
			p.n -= k
			b = b[k:]
			if p.n == 0 {
				if p.st == stFixed {
					p.endRequest()
				} else {
					p.st = stChunkCR
				}
			}
		case stChunkCR:
			if b[0] != '\r' {
				p.bodyBad("chunk data longer than its chunk size, or no CRLF after it")
				return
			}
			b = b[1:]
			p.st = stChunkLF
		case stChunkLF:
			if b[0] != '\n' {
				p.bodyBad("chunk data longer than its chunk size, or no CRLF after it")
				return
			}
			b = b[1:]
			p.st = stChunkSize
		default:
			if len(p.line) == 0 {
				// The common case: the whole line is in b. Look at it
				// there instead of copying it.
				if i := bytes.IndexByte(b, '\n'); i >= 0 && i <= maxLine {
					p.last = 0
					if i > 0 {
						p.last = b[i-1]
					}
					p.onLine(b[:i])
					p.last = 0
					b = b[i+1:]
					continue
				}
			}
			b = p.take(b)
			if p.ready {
				p.ready = false
				p.onLine(p.line)
				p.line, p.long, p.last = p.line[:0], false, 0
			}
		}
	}
}

// take adds bytes of the current line from b and returns the rest; ready
// is set when the line is complete (its LF consumed, not kept).
func (p *parser) take(b []byte) []byte {
	i := bytes.IndexByte(b, '\n')
	part := b
	if i >= 0 {
		part = b[:i]
	}
	if len(part) > 0 {
		p.last = part[len(part)-1]
	}
	if len(p.line)+len(part) > maxLine {
		p.long = true
	}
	if room := maxLine - len(p.line); room > 0 {
		p.line = append(p.line, part[:min(room, len(part))]...)
	}
	if i < 0 {
		return nil
	}
	p.ready = true
	return b[i+1:]
}

// onLine handles one complete line (without its LF) in the current state.
func (p *parser) onLine(line []byte) {
	bareLF := p.last != '\r'
	if !bareLF && !p.long {
		line = line[:len(line)-1]
	}
	switch p.st {
	case stRequestLine:
		if p.req < 0 && bytes.Equal(line, h2Preface) {
			// HTTP/2 with prior knowledge (h2c): binary frames follow,
			// framed by HTTP/2 itself; nothing here to follow.
			p.st = stStopped
			return
		}
		p.req++
		p.http10 = bytes.HasSuffix(line, []byte(" HTTP/1.0"))
		p.cl, p.clSeen, p.te, p.chunked, p.upgrade, p.lastFrame = -1, false, 0, false, false, false
		p.st = stHeader
	case stHeader:
		if len(line) == 0 {
			p.endHead()
			return
		}
		p.field(line)
	case stChunkSize:
		p.chunkSize(line, bareLF)
	case stTrailer:
		if bareLF {
			p.bodyBad("a trailer line ends with a bare LF")
			return
		}
		if len(line) == 0 {
			p.endRequest()
			return
		}
		if p.nTrailer++; p.nTrailer > 100 {
			p.bodyBad("too many trailer fields")
			return
		}
		for _, c := range line {
			if c < 0x20 && c != '\t' || c == 0x7f {
				p.bodyBad("a control character in a trailer field")
				return
			}
		}
	}
}

// field looks at one header field line of the head.
func (p *parser) field(line []byte) {
	if line[0] == ' ' || line[0] == '\t' {
		// obs-fold: a continuation of the previous field's value.
		if p.lastFrame {
			p.ambiguous("a Content-Length or Transfer-Encoding field folded over two lines")
		}
		return
	}
	colon := bytes.IndexByte(line, ':')
	if colon < 0 {
		return // net/http refuses the head
	}
	p.lastFrame = false
	if colon != len("upgrade") && colon != len("content-length") && colon != len("transfer-encoding") &&
		(colon == 0 || line[colon-1] != ' ' && line[colon-1] != '\t') {
		return // not a field looked at here: most are not
	}
	name := bytes.TrimRight(line[:colon], " \t")
	value := bytes.Trim(line[colon+1:], " \t")
	switch {
	case asciiEqualFold(name, "content-length"):
		p.lastFrame = true
		if len(name) != colon {
			p.ambiguous("whitespace before the colon of Content-Length")
			return
		}
		n, ok := httphead.ContentLengthValue(value)
		if !ok || p.long {
			p.ambiguous("a Content-Length that is not a plain number")
			return
		}
		if p.clSeen && n != p.cl {
			p.ambiguous("two Content-Length fields that differ")
			return
		}
		p.cl, p.clSeen = n, true
	case asciiEqualFold(name, "transfer-encoding"):
		p.lastFrame = true
		if len(name) != colon {
			p.ambiguous("whitespace before the colon of Transfer-Encoding")
			return
		}
		p.te++
		if p.te > 1 || p.long || !asciiEqualFold(value, "chunked") {
			p.ambiguous("a Transfer-Encoding other than one chunked")
			return
		}
		p.chunked = true
	case asciiEqualFold(name, "upgrade"):
		p.upgrade = true
	}
}

// endHead decides how the body of the head just read is framed.
func (p *parser) endHead() {
	switch {
	case p.st == stStopped:
		return
	case p.te > 0 && p.clSeen:
		p.ambiguous("both Content-Length and Transfer-Encoding")
		return
	case p.te > 0 && p.http10:
		p.ambiguous("Transfer-Encoding in an HTTP/1.0 request")
		return
	case p.chunked:
		p.st, p.nTrailer = stChunkSize, 0
	case p.cl > 0:
		p.st, p.n = stFixed, p.cl
	default:
		p.endRequest()
	}
}

// chunkSize parses a chunk-size line: hex digits, then optionally
// extensions after ";" (whitespace allowed only before one), then CRLF.
func (p *parser) chunkSize(line []byte, bareLF bool) {
	if bareLF {
		p.bodyBad("a chunk-size line ends with a bare LF")
		return
	}
	if p.long {
		p.bodyBad("a chunk-size line too long")
		return
	}
	var size int64
	i := 0
	for ; i < len(line); i++ {
		d := httphead.Unhex(line[i])
		if d < 0 {
			break
		}
		if i >= 16 || size > (1<<62)>>4 {
			p.bodyBad("a chunk size too large")
			return
		}
		size = size<<4 | int64(d)
	}
	if i == 0 {
		p.bodyBad("a chunk size that is not a hex number")
		return
	}
	rest := line[i:]
	if t := bytes.TrimLeft(rest, " \t"); len(t) != len(rest) {
		// Whitespace after the size is allowed only before an extension.
		if len(t) == 0 || t[0] != ';' {
			p.bodyBad("a chunk size followed by something other than an extension")
			return
		}
		rest = t
	}
	if len(rest) > 0 && rest[0] != ';' {
		p.bodyBad("a chunk size that is not a hex number")
		return
	}
	for _, c := range rest {
		if c < 0x20 && c != '\t' || c == 0x7f {
			p.bodyBad("a control character in a chunk extension")
			return
		}
	}
	if size == 0 {
		p.st = stTrailer
		return
	}
	p.st, p.n = stChunkData, size
}

// endRequest moves on to the next head, or stops after an Upgrade: what
// follows may not be HTTP at all.
func (p *parser) endRequest() {
	if p.upgrade {
		p.c.blind.Store(p.req)
		p.st = stStopped
		return
	}
	p.st = stRequestLine
}

func (p *parser) ambiguous(why string) {
	p.c.why.Store(&why)
	p.c.bad.Store(p.req)
	p.st = stStopped
}

// bodyBad marks the current request's body malformed; the requests after
// it on the connection cannot be found any more, so they are refused too.
func (p *parser) bodyBad(why string) {
	p.c.why.Store(&why)
	p.c.body.Store(p.req)
	p.c.bad.Store(p.req + 1)
	p.st = stStopped
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}
