package compress

import (
	"net/http"
	"strings"
)

// Encoding is a content coding sturdy produces or serves.
type Encoding uint8

// The codings, in no order of preference (a Policy has its own).
const (
	Identity Encoding = iota
	Gzip
	Zstd
	Brotli
	numEncodings
)

var encodingNames = [numEncodings]string{"", "gzip", "zstd", "br"}

// contentEncoding holds the Content-Encoding header values, shared
// read-only by every response (full slices, so an append copies).
var contentEncoding = [numEncodings][]string{nil, {"gzip"}, {"zstd"}, {"br"}}

// String is the coding's name in Content-Encoding and in the config; ""
// for Identity.
func (e Encoding) String() string {
	if e < numEncodings {
		return encodingNames[e]
	}
	return "invalid"
}

// Ext is the suffix of a precompressed sibling file: .gz, .zst or .br.
func (e Encoding) Ext() string {
	switch e {
	case Gzip:
		return ".gz"
	case Zstd:
		return ".zst"
	case Brotli:
		return ".br"
	}
	return ""
}

// ContentEncoding returns the header value slice for e, to be assigned to
// a header map without allocating. Callers must not modify it.
func (e Encoding) ContentEncoding() []string {
	if e < numEncodings {
		return contentEncoding[e][:1:1]
	}
	return nil
}

// ParseEncoding reads a coding name as written in the config (gzip, zstd, br).
func ParseEncoding(s string) (Encoding, bool) {
	for e := Gzip; e < numEncodings; e++ {
		if s == encodingNames[e] {
			return e, true
		}
	}
	return Identity, false
}

// Accept is a parsed Accept-Encoding request header: the q-value, in
// thousandths, the client gave each coding sturdy knows and "*"; -1 where
// it named none.
type Accept struct {
	q    [numEncodings]int16
	star int16
}

// ParseAccept parses the Accept-Encoding field lines (r.Header values)
// without allocating. A request without the field accepts no coding: RFC
// 9110 would allow any, but no server compresses for such clients, and
// neither do we. x-gzip counts as gzip (RFC 9110 section 8.4.1.3).
func ParseAccept(lines []string) Accept {
	a := Accept{q: [numEncodings]int16{-1, -1, -1, -1}, star: -1}
	for _, line := range lines {
		for line != "" {
			var item string
			item, line, _ = strings.Cut(line, ",")
			name, params, _ := strings.Cut(item, ";")
			name = strings.TrimSpace(name)
			q := parseQ(params)
			var slot *int16
			switch {
			case strings.EqualFold(name, "gzip"), strings.EqualFold(name, "x-gzip"):
				slot = &a.q[Gzip]
			case strings.EqualFold(name, "zstd"):
				slot = &a.q[Zstd]
			case strings.EqualFold(name, "br"):
				slot = &a.q[Brotli]
			case name == "*":
				slot = &a.star
			default:
				continue
			}
			// A coding named twice gets its best q-value.
			if q > *slot {
				*slot = q
			}
		}
	}
	return a
}

// parseQ reads the q parameter among a coding's parameters ("q=0.5"), in
// thousandths: 1000 when absent, 0 when malformed, so that a garbled value
// never turns compression on.
func parseQ(params string) int16 {
	for params != "" {
		var p string
		p, params, _ = strings.Cut(params, ";")
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		return qvalue(strings.TrimSpace(v))
	}
	return 1000
}

// qvalue parses RFC 9110's qvalue: "0" to "1" with up to three decimals.
func qvalue(s string) int16 {
	if s == "" || (s[0] != '0' && s[0] != '1') {
		return 0
	}
	whole := int16(s[0]-'0') * 1000
	s = s[1:]
	if s == "" {
		return whole
	}
	if s[0] != '.' || len(s) > 4 {
		return 0
	}
	frac, scale := int16(0), int16(100)
	for i := 1; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0
		}
		frac += int16(c-'0') * scale
		scale /= 10
	}
	if whole+frac > 1000 {
		return 0
	}
	return whole + frac
}

// Q returns the client's q-value for e in thousandths (0 to 1000): its
// own, else that of "*", else 0.
func (a Accept) Q(e Encoding) int {
	if e == Identity || e >= numEncodings {
		return 0
	}
	if a.q[e] >= 0 {
		return int(a.q[e])
	}
	if a.star >= 0 {
		return int(a.star)
	}
	return 0
}

// Best returns the offered coding with the client's highest q-value above
// zero, the earliest offer winning ties; Identity when it accepts none.
func (a Accept) Best(offers []Encoding) Encoding {
	best, bestQ := Identity, 0
	for _, e := range offers {
		if q := a.Q(e); q > bestQ {
			best, bestQ = e, q
		}
	}
	return best
}

// Ranked writes into dst the offered codings the client accepts, highest
// q-value first, ties in offer order, and returns how many.
func (a Accept) Ranked(offers []Encoding, dst *[numEncodings]Encoding) int {
	n := 0
	for _, e := range offers {
		q := a.Q(e)
		if q == 0 || n == len(dst) {
			continue
		}
		i := n
		for i > 0 && a.Q(dst[i-1]) < q {
			dst[i] = dst[i-1]
			i--
		}
		dst[i] = e
		n++
	}
	return n
}

// Negotiate returns the coding p would compress a response to r with, or
// Identity: when p is nil (compression off), for HEAD, and when the client
// accepts none of p's codings. The cache uses it to keep variants apart:
// requests that negotiate the same coding may share a stored compressed
// response, whatever their Accept-Encoding lines say.
func (p *Policy) Negotiate(r *http.Request) Encoding {
	if p == nil || r.Method == http.MethodHead {
		return Identity
	}
	return ParseAccept(r.Header["Accept-Encoding"]).Best(p.offers)
}
