package compress

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// The corpus is made, not shipped: 1 MiB of HTML (a product listing with
// varied words, prices, links and attributes, as server-rendered pages
// are) and 1 MiB of JSON (an API's list of records), from a fixed seed so
// that every run measures the same bytes. Words follow a Zipf law over a
// vocabulary, as text does, so the ratios are those of real pages rather
// than of repeated text. STURDY_CORPUS=FILE measures a file of your own.
//
// cpu-ms/MiB is the CPU time of the compressing thread per MiB of input
// (on Linux; the wall time per op is beside it), ratio the input's size
// over the output's.
//
//	go test -run '^$' -bench Levels -benchtime 10x ./internal/proxy/compress/
func BenchmarkLevels(b *testing.B) {
	corpora := map[string][]byte{"html": htmlCorpus(1 << 20), "json": jsonCorpus(1 << 20)}
	if f := os.Getenv("STURDY_CORPUS"); f != "" {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		corpora = map[string][]byte{"file": data}
	}
	levels := []struct {
		enc    Encoding
		levels []int
	}{
		{Gzip, []int{1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{Zstd, []int{1, 3, 6, 10}}, // the encoder's four speeds
		{Brotli, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
	}
	for _, name := range []string{"html", "json", "file"} {
		data, ok := corpora[name]
		if !ok {
			continue
		}
		for _, l := range levels {
			for _, level := range l.levels {
				b.Run(fmt.Sprintf("%s/%s-%d", name, l.enc, level), func(b *testing.B) {
					p := testPolicy(b, func(c *config.Compress) {
						c.Encodings = []string{l.enc.String()}
						switch l.enc {
						case Gzip:
							c.Level.Gzip = level
						case Zstd:
							c.Level.Zstd = level
						case Brotli:
							c.Level.Brotli = level
						}
					})
					var out countWriter
					b.SetBytes(int64(len(data)))
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					cpu0, cpuOK := threadCPU()
					for b.Loop() {
						out = 0
						e := p.getEncoder(l.enc, &out)
						// 32 KiB writes, as the proxy copies a body.
						for rest := data; len(rest) > 0; {
							n := min(len(rest), 32<<10)
							e.Write(rest[:n])
							rest = rest[n:]
						}
						e.Close()
						p.putEncoder(l.enc, e)
					}
					mib := float64(len(data)) / (1 << 20)
					if cpu1, ok := threadCPU(); ok && cpuOK {
						b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/1e6/float64(b.N)/mib, "cpu-ms/MiB")
					}
					b.ReportMetric(float64(len(data))/float64(out), "ratio")
				})
			}
		}
	}
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

// What one compressed 64 KiB response costs through Wrap, in time and
// allocations (the encoder comes from the pool).
//
//	go test -run '^$' -bench Writer -benchmem ./internal/proxy/compress/
func BenchmarkWriter(b *testing.B) {
	body := htmlCorpus(64 << 10)
	for _, enc := range []string{"gzip", "zstd", "br"} {
		b.Run(enc, func(b *testing.B) {
			p := testPolicy(b, nil)
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set("Accept-Encoding", enc)
			rw := &discardWriter{h: http.Header{}}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				clear(rw.h)
				rw.h["Content-Type"] = []string{"text/html"}
				w := Wrap(rw, r, p)
				w.Write(body)
				w.Close()
			}
		})
	}
}

type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }

var vocabulary = strings.Fields(`the of and to in is for on with by this that from at as are be or an
it your our new all more can will has not we you one about product price order shipping free
delivery account search cart review rating stock size color black white blue red green small
large medium cotton steel leather wood glass set pack kit pro mini max ultra classic modern
home garden kitchen office outdoor sport travel kids women men gift sale offer limited edition
warranty return policy customer service support contact help page section article comment
user profile settings login register password email address phone city country street code
date time year month day week today tomorrow available details description features specs
weight height width depth battery power charger cable wireless bluetooth display screen
camera lens audio speaker headphones keyboard mouse laptop tablet phone watch ring bag shoe
shirt jacket dress pants hat scarf glove sock bottle cup plate bowl knife fork spoon chair
table lamp bed sofa shelf desk mirror rug curtain pillow blanket towel soap brush comb`)

type words struct {
	r *rand.Rand
	z *rand.Zipf
}

func newWords(seed uint64) *words {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return &words{r: r, z: rand.NewZipf(r, 1.1, 2, uint64(len(vocabulary)-1))}
}

func (w *words) word() string { return vocabulary[w.z.Uint64()] }

func (w *words) sentence(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = w.word()
	}
	return strings.Join(s, " ")
}

// htmlCorpus renders a product listing page of at least n bytes, cut to n.
func htmlCorpus(n int) []byte {
	w := newWords(1)
	var b bytes.Buffer
	b.WriteString(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Products</title>` +
		`<link rel="stylesheet" href="/assets/site.3f9a1c.css"><script defer src="/assets/app.8b2e4d.js"></script></head>` +
		"<body><header class=\"site-header\"><nav><ul><li><a href=\"/\">Home</a></li><li><a href=\"/shop\">Shop</a></li></ul></nav></header>\n<main id=\"catalog\">\n")
	for id := 1000; b.Len() < n; id++ {
		title := w.sentence(2 + w.r.IntN(5))
		fmt.Fprintf(&b, `<article class="product card" data-id="%d" data-sku="SKU-%06X">`+"\n", id, w.r.Uint32()&0xffffff)
		fmt.Fprintf(&b, `  <a class="product-link" href="/products/%d-%s"><img src="/img/p/%d.webp" alt="%s" width="320" height="240" loading="lazy"></a>`+"\n",
			id, strings.ReplaceAll(title, " ", "-"), id, title)
		fmt.Fprintf(&b, "  <h2 class=\"product-title\">%s</h2>\n  <p class=\"price\"><span class=\"currency\">$</span>%d.%02d</p>\n",
			title, 5+w.r.IntN(500), w.r.IntN(100))
		fmt.Fprintf(&b, "  <p class=\"description\">%s.</p>\n", w.sentence(12+w.r.IntN(30)))
		fmt.Fprintf(&b, "  <ul class=\"tags\"><li>%s</li><li>%s</li><li>%s</li></ul>\n", w.word(), w.word(), w.word())
		fmt.Fprintf(&b, "  <div class=\"rating\" aria-label=\"%d.%d out of 5\">%d reviews</div>\n</article>\n",
			1+w.r.IntN(4), w.r.IntN(10), w.r.IntN(3000))
	}
	return b.Bytes()[:n]
}

// jsonCorpus renders an API response (a list of records) of at least n
// bytes, cut to n (the cut does not matter to a compressor).
func jsonCorpus(n int) []byte {
	w := newWords(2)
	type address struct {
		Street  string `json:"street"`
		City    string `json:"city"`
		Zip     string `json:"zip"`
		Country string `json:"country"`
	}
	type record struct {
		ID        int      `json:"id"`
		UUID      string   `json:"uuid"`
		Name      string   `json:"name"`
		Email     string   `json:"email"`
		Active    bool     `json:"active"`
		Balance   float64  `json:"balance"`
		CreatedAt string   `json:"created_at"`
		Tags      []string `json:"tags"`
		Address   address  `json:"address"`
		Bio       string   `json:"bio"`
	}
	var b bytes.Buffer
	b.WriteString(`{"data":[`)
	for id := 1; b.Len() < n; id++ {
		if id > 1 {
			b.WriteByte(',')
		}
		rec := record{
			ID:        id,
			UUID:      fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", w.r.Uint32(), w.r.IntN(1<<16), w.r.IntN(1<<12), w.r.IntN(1<<16), w.r.Uint64()&(1<<48-1)),
			Name:      w.word() + " " + w.word(),
			Email:     fmt.Sprintf("%s.%s%d@example.com", w.word(), w.word(), w.r.IntN(100)),
			Active:    w.r.IntN(4) > 0,
			Balance:   float64(w.r.IntN(10000000)) / 100,
			CreatedAt: fmt.Sprintf("2026-%02d-%02dT%02d:%02d:%02dZ", 1+w.r.IntN(12), 1+w.r.IntN(28), w.r.IntN(24), w.r.IntN(60), w.r.IntN(60)),
			Tags:      []string{w.word(), w.word()},
			Address:   address{fmt.Sprintf("%d %s %s", 1+w.r.IntN(999), w.word(), w.word()), w.word(), fmt.Sprintf("%05d", w.r.IntN(100000)), "US"},
			Bio:       w.sentence(8 + w.r.IntN(20)),
		}
		enc, _ := json.Marshal(rec)
		b.Write(enc)
	}
	b.WriteString(`]}`)
	return b.Bytes()[:n]
}

var _ io.Writer = (*countWriter)(nil)

// The memory one pooled encoder holds, at the default levels: what each
// response being compressed at the same moment costs.
//
//	go test -run '^$' -bench NewEncoder -benchmem ./internal/proxy/compress/
func BenchmarkNewEncoder(b *testing.B) {
	p := testPolicy(b, nil)
	data := htmlCorpus(256 << 10)
	for _, e := range []Encoding{Gzip, Zstd, Brotli} {
		b.Run(e.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				enc, err := p.newEncoder(e)
				if err != nil {
					b.Fatal(err)
				}
				// Encoders allocate some tables on first use.
				enc.Write(data)
				enc.Close()
			}
		})
	}
}
