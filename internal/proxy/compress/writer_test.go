package compress

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// testPolicy compiles a policy from the defaults, changed by edit.
func testPolicy(t testing.TB, edit func(*config.Compress)) *Policy {
	t.Helper()
	c := &config.Compress{
		Enabled:   true,
		Encodings: []string{"zstd", "br", "gzip"},
		Types:     config.DefaultCompressTypes(),
		MinLength: config.DefaultCompressMinBytes,
		Level:     config.CompressLevel{Gzip: config.DefaultGzipLevel, Zstd: config.DefaultZstdLevel, Brotli: config.DefaultBrotliLevel},
	}
	if edit != nil {
		edit(c)
	}
	p, err := Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// serve starts a loopback server whose handler writes through Wrap.
func serve(t *testing.T, p *Policy, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cw := Wrap(w, r, p); cw != nil {
			defer cw.Close()
			w = cw
		}
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// client never decodes on its own, so that tests see the bytes sent.
var client = &http.Client{Transport: &http.Transport{DisableCompression: true}, Timeout: 10 * time.Second}

func fetch(t *testing.T, method, url, accept string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	if accept != "" {
		req.Header.Set("Accept-Encoding", accept)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func decode(t *testing.T, enc string, b []byte) []byte {
	t.Helper()
	r := decoder(t, enc, bytes.NewReader(b))
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("decoding %s: %v", enc, err)
	}
	return out
}

func decoder(t *testing.T, enc string, r io.Reader) io.Reader {
	t.Helper()
	switch enc {
	case "gzip":
		zr, err := gzip.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		return zr
	case "zstd":
		zr, err := zstd.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(zr.Close)
		return zr
	case "br":
		return brotli.NewReader(r)
	}
	t.Fatalf("unknown coding %q", enc)
	return nil
}

var page = []byte(strings.Repeat("<p class=\"item\">sturdy serves this paragraph again and again</p>\n", 400))

func TestCompressesEachCodingTheClientPrefers(t *testing.T) {
	p := testPolicy(t, nil)
	url := serve(t, p, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(page)))
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Accept-Ranges", "bytes")
		w.Header().Set("Vary", "Origin")
		w.Write(page)
	})
	for accept, want := range map[string]string{
		"gzip":                       "gzip",
		"gzip, deflate, br, zstd":    "zstd", // ties go to the server's order
		"br;q=1, zstd;q=0.5, gzip":   "br",
		"zstd;q=0, br;q=0, gzip;q=1": "gzip",
	} {
		resp, body := fetch(t, "GET", url, accept)
		if got := resp.Header.Get("Content-Encoding"); got != want {
			t.Errorf("%q: Content-Encoding %q, want %q", accept, got, want)
			continue
		}
		if got := decode(t, want, body); !bytes.Equal(got, page) {
			t.Errorf("%q: decoded body differs (%d bytes, want %d)", accept, len(got), len(page))
		}
		if len(body) >= len(page)/4 {
			t.Errorf("%q: %d bytes sent for %d: not compressed", accept, len(body), len(page))
		}
		if got := resp.Header.Values("Vary"); strings.Join(got, ",") != "Origin,Accept-Encoding" {
			t.Errorf("%q: Vary %q, want Origin then Accept-Encoding", accept, got)
		}
		if got := resp.Header.Get("ETag"); got != `W/"v1"` {
			t.Errorf("%q: ETag %q, want the weak W/\"v1\"", accept, got)
		}
		// The server may count the compressed bytes itself; the original
		// length must be gone.
		if (resp.ContentLength != -1 && resp.ContentLength != int64(len(body))) || resp.Header.Get("Accept-Ranges") != "" {
			t.Errorf("%q: Content-Length %d for %d bytes, Accept-Ranges %q", accept, resp.ContentLength, len(body), resp.Header.Get("Accept-Ranges"))
		}
	}
}

// Each case is a response that must reach the client as it was written.
var identityCases = []struct {
	name     string
	method   string
	accept   string
	status   int
	header   map[string]string
	wantVary bool
}{
	{name: "already encoded", header: map[string]string{"Content-Encoding": "gzip"}},
	{name: "event stream", header: map[string]string{"Content-Type": "text/event-stream"}},
	{name: "range response", status: http.StatusPartialContent, header: map[string]string{"Content-Range": "bytes 0-99/1000"}},
	{name: "content-range on 200", header: map[string]string{"Content-Range": "bytes 0-99/1000"}},
	{name: "no-transform", header: map[string]string{"Cache-Control": "public, No-Transform"}},
	{name: "not a compressible type", header: map[string]string{"Content-Type": "image/png"}},
	{name: "no content type", header: map[string]string{"Content-Type": ""}},
	{name: "client accepts none", accept: "deflate", wantVary: true},
	{name: "client sent no Accept-Encoding", accept: "-", wantVary: true},
	{name: "HEAD", method: "HEAD", wantVary: true},
	{name: "shorter than min_length", header: map[string]string{"Content-Length": "100"}},
}

func TestLeavesIneligibleResponsesAlone(t *testing.T) {
	p := testPolicy(t, nil)
	for _, c := range identityCases {
		t.Run(c.name, func(t *testing.T) {
			url := serve(t, p, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				body := page
				for k, v := range c.header {
					if v == "" {
						w.Header()[k] = nil
						continue
					}
					w.Header().Set(k, v)
					if k == "Content-Length" {
						body = page[:100]
					}
				}
				if c.status != 0 {
					w.WriteHeader(c.status)
				}
				w.Write(body)
			})
			accept := "gzip, zstd, br"
			if c.accept == "-" {
				accept = ""
			} else if c.accept != "" {
				accept = c.accept
			}
			method := "GET"
			if c.method != "" {
				method = c.method
			}
			resp, body := fetch(t, method, url, accept)
			if ce := resp.Header.Get("Content-Encoding"); ce != "" && ce != c.header["Content-Encoding"] {
				t.Errorf("Content-Encoding %q added", ce)
			}
			if method == "GET" && !bytes.Equal(body, page[:len(body)]) || (method == "GET" && len(body) < 100) {
				t.Errorf("body changed: %d bytes", len(body))
			}
			if got := resp.Header.Get("Vary") == "Accept-Encoding"; got != c.wantVary {
				t.Errorf("Vary %q; want Accept-Encoding: %v", resp.Header.Get("Vary"), c.wantVary)
			}
		})
	}
}

func TestNoBodyStatusesPassThrough(t *testing.T) {
	p := testPolicy(t, nil)
	for _, code := range []int{http.StatusNoContent, http.StatusNotModified} {
		url := serve(t, p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.Header().Set("ETag", `"x"`)
			w.WriteHeader(code)
		})
		resp, body := fetch(t, "GET", url, "gzip")
		if resp.StatusCode != code || len(body) != 0 || resp.Header.Get("Content-Encoding") != "" || resp.Header.Get("ETag") != `"x"` {
			t.Errorf("%d: got %d, %d bytes, Content-Encoding %q, ETag %q", code, resp.StatusCode, len(body), resp.Header.Get("Content-Encoding"), resp.Header.Get("ETag"))
		}
	}
}

// Without Content-Length the decision waits for min_length bytes: a short
// body goes out whole with its length and no Vary, a long one written in
// small pieces is compressed.
func TestUnknownLengthIsDecidedByBufferedBytes(t *testing.T) {
	p := testPolicy(t, nil)
	url := serve(t, p, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		for i := 0; i < n; i += 10 {
			w.Write(page[i : i+10])
		}
	})
	resp, body := fetch(t, "GET", url+"?n=500", "gzip")
	if resp.Header.Get("Content-Encoding") != "" || resp.ContentLength != 500 || resp.Header.Get("Vary") != "" || !bytes.Equal(body, page[:500]) {
		t.Errorf("500 bytes: Content-Encoding %q, Content-Length %d, Vary %q, body %d bytes", resp.Header.Get("Content-Encoding"), resp.ContentLength, resp.Header.Get("Vary"), len(body))
	}
	resp, body = fetch(t, "GET", url+"?n=20000", "gzip")
	if resp.Header.Get("Content-Encoding") != "gzip" || !bytes.Equal(decode(t, "gzip", body), page[:20000]) {
		t.Errorf("20000 bytes: Content-Encoding %q, decoded differs", resp.Header.Get("Content-Encoding"))
	}
}

func TestVaryIsMergedOnce(t *testing.T) {
	p := testPolicy(t, nil)
	url := serve(t, p, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css")
		w.Header().Set("Vary", "origin, ACCEPT-ENCODING")
		w.Write(page)
	})
	resp, _ := fetch(t, "GET", url, "gzip")
	if got := resp.Header.Values("Vary"); len(got) != 1 || got[0] != "origin, ACCEPT-ENCODING" {
		t.Errorf("Vary %q", got)
	}
}

// Trailers stay trailers, also on a body shorter than min_length, which
// must not be held back until the handler has set them.
func TestTrailersSurviveCompression(t *testing.T) {
	for _, n := range []int{len(page), 10} {
		url := serve(t, testPolicy(t, nil), func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Trailer", "X-Checksum")
			w.Write(page[:n])
			w.Header().Set("X-Checksum", "abc")
		})
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Equal(decode(t, "gzip", body), page[:n]) || resp.Trailer.Get("X-Checksum") != "abc" || resp.Header.Get("X-Checksum") != "" {
			t.Errorf("%d bytes: trailer %q, header %q", n, resp.Trailer.Get("X-Checksum"), resp.Header.Get("X-Checksum"))
		}
	}
}

// A route with compression off must pay nothing: no writer, no allocation.
func TestWrapIsFreeWhenOff(t *testing.T) {
	rec := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/", nil)
	if n := testing.AllocsPerRun(100, func() {
		if Wrap(rec, r, nil) != nil {
			t.Fatal("a writer for a route with compression off")
		}
	}); n != 0 {
		t.Errorf("%v allocations", n)
	}
	if p, err := Compile(&config.Compress{Enabled: false, Encodings: []string{"gzip"}}); p != nil || err != nil {
		t.Errorf("disabled config compiled to %v, %v", p, err)
	}
}

// The encoder goes back to the pool: the second response reuses it.
func TestEncodersAreReused(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop objects at random")
	}
	p := testPolicy(t, nil)
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Accept-Encoding", "gzip")
	one := func() {
		rec := httptest.NewRecorder()
		rec.Header().Set("Content-Type", "text/html")
		w := Wrap(rec, r, p)
		w.Write(page)
		w.Close()
	}
	one()
	// Pools may drop objects at a GC, so compare with a generous bound:
	// a fresh gzip encoder alone is hundreds of kilobytes.
	res := testing.Benchmark(func(b *testing.B) {
		for range b.N {
			one()
		}
	})
	if bytesPerOp := res.AllocedBytesPerOp(); bytesPerOp > 64<<10 {
		t.Errorf("%d bytes allocated per compressed response; the encoder is not pooled", bytesPerOp)
	}
}

// 1xx answers (103 Early Hints) pass through and the final answer is
// still compressed.
func TestInformationalAnswersPassThrough(t *testing.T) {
	url := serve(t, testPolicy(t, nil), func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</app.css>; rel=preload; as=style")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Set("Content-Type", "text/html")
		w.Write(page)
	})
	var got []int
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
		got = append(got, code)
		return nil
	}}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", url, nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if len(got) != 1 || got[0] != http.StatusEarlyHints || resp.Header.Get("Content-Encoding") != "gzip" || !bytes.Equal(decode(t, "gzip", body), page) {
		t.Errorf("1xx %v, Content-Encoding %q", got, resp.Header.Get("Content-Encoding"))
	}
}
