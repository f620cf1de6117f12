package static

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// The handler alone, into a writer that discards: what a request costs
// sturdy (path checks, os.Root, open, fstat, headers, ServeContent).
//
//	go test -run '^$' -bench Serve -benchmem ./internal/proxy/static/
func BenchmarkServeHandler(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"1KiB", 1 << 10}, {"1MiB", 1 << 20}} {
		b.Run(size.name, func(b *testing.B) {
			dir := b.TempDir()
			tree(b, dir, map[string]string{"assets/file.js": strings.Repeat("x", size.n)})
			h, _ := compile(b, route{static: "root: " + dir + ", cache_control: \"public, max-age=60\""})
			r, _ := http.NewRequest("GET", "/assets/file.js", nil)
			w := &discard{h: http.Header{}}
			b.SetBytes(int64(size.n))
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				if !h.Serve(w, r, r.URL.Path) || w.code != 200 {
					b.Fatalf("status %d", w.code)
				}
			}
		})
	}
}

// Through a loopback server and a keep-alive client, as a client sees it.
func BenchmarkServeLoopback(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"1KiB", 1 << 10}, {"1MiB", 1 << 20}} {
		b.Run(size.name, func(b *testing.B) {
			dir := b.TempDir()
			tree(b, dir, map[string]string{"file.js": strings.Repeat("x", size.n)})
			h, _ := compile(b, route{static: "root: " + dir})
			url := start(b, h, nil) + "/file.js"
			b.SetBytes(int64(size.n))
			for b.Loop() {
				resp, err := client.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if n != int64(size.n) {
					b.Fatalf("%d bytes", n)
				}
			}
		})
	}
}

type discard struct {
	h    http.Header
	code int
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) WriteHeader(code int)        { d.code = code }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(io.Discard, r)
}
