package proxy

import (
	"net/http"
	"testing"
)

// browserHeader is what a browser's request carries: no "_" anywhere.
func browserHeader() http.Header {
	return http.Header{
		"Accept": {"text/html"}, "Accept-Encoding": {"gzip, br"}, "Accept-Language": {"en"},
		"Cache-Control": {"no-cache"}, "Cookie": {"a=b; session_id=1"}, "Referer": {"https://x/"},
		"Sec-Fetch-Mode": {"navigate"}, "Sec-Fetch-Site": {"same-origin"}, "Upgrade-Insecure-Requests": {"1"},
		"User-Agent": {"Mozilla/5.0"},
	}
}

func TestDropUnderscored(t *testing.T) {
	h := browserHeader()
	if dropUnderscored(h) || len(h) != 10 {
		t.Fatalf("a header without names with _ changed: %v", h)
	}
	if n := testing.AllocsPerRun(100, func() { dropUnderscored(h) }); n != 0 {
		t.Errorf("%v allocations for a header without _ names, want 0", n)
	}
	h["X_real_ip"] = []string{"6.6.6.6"}
	h["Transfer_encoding"] = []string{"chunked"}
	if !dropUnderscored(h) || len(h) != 10 || h.Get("Cookie") == "" {
		t.Errorf("after the drop: %v", h)
	}
}

// BenchmarkDropUnderscored is the edge's scan of a browser's header for
// names with "_" (none): the cost every request pays by default.
func BenchmarkDropUnderscored(b *testing.B) {
	h := browserHeader()
	b.ReportAllocs()
	for b.Loop() {
		dropUnderscored(h)
	}
}
