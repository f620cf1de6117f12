package static

import (
	"io/fs"
	"net/http"
	"os"
	"strconv"

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
	http.ServeContent(w, r, "", fi.ModTime(), f)
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
