// Package compress compresses responses on the fly (gzip and zstd from
// klauspost/compress, brotli from andybalholm/brotli) for routes that turn
// it on, and parses Accept-Encoding for that and for package static's
// precompressed files.
//
// A route's Policy is compiled once at load. Per response the proxy calls
// Wrap, which returns nil when the route has compression off, so that such
// a route pays nothing. The Writer decides when the status is written, from
// the response's headers (type, encoding, Cache-Control: no-transform,
// status, Content-Range) and its length (Content-Length, or the bytes
// buffered up to MinLength); it streams, and a Flush flushes the encoder.
// Encoders are pooled per policy, so a compressed response allocates
// little.
//
// Files: accept.go (codings, Accept-Encoding, negotiation), policy.go
// (Compile, types, encoder pools), writer.go (the ResponseWriter).
package compress

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// Window sizes. zstd's default is 8 MiB (RFC 9659's ceiling for HTTP)
// and brotli's 4 MiB; an encoder holds its window, and a pool holds one
// encoder per response in flight, so both are bounded to what a web
// response uses. docs/static.md has the memory per encoder.
const (
	zstdWindow  = 512 << 10
	brotliLgWin = 19 // 512 KiB
)

// Policy is a route's compiled compression settings. It is safe for
// concurrent use and must not be copied.
type Policy struct {
	offers    []Encoding // server preference
	exact     map[string]bool
	majors    map[string]bool // "text" for text/*
	suffixes  []suffix        // application/*+json
	minLength int
	level     [numEncodings]int

	encoders [numEncodings]sync.Pool // of encoder
	bufs     sync.Pool               // of *[]byte, cap minLength: bodies not yet decided
}

type suffix struct{ major, suffix string }

// encoder is what the three libraries' writers share.
type encoder interface {
	io.WriteCloser
	Flush() error
	Reset(io.Writer)
}

// Compile builds a route's policy from its validated config. It returns
// nil (compression off) for a nil or disabled config.
func Compile(c *config.Compress) (*Policy, error) {
	if c == nil || !c.Enabled {
		return nil, nil
	}
	p := &Policy{
		exact:     map[string]bool{},
		majors:    map[string]bool{},
		minLength: int(c.MinLength),
	}
	for _, name := range c.Encodings {
		e, ok := ParseEncoding(name)
		if !ok {
			return nil, fmt.Errorf("compress.encodings: unknown coding %q; expected zstd, br or gzip", name)
		}
		p.offers = append(p.offers, e)
	}
	for _, t := range c.Types {
		t = strings.ToLower(t)
		major, minor, _ := strings.Cut(t, "/")
		switch {
		case minor == "*":
			p.majors[major] = true
		case strings.HasPrefix(minor, "*+"):
			p.suffixes = append(p.suffixes, suffix{major, minor[1:]})
		default:
			p.exact[t] = true
		}
	}
	p.level[Gzip], p.level[Zstd], p.level[Brotli] = c.Level.Gzip, c.Level.Zstd, c.Level.Brotli
	// Build one encoder of each kind now, so that a level the library
	// refuses is a load error, not a failed response.
	for _, e := range p.offers {
		enc, err := p.newEncoder(e)
		if err != nil {
			return nil, fmt.Errorf("compress.level.%s: %v", e, err)
		}
		p.encoders[e].Put(enc)
	}
	if p.minLength > 0 {
		p.bufs.New = func() any { b := make([]byte, 0, p.minLength); return &b }
	}
	return p, nil
}

func (p *Policy) newEncoder(e Encoding) (encoder, error) {
	switch e {
	case Gzip:
		return gzip.NewWriterLevel(io.Discard, p.level[Gzip])
	case Zstd:
		return zstd.NewWriter(io.Discard,
			zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(p.level[Zstd])),
			// One goroutine-free encoder per response; the default
			// starts a goroutine per core for each encoder.
			zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(zstdWindow))
	case Brotli:
		return brotli.NewWriterOptions(io.Discard, brotli.WriterOptions{Quality: p.level[Brotli], LGWin: brotliLgWin}), nil
	}
	return nil, fmt.Errorf("no encoder for %v", e)
}

// getEncoder returns a pooled encoder writing to w.
func (p *Policy) getEncoder(e Encoding, w io.Writer) encoder {
	enc, _ := p.encoders[e].Get().(encoder)
	if enc == nil {
		var err error
		if enc, err = p.newEncoder(e); err != nil {
			return nil // Compile built one already: cannot happen
		}
	}
	enc.Reset(w)
	return enc
}

func (p *Policy) putEncoder(e Encoding, enc encoder) {
	enc.Reset(io.Discard) // drop the reference to the response
	p.encoders[e].Put(enc)
}

// compressible reports whether a Content-Type value names a type the
// policy compresses. text/event-stream never is: an event must reach the
// client when it is sent, not when an encoder's block fills.
func (p *Policy) compressible(ct string) bool {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.ToLower(strings.TrimSpace(ct)) // no allocation when already lower-case
	if ct == "text/event-stream" || ct == "" {
		return false
	}
	if p.exact[ct] {
		return true
	}
	major, minor, ok := strings.Cut(ct, "/")
	if !ok {
		return false
	}
	if p.majors[major] {
		return true
	}
	for _, s := range p.suffixes {
		if major == s.major && strings.HasSuffix(minor, s.suffix) {
			return true
		}
	}
	return false
}
