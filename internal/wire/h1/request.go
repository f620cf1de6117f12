package h1

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/wire/httphead"
	"golang.org/x/net/http/httpguts"
)

// parse reads the request head h (request line and field lines, each
// ended by CRLF, and the empty line). It accepts only what it reads
// exactly as net/http's server would, and reports false for anything
// else: the request is then handed off to net/http, which reads (and
// answers, or refuses) it as it always has.
//
// Accepted: a token method other than CONNECT, an origin-form target of
// visible ASCII that url.ParseRequestURI takes, HTTP/1.1 or HTTP/1.0;
// field lines by httphead's rules; at most one Host (required in
// HTTP/1.1, valid per httpguts) and at most one Content-Length; no
// Transfer-Encoding, Expect or Upgrade field.
func (x *exchange) parse(h []byte) (http.Request, bool) {
	var req http.Request
	line := indexCRLF(h)
	if line < 0 {
		return req, false
	}
	rl := h[:line]
	sp1 := -1
	for i, c := range rl {
		if c == ' ' {
			sp1 = i
			break
		}
		if !httphead.TokenByte(c) {
			return req, false
		}
	}
	if sp1 <= 0 {
		return req, false
	}
	sp2 := -1
	for i := sp1 + 1; i < len(rl); i++ {
		c := rl[i]
		if c == ' ' {
			sp2 = i
			break
		}
		if c <= ' ' || c >= 0x7f {
			return req, false
		}
	}
	if sp2 < 0 || sp2 == sp1+1 || rl[sp1+1] != '/' {
		return req, false
	}
	var minor int
	switch string(rl[sp2+1:]) {
	case "HTTP/1.1":
		minor = 1
	case "HTTP/1.0":
	default:
		return req, false
	}
	if string(rl[:sp1]) == http.MethodConnect {
		return req, false
	}

	fields := x.c.fields[:0]
	nHost, nCL := 0, 0
	var host, cl httphead.Span
	closeTok, keepTok := false, false
	for pos := line + 2; ; {
		n := indexCRLF(h[pos:])
		if n < 0 {
			return req, false
		}
		if n == 0 {
			break
		}
		f, why := httphead.ParseField(h[pos:pos+n], pos)
		if why != "" {
			return req, false
		}
		switch f.Kind {
		case httphead.TransferEncoding, httphead.Expect, httphead.Upgrade, httphead.Trailer:
			return req, false
		case httphead.Host:
			nHost++
			host = f.Value
		case httphead.ContentLength:
			nCL++
			cl = f.Value
		case httphead.Connection:
			v := h[f.Value.A:f.Value.B]
			closeTok = closeTok || httphead.HasToken(v, "close")
			keepTok = keepTok || httphead.HasToken(v, "keep-alive")
		}
		fields = append(fields, f)
		pos += n + 2
	}
	x.c.fields = fields
	if nHost > 1 || nCL > 1 || (nHost == 0 && minor == 1) {
		return req, false
	}
	var length int64
	if nCL == 1 {
		var ok bool
		if length, ok = httphead.ContentLengthValue(h[cl.A:cl.B]); !ok {
			return req, false
		}
	}

	// One string holds the whole head: every name and value slices it.
	s := string(h)
	target := s[sp1+1 : sp2]
	u := &x.url
	if !plainTarget(target, u) {
		parsed, err := url.ParseRequestURI(target)
		if err != nil {
			return req, false
		}
		u = parsed
	}
	if nHost == 1 {
		req.Host = s[host.A:host.B]
		if !httpguts.ValidHostHeader(req.Host) {
			return req, false
		}
	}
	hdr := make(http.Header, len(fields))
	vals := x.vals[:]
	if len(fields) > len(vals) {
		vals = make([]string, len(fields))
	}
	for _, f := range fields {
		if f.Kind == httphead.Host {
			continue // net/http's server moves it to Request.Host
		}
		httphead.Put(hdr, &vals, httphead.CanonicalKey(s, h, f.Name), s[f.Value.A:f.Value.B])
	}
	// As net/http: a request's "Pragma: no-cache" without Cache-Control
	// reads as Cache-Control: no-cache too (RFC 7234 5.4).
	if p := hdr["Pragma"]; len(p) > 0 && p[0] == "no-cache" {
		if _, ok := hdr["Cache-Control"]; !ok {
			hdr["Cache-Control"] = []string{"no-cache"}
		}
	}

	req.Method = s[:sp1]
	req.URL = u
	req.RequestURI = target
	req.Proto, req.ProtoMajor, req.ProtoMinor = "HTTP/1.1", 1, minor
	if minor == 0 {
		req.Proto = "HTTP/1.0"
		req.Close = closeTok || !keepTok
	} else {
		req.Close = closeTok
	}
	req.Header = hdr
	req.ContentLength = length
	req.RemoteAddr = x.c.remote
	x.remaining = length
	if length == 0 {
		req.Body = http.NoBody
	} else {
		req.Body = &x.body
	}
	return req, true
}

func indexCRLF(b []byte) int {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\r' {
			if b[i+1] == '\n' {
				return i
			}
			return -1 - len(b) // a bare CR: refuse
		}
		if b[i] == '\n' {
			return -1 - len(b)
		}
	}
	return -1
}

// plainTarget fills u as url.ParseRequestURI would for an origin-form
// target made only of bytes that need no escaping and no unescaping (the
// usual request), so that its URL costs no allocation of its own (u
// lives in the exchange); for any other target it reports false and the
// caller parses it in full.
func plainTarget(target string, u *url.URL) bool {
	if len(target) < 1 || target[0] != '/' || strings.HasPrefix(target, "//") {
		return false
	}
	path, query, hasQuery := strings.Cut(target, "?")
	if hasQuery && query == "" {
		return false // ForceQuery
	}
	for i := 0; i < len(path); i++ {
		if !plainByte(path[i]) {
			return false
		}
	}
	for i := 0; i < len(query); i++ {
		if c := query[i]; !plainByte(c) && c != '%' && c != '?' {
			return false
		}
	}
	*u = url.URL{Path: path, RawQuery: query}
	return true
}

// plainByte reports whether c stands for itself in a URL path: the
// unreserved bytes and the reserved ones a path does not escape.
func plainByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '-', '_', '.', '~', '$', '&', '+', ',', '/', ':', ';', '=', '@':
		return true
	}
	return false
}
