package demo

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/lint"
)

// The embedded config is valid and draws no warnings: it is the first thing
// a new user reads.
func TestEmbeddedConfigIsClean(t *testing.T) {
	c, err := config.Parse(Config, "demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if w := lint.Check(c); len(w) != 0 {
		t.Fatalf("warnings: %v", w)
	}
	for _, p := range c.Pools {
		for i, h := range p.Hosts {
			if !strings.HasPrefix(h.Addr, "127.0.0.1:91") || i >= len(BackendAddrs) {
				t.Fatalf("pool %s host %s is not a demo backend", p.Name, h.Addr)
			}
		}
	}
}

func TestBackendsAnswer(t *testing.T) {
	b, err := Start([]string{"127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	h := Handler("b1")
	for path, want := range map[string]string{"/x": "hello from demo backend b1", "/cached/a": "cacheable answer", "/status/418": "answered 418"} {
		rec := &recorder{h: http.Header{}}
		h.ServeHTTP(rec, mustReq(path))
		if !strings.Contains(rec.body.String(), want) {
			t.Errorf("%s: %q", path, rec.body.String())
		}
	}
}

type recorder struct {
	h    http.Header
	body strings.Builder
}

func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) Write(p []byte) (int, error) { return r.body.Write(p) }
func (r *recorder) WriteHeader(int)             {}

func mustReq(path string) *http.Request {
	r, _ := http.NewRequest("GET", "http://demo"+path, io.NopCloser(strings.NewReader("")))
	return r
}
