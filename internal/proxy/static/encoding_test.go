package static

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/proxy/compress"
)

// The siblings' contents are labels, not real compressed bytes: the
// handler serves them as they are, and the test checks which one came.
var precompressedCases = []struct {
	accept   string
	encoding string
	body     string
}{
	{"gzip, deflate, br, zstd", "br", "BR"}, // ties: the route's order (br, zstd, gzip); no .zst
	{"gzip;q=1, br;q=0.5", "gzip", "GZ"},    // the client's q-values first
	{"br;q=0, gzip;q=0.1", "gzip", "GZ"},    // q=0 refuses
	{"zstd", "", "original"},                // no app.js.zst: the original
	{"identity", "", "original"},            // nothing acceptable
	{"", "", "original"},                    // no Accept-Encoding
	{"*;q=0.5, gzip;q=0.9", "gzip", "GZ"},   // "*" gives br 0.5, gzip is named higher
}

func TestPrecompressedSiblingChosenByQValues(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, map[string]string{"app.js": "original", "app.js.br": "BR", "app.js.gz": "GZ"})
	h, _ := compile(t, route{static: "root: " + dir + ", precompressed: [ br, zstd, gzip ]"})
	url := start(t, h, nil) + "/app.js"
	etags := map[string]string{}
	for _, c := range precompressedCases {
		var hdr []string
		if c.accept != "" {
			hdr = append(hdr, "Accept-Encoding: "+c.accept)
		}
		r := get(t, "GET", url, hdr...)
		if r.body != c.body || r.header.Get("Content-Encoding") != c.encoding {
			t.Errorf("%q: got %q with Content-Encoding %q, want %q with %q", c.accept, r.body, r.header.Get("Content-Encoding"), c.body, c.encoding)
		}
		if r.header.Get("Content-Type") != "application/javascript; charset=utf-8" || r.header.Get("Vary") != "Accept-Encoding" {
			t.Errorf("%q: Content-Type %q, Vary %q", c.accept, r.header.Get("Content-Type"), r.header.Get("Vary"))
		}
		if r.header.Get("Content-Length") != strconv.Itoa(len(c.body)) {
			t.Errorf("%q: Content-Length %q for %d bytes", c.accept, r.header.Get("Content-Length"), len(c.body))
		}
		etags[c.body] = r.header.Get("ETag")
	}
	if etags["BR"] == etags["original"] || etags["GZ"] == etags["original"] || etags["BR"] == etags["GZ"] {
		t.Errorf("variants share an ETag: %v", etags)
	}
	// A range of a precompressed answer is a range of its bytes.
	r := get(t, "GET", url, "Accept-Encoding: gzip", "Range: bytes=1-1")
	if r.status != 206 || r.body != "Z" || r.header.Get("Content-Encoding") != "gzip" {
		t.Errorf("range of the gzip sibling: %d %q %q", r.status, r.body, r.header.Get("Content-Encoding"))
	}
	// And a 304 for the sibling's validator.
	if r := get(t, "GET", url, "Accept-Encoding: gzip", "If-None-Match: "+etags["GZ"]); r.status != 304 {
		t.Errorf("If-None-Match on the sibling: %d", r.status)
	}
}

func TestWithoutPrecompressedSiblingsAreIgnored(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, map[string]string{"app.js": "original", "app.js.gz": "GZ"})
	h, _ := compile(t, route{static: "root: " + dir})
	r := get(t, "GET", start(t, h, nil)+"/app.js", "Accept-Encoding: gzip")
	if r.body != "original" || r.header.Get("Vary") != "" {
		t.Errorf("%q Vary %q", r.body, r.header.Get("Vary"))
	}
}

// Files go through the compression wrapper as the proxy will wire it: a
// text file is compressed on the fly, a range of it is not, a
// precompressed sibling is not compressed twice.
func TestStaticBehindCompression(t *testing.T) {
	dir := t.TempDir()
	page := strings.Repeat("<li>a line of a long static page</li>\n", 200)
	tree(t, dir, map[string]string{"page.html": page, "app.js": "original", "app.js.gz": "GZ", "logo.png": page})
	h, _ := compile(t, route{static: "root: " + dir + ", precompressed: [ gzip ]"})
	p, err := compress.Compile(&config.Compress{Enabled: true, Encodings: []string{"gzip"}, Types: config.DefaultCompressTypes(),
		MinLength: 512, Level: config.CompressLevel{Gzip: 5, Zstd: 3, Brotli: 4}})
	if err != nil {
		t.Fatal(err)
	}
	url := start(t, h, p)
	r := get(t, "GET", url+"/page.html", "Accept-Encoding: gzip")
	if r.header.Get("Content-Encoding") != "gzip" || gunzip(t, r.body) != page || !strings.HasPrefix(r.header.Get("ETag"), `W/"`) {
		t.Errorf("page: Content-Encoding %q, ETag %q", r.header.Get("Content-Encoding"), r.header.Get("ETag"))
	}
	// The weakened validator still revalidates.
	if r2 := get(t, "GET", url+"/page.html", "Accept-Encoding: gzip", "If-None-Match: "+r.header.Get("ETag")); r2.status != 304 {
		t.Errorf("If-None-Match with the weak ETag: %d", r2.status)
	}
	if r := get(t, "GET", url+"/page.html", "Accept-Encoding: gzip", "Range: bytes=0-3"); r.status != 206 || r.body != "<li>" || r.header.Get("Content-Encoding") != "" {
		t.Errorf("range: %d %q %q", r.status, r.body, r.header.Get("Content-Encoding"))
	}
	if r := get(t, "GET", url+"/app.js", "Accept-Encoding: gzip"); r.body != "GZ" || r.header.Get("Content-Encoding") != "gzip" {
		t.Errorf("sibling: %q %q", r.body, r.header.Get("Content-Encoding"))
	}
	if r := get(t, "GET", url+"/logo.png", "Accept-Encoding: gzip"); r.body != page || r.header.Get("Content-Encoding") != "" {
		t.Errorf("png: compressed with %q", r.header.Get("Content-Encoding"))
	}
}

func gunzip(t *testing.T, s string) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader([]byte(s)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
