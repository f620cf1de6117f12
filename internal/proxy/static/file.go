package static

import (
	"io/fs"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/proxy/compress"
)

var varyAE = []string{"Accept-Encoding"}

// serveFile answers with f (the file name), or with a precompressed
// sibling the client prefers, through ServeContent: Range, If-Range,
// If-None-Match, If-Modified-Since, HEAD and 304 come from there.
func (h *Handler) serveFile(w http.ResponseWriter, r *http.Request, root *os.Root, name string, f *os.File, fi fs.FileInfo) {
	hdr := w.Header()
	enc := compress.Identity
	if len(h.precompressed) > 0 {
		var ranked [4]compress.Encoding
		accept := compress.ParseAccept(r.Header["Accept-Encoding"])
		n := accept.Ranked(h.precompressed, &ranked)
		for _, e := range ranked[:n] {
			if sf, sfi, err := openRegular(root, name+e.Ext()); err == nil {
				f.Close()
				f, fi, enc = sf, sfi, e
				break
			}
		}
		// Whether a sibling exists for a coding this client did not
		// accept is not known without looking, so every answer of a
		// route with precompressed files says it varies.
		addVary(hdr)
	}
	defer f.Close()
	hdr["Content-Type"] = contentType(name)
	hdr["Etag"] = []string{etag(fi, enc)}
	if enc != compress.Identity {
		hdr["Content-Encoding"] = enc.ContentEncoding()
		// ServeContent leaves Content-Length out when Content-Encoding is
		// set (it expects on-the-fly compression); these bytes are the
		// file's, so the length is known.
		hdr["Content-Length"] = []string{strconv.FormatInt(fi.Size(), 10)}
	}
	if h.cacheControl != nil {
		hdr["Cache-Control"] = h.cacheControl
	}
	if v := r.Header["Range"]; len(v) > 0 {
		if rng, changed := byteRanges(v[0], fi.Size()); changed {
			r = withRange(r, rng)
		}
	}
	http.ServeContent(w, r, "", fi.ModTime(), f)
}

// byteRanges is the Range value v as ServeContent should read it, and
// whether that differs from v. ServeContent answers a unit other than
// "bytes" with 416, where RFC 9110 section 14.2 (and nginx) ignore it: ""
// drops it. It takes the unit's name case-sensitively: it is written
// "bytes" here. And it serves a zero-length suffix ("-0") as a range
// that ends before it starts: such a range cannot be satisfied (section
// 14.1.1), so it is left out, and a set of nothing else becomes one
// that starts at the end, which ServeContent answers 416 with
// Content-Range "bytes */size" (or ignores for a failed If-Range).
func byteRanges(v string, size int64) (string, bool) {
	unit, set, ok := strings.Cut(v, "=")
	if !ok || !strings.EqualFold(strings.TrimSpace(unit), "bytes") {
		return "", true
	}
	zero := false
	for spec := range strings.SplitSeq(set, ",") {
		zero = zero || zeroSuffix(strings.TrimSpace(spec))
	}
	if !zero {
		if unit == "bytes" {
			return v, false // the common case: allocates nothing
		}
		return "bytes=" + set, true
	}
	var kept []string
	for spec := range strings.SplitSeq(set, ",") {
		if !zeroSuffix(strings.TrimSpace(spec)) {
			kept = append(kept, spec)
		}
	}
	if len(kept) == 0 {
		return "bytes=" + strconv.FormatInt(size, 10) + "-", true
	}
	return "bytes=" + strings.Join(kept, ","), true
}

// zeroSuffix reports a suffix range of no bytes: "-0", "-00", ...
func zeroSuffix(s string) bool {
	if len(s) < 2 || s[0] != '-' {
		return false
	}
	return strings.Trim(s[1:], "0") == ""
}

// withRange is r with Range set to v ("" removes it), on a copy of its
// header: the client's request is not changed.
func withRange(r *http.Request, v string) *http.Request {
	r2 := *r
	r2.Header = r.Header.Clone()
	if v == "" {
		delete(r2.Header, "Range")
	} else {
		r2.Header["Range"] = []string{v}
	}
	return &r2
}

// etag is a strong validator from the file's modification time (to the
// nanosecond, so that two deploys within a second differ) and size, as
// nginx makes it; a precompressed sibling's names its coding as well.
func etag(fi fs.FileInfo, enc compress.Encoding) string {
	b := make([]byte, 0, 40)
	b = append(b, '"')
	b = strconv.AppendInt(b, fi.ModTime().UnixNano(), 36)
	b = append(b, '-')
	b = strconv.AppendInt(b, fi.Size(), 36)
	if enc != compress.Identity {
		b = append(b, '-')
		b = append(b, enc.String()...)
	}
	b = append(b, '"')
	return string(b)
}

func addVary(h http.Header) {
	if len(h["Vary"]) == 0 {
		h["Vary"] = varyAE
		return
	}
	h["Vary"] = append(h["Vary"][:len(h["Vary"]):len(h["Vary"])], "Accept-Encoding")
}
