package h1client

import (
	"bufio"
	"errors"
	"io"
	"net/http"

	"github.com/sturdyproxy/sturdy/internal/wire/httphead"
)

// body is a response body: fixed-length, chunked or close-delimited,
// read from the connection's buffered reader. When it ends cleanly on a
// keep-alive response the connection goes back to the pool.
//
// Read and Close must not be called concurrently; to abort a blocked Read,
// cancel the request's context.
type body struct {
	br   *bufio.Reader
	resp *http.Response // for trailers
	kind uint8
	st   uint8 // chunked: what comes next
	n    int64 // fixed: bytes left; chunked: bytes left in the chunk

	excess int64 // chunked: overhead bytes, as net/http counts them
	err    error // sticky; io.EOF once the body ended cleanly

	x *exchange // the connection's side; nil when parsing alone (tests)
}

// Chunked body states.
const (
	stData    uint8 = iota // n bytes of chunk data
	stCRLF                 // the CRLF after chunk data
	stSize                 // a chunk-size line
	stTrailer              // the trailer section
	stDone
)

var errBodyClosed = errors.New("upstream: read on closed response body")

// buffered reports whether the whole body is in br already, so that
// reading it reads nothing from the connection.
func (b *body) buffered(br *bufio.Reader) bool {
	return b.kind == bodyNone || b.kind == bodyFixed && b.n <= int64(br.Buffered())
}

func (b *body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	switch b.kind {
	case bodyNone:
		return 0, b.end()
	case bodyFixed:
		if int64(len(p)) > b.n {
			p = p[:b.n]
		}
		n, err := b.br.Read(p)
		b.n -= int64(n)
		if b.n == 0 {
			return n, b.end()
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return n, b.fail(err)
		}
		return n, nil
	case bodyChunked:
		if b.st != stData {
			if err := b.advance(true); err != nil {
				return 0, b.fail(err)
			}
			if b.st == stDone {
				return 0, b.end()
			}
		}
		if int64(len(p)) > b.n {
			p = p[:b.n]
		}
		n, err := b.br.Read(p)
		b.n -= int64(n)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return n, b.fail(err)
		}
		if b.n == 0 {
			b.st = stCRLF
			// Finish without blocking when the rest is buffered already,
			// so that the caller sees EOF with the last bytes and the
			// connection is reused at once.
			if err := b.advance(false); err != nil {
				return n, b.fail(err)
			}
			if b.st == stDone {
				return n, b.end()
			}
		}
		return n, nil
	default: // bodyClose
		n, err := b.br.Read(p)
		if err == io.EOF {
			return n, b.end()
		}
		if err != nil {
			return n, b.fail(err)
		}
		return n, nil
	}
}

// advance moves a chunked body through chunk boundaries until chunk data
// or the end. Unless block is set it stops where it would have to wait for
// the network.
func (b *body) advance(block bool) error {
	br := b.br
	for {
		switch b.st {
		case stData:
			return nil
		case stDone:
			return nil
		case stCRLF:
			if !block && br.Buffered() < 2 {
				return nil
			}
			c1, err := br.ReadByte()
			if err == nil {
				var c2 byte
				if c2, err = br.ReadByte(); err == nil && (c1 != '\r' || c2 != '\n') {
					return bad("chunk data not followed by CRLF")
				}
			}
			if err != nil {
				return eofUnexpected(err)
			}
			b.st = stSize
		case stSize:
			if !block {
				buf, _ := br.Peek(br.Buffered())
				if indexByteBytes(buf, '\n') < 0 {
					return nil
				}
			}
			line, err := br.ReadSlice('\n')
			if err != nil {
				if err == bufio.ErrBufferFull {
					return bad("chunk-size line too long")
				}
				return eofUnexpected(err)
			}
			size, err := b.chunkSize(line)
			if err != nil {
				return err
			}
			if size == 0 {
				b.st = stTrailer
				continue
			}
			b.n, b.st = size, stData
		case stTrailer:
			if buf, _ := br.Peek(br.Buffered()); len(buf) >= 2 && buf[0] == '\r' && buf[1] == '\n' {
				br.Discard(2)
				b.st = stDone
				continue
			}
			if !block {
				return nil
			}
			t, err := readTrailers(br, br.Size())
			if err != nil {
				return err
			}
			if len(t) > 0 {
				if b.resp.Trailer == nil {
					b.resp.Trailer = t
				} else {
					for k, vv := range t {
						b.resp.Trailer[k] = vv
					}
				}
			}
			b.st = stDone
		}
	}
}

// chunkSize parses a chunk-size line: 1 to 15 hex digits, then either
// CRLF or ";" and an extension of visible characters, spaces and tabs.
// Overhead is bounded as net/http bounds it.
func (b *body) chunkSize(line []byte) (int64, error) {
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return 0, bad("chunk-size line not ended by CRLF")
	}
	l := line[:len(line)-2]
	if len(l) >= 4096 {
		return 0, bad("chunk-size line too long")
	}
	var n int64
	i := 0
	for ; i < len(l); i++ {
		c := l[i]
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			goto ext
		}
		if i == 15 {
			return 0, bad("chunk size too large")
		}
		n = n<<4 | int64(d)
	}
ext:
	if i == 0 {
		return 0, bad("missing chunk size")
	}
	if i < len(l) {
		if l[i] != ';' {
			return 0, bad("invalid byte in chunk size")
		}
		for _, c := range l[i+1:] {
			if !httphead.ValueByte(c) {
				return 0, bad("invalid byte in chunk extension")
			}
		}
	}
	b.excess += int64(len(l)) + 2
	b.excess -= 16 + 2*n
	b.excess = max(b.excess, 0)
	if b.excess > 16<<10 {
		return 0, bad("chunked encoding contains too much non-data")
	}
	return n, nil
}

// Close ends the body. Unless it was read to the end, the connection is
// closed, except when the rest of the body is in the buffer already.
func (b *body) Close() error {
	if b.err != nil {
		return nil
	}
	switch b.kind {
	case bodyFixed:
		if b.n <= int64(b.br.Buffered()) {
			b.br.Discard(int(b.n))
			b.n = 0
			b.end()
			b.err = errBodyClosed
			return nil
		}
	case bodyChunked:
		for b.st != stDone {
			if b.st == stData {
				if b.n > int64(b.br.Buffered()) {
					break
				}
				b.br.Discard(int(b.n))
				b.n, b.st = 0, stCRLF
			}
			before := b.st
			if err := b.advance(false); err != nil || b.st == before {
				break
			}
		}
		if b.st == stDone {
			b.end()
			b.err = errBodyClosed
			return nil
		}
	}
	b.err = errBodyClosed
	if b.x != nil {
		b.x.finish(false)
	}
	return nil
}

// end marks the body read to its end and hands the connection back.
func (b *body) end() error {
	b.err = io.EOF
	if b.x != nil {
		b.x.finish(true)
	}
	return io.EOF
}

// fail marks the body broken and closes the connection. It returns the
// error for Read.
func (b *body) fail(err error) error {
	if b.x != nil {
		err = b.x.bodyError(err)
	}
	b.err = err
	return err
}

func eofUnexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func indexByteBytes(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}
