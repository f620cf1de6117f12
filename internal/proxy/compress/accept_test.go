package compress

import (
	"net/http"
	"testing"
)

var bestCases = []struct {
	accept string
	offers []Encoding
	want   Encoding
}{
	{"", []Encoding{Zstd, Gzip}, Identity},
	{"gzip", []Encoding{Zstd, Gzip}, Gzip},
	{"gzip, deflate, br, zstd", []Encoding{Zstd, Brotli, Gzip}, Zstd},          // ties: server order
	{"gzip, deflate, br, zstd", []Encoding{Gzip, Brotli, Zstd}, Gzip},          // ties: server order
	{"gzip;q=1.0, br;q=0.9, zstd;q=0.8", []Encoding{Zstd, Brotli, Gzip}, Gzip}, // client's q wins
	{"zstd;q=0, gzip;q=0.5", []Encoding{Zstd, Gzip}, Gzip},
	{"gzip;q=0", []Encoding{Gzip}, Identity},
	{"*", []Encoding{Zstd, Gzip}, Zstd},
	{"*;q=0.1, gzip;q=0.5", []Encoding{Zstd, Gzip}, Gzip},
	{"*;q=0, br", []Encoding{Zstd, Brotli}, Brotli},
	{"x-gzip", []Encoding{Gzip}, Gzip},
	{"GZIP ; Q=0.5", []Encoding{Gzip}, Gzip},
	{"gzip;q=abc", []Encoding{Gzip}, Identity}, // garbled q never turns compression on
	{"gzip;q=1.5", []Encoding{Gzip}, Identity},
	{"gzip;q=0.0001", []Encoding{Gzip}, Identity},
	{"identity", []Encoding{Gzip}, Identity},
	{"deflate, compress", []Encoding{Zstd, Gzip}, Identity},
	{"br;q=0.001", []Encoding{Brotli}, Brotli},
	{" , ,gzip;level=1;q=0.2,", []Encoding{Gzip}, Gzip},
	{"gzip;q=0, gzip;q=0.8", []Encoding{Gzip}, Gzip}, // named twice: the best q counts
}

func TestBestHonoursQValuesThenServerOrder(t *testing.T) {
	for _, c := range bestCases {
		if got := ParseAccept([]string{c.accept}).Best(c.offers); got != c.want {
			t.Errorf("Accept-Encoding %q offers %v: got %q, want %q", c.accept, c.offers, got, c.want)
		}
	}
}

func TestAcceptCombinesFieldLines(t *testing.T) {
	a := ParseAccept([]string{"gzip;q=0.2", "zstd;q=0.4"})
	if got := a.Best([]Encoding{Gzip, Zstd}); got != Zstd {
		t.Errorf("got %v, want zstd", got)
	}
}

func TestRankedOrdersByQThenOffer(t *testing.T) {
	var dst [numEncodings]Encoding
	a := ParseAccept([]string{"gzip;q=0.5, zstd;q=0.5, br;q=0.9"})
	n := a.Ranked([]Encoding{Gzip, Zstd, Brotli}, &dst)
	if got, want := dst[:n], []Encoding{Brotli, Gzip, Zstd}; !equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	a = ParseAccept([]string{"br;q=0, gzip"})
	n = a.Ranked([]Encoding{Brotli, Zstd, Gzip}, &dst)
	if got, want := dst[:n], []Encoding{Gzip}; !equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func equal(a, b []Encoding) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestParseAcceptDoesNotAllocate(t *testing.T) {
	lines := []string{"gzip, deflate, br;q=0.9, zstd;q=0.8, *;q=0.1"}
	if n := testing.AllocsPerRun(100, func() { ParseAccept(lines) }); n != 0 {
		t.Errorf("%v allocations per parse", n)
	}
}

func TestNegotiateIsIdentityWhenOffOrHead(t *testing.T) {
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Accept-Encoding", "gzip")
	var off *Policy
	if got := off.Negotiate(r); got != Identity {
		t.Errorf("nil policy: %v", got)
	}
	p := testPolicy(t, nil)
	if got := p.Negotiate(r); got != Gzip {
		t.Errorf("GET: %v", got)
	}
	r.Method = http.MethodHead
	if got := p.Negotiate(r); got != Identity {
		t.Errorf("HEAD: %v", got)
	}
}
