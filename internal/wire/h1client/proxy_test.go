package h1client_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/compile"
	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/proxy"
	"github.com/sturdyproxy/sturdy/internal/wire/h1client"
)

// newProxy is a proxy.Handler for one route to backend, with up as its
// upstream client.
func newProxy(t *testing.T, backend string, up proxy.Upstream) http.Handler {
	t.Helper()
	cfg, err := config.Parse([]byte("listeners: [ { name: web, listen: 127.0.0.1:0 } ]\nroutes: [ { name: site, pool: web } ]\npools: [ { name: web, hosts: [ { addr: "+backend+" } ] } ]\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := compile.Compile(cfg, nil, compile.Env{})
	if err != nil {
		t.Fatal(err)
	}
	rt.Close() // its own upstream client is replaced by up
	rt.Route("site").Upstream = up
	return &proxy.Handler{Listener: "web", Current: func() *proxy.Snapshot { return rt.Proxy }}
}

// TestThroughProxy runs the request shapes the proxy builds (bodiless
// GETs with its no-retry body, buffered and streamed bodies, trailers)
// through proxy.Handler with this client as its upstream.
func TestThroughProxy(t *testing.T) {
	var requests atomic.Int32
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Trailer", "X-Len")
		w.Header().Set("X-Got", r.Method+" "+r.RequestURI+" "+r.Header.Get("X-Forwarded-For"))
		w.Write(b)
		w.Header().Set("X-Len", "n"+string(rune('0'+len(b)%10)))
	}))
	defer backend.Close()
	c := h1client.New(h1client.Options{Fallback: http.DefaultTransport})
	defer c.Close()
	front := httptest.NewServer(newProxy(t, strings.TrimPrefix(backend.URL, "http://"), c))
	defer front.Close()

	for _, tt := range []struct {
		method, body string
		chunked      bool
	}{
		{"GET", "", false},
		{"PUT", "replayable", false},
		{"POST", "once", false},
		{"POST", "streamed", true},
	} {
		var body io.Reader
		if tt.body != "" {
			body = strings.NewReader(tt.body)
			if tt.chunked {
				body = io.MultiReader(body) // unknown length: chunked
			}
		}
		req, _ := http.NewRequest(tt.method, front.URL+"/x/a%20b?q=1", body)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != tt.body {
			t.Errorf("%s: %d %q", tt.method, resp.StatusCode, b)
		}
		if got := resp.Header.Get("X-Got"); got != tt.method+" /x/a%20b?q=1 127.0.0.1" {
			t.Errorf("%s: backend got %q", tt.method, got)
		}
		if got := resp.Trailer.Get("X-Len"); got == "" {
			t.Errorf("%s: trailer lost: %v", tt.method, resp.Trailer)
		}
	}
	if n := requests.Load(); n != 4 {
		t.Errorf("backend got %d requests, want 4", n)
	}
}
