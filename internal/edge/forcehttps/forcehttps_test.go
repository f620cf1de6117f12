package forcehttps

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/testing/testpki"
)

var routed = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	io.WriteString(w, "routed "+r.URL.Path)
})

// start serves h on a loopback port and returns its address.
func start(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

var noFollow = &http.Client{
	Timeout:       5 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func TestRedirectToHTTPS(t *testing.T) {
	for _, tc := range []struct {
		cfg          config.RedirectHTTPS
		method, host string
		target       string
		status       int
		location     string
	}{
		{config.RedirectHTTPS{Status: 308, Port: 443}, "GET", "shop.test", "/cart?id=7&x=%2F", 308, "https://shop.test/cart?id=7&x=%2F"},
		{config.RedirectHTTPS{Status: 308, Port: 443}, "POST", "shop.test:80", "/pay", 308, "https://shop.test/pay"},
		{config.RedirectHTTPS{Status: 301, Port: 443}, "GET", "Shop.Test:8080", "/", 301, "https://Shop.Test/"},
		{config.RedirectHTTPS{Status: 308, Port: 8443}, "GET", "shop.test:8080", "/a", 308, "https://shop.test:8443/a"},
		{config.RedirectHTTPS{Status: 308, Port: 443}, "GET", "[::1]:80", "/", 308, "https://[::1]/"},
		{config.RedirectHTTPS{Status: 308, Port: 8443}, "GET", "127.0.0.1", "/", 308, "https://127.0.0.1:8443/"},
	} {
		addr := start(t, Redirect(&tc.cfg, routed))
		req, _ := http.NewRequest(tc.method, "http://"+addr+tc.target, strings.NewReader("body"))
		req.Host = tc.host
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("Location") != tc.location {
			t.Errorf("%s %s%s: %d %q; want %d %q", tc.method, tc.host, tc.target, resp.StatusCode, resp.Header.Get("Location"), tc.status, tc.location)
		}
	}
}

// ACME HTTP-01 challenges are answered over plain HTTP, not redirected.
func TestChallengesAreNotRedirected(t *testing.T) {
	addr := start(t, Redirect(&config.RedirectHTTPS{Status: 308, Port: 443}, routed))
	resp, err := noFollow.Get("http://" + addr + ChallengePrefix + "token123")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "routed "+ChallengePrefix+"token123" {
		t.Errorf("challenge got %d %q", resp.StatusCode, b)
	}
	// Only that prefix: a look-alike path is redirected.
	resp, err = noFollow.Get("http://" + addr + "/.well-known/acme-challengeX")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 308 {
		t.Errorf("look-alike path got %d", resp.StatusCode)
	}
}

func TestRedirectWithoutHost(t *testing.T) {
	addr := start(t, Redirect(&config.RedirectHTTPS{Status: 308, Port: 443}, routed))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "GET / HTTP/1.0\r\n\r\n")
	b, _ := io.ReadAll(c)
	if !strings.HasPrefix(string(b), "HTTP/1.0 400") {
		t.Errorf("no Host: %q", b)
	}
}

func TestHSTSOnTLSAnswers(t *testing.T) {
	ca := testpki.NewCA(t, "CA")
	backend := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add(HSTSHeader, "max-age=0") // a backend's own comes second
		io.WriteString(w, "ok")
	})
	srv := httptest.NewUnstartedServer(HSTS("max-age=31536000; includeSubDomains", backend))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.TLS(t, testpki.Leaf{DNS: []string{"site.test"}})}}
	srv.StartTLS()
	defer srv.Close()
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: "site.test"}}}
	resp, err := cl.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Values(HSTSHeader); len(got) != 2 || got[0] != "max-age=31536000; includeSubDomains" {
		t.Errorf("over TLS: %q", got)
	}

	plain := start(t, HSTS("max-age=31536000", backend))
	resp, err = noFollow.Get("http://" + plain + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Values(HSTSHeader); len(got) != 1 || got[0] != "max-age=0" {
		t.Errorf("plain HTTP must not get ours (RFC 6797 7.2): %q", got)
	}
}
