package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/sturdyproxy/sturdy/internal/outcome"
	"github.com/sturdyproxy/sturdy/internal/testing/testpki"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

const http3Config = `
admin: { listen: "off" }
listeners:
  - { name: tls, listen: "127.0.0.1:0", tls: { cert: "{{cert}}", key: "{{key}}" }, http3: {} }
  - { name: plain, listen: "127.0.0.1:0" }
routes:
  - { name: denied, path: /admin, pool: web, access: [ { deny: all } ] }
  - { name: all, default: true, pool: web }
pools: [ { name: web, hosts: [ { addr: "{{b}}" } ] } ]
`

// HTTP/3 beside a TLS listener: the TCP listener advertises it with
// Alt-Svc, an HTTP/3 client is served by the same routes, access controls
// and pool (each request recorded against the host as over TCP), and a
// plain listener advertises nothing.
func TestHTTP3Listener(t *testing.T) {
	t.Parallel()
	b := backend(t, "127.1.2.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "b1 %s %s proto=%s", r.Method, r.URL.Path, r.Header.Get("X-Forwarded-Proto"))
	}))
	dir := t.TempDir()
	ca := testpki.NewCA(t, "h3 CA")
	cert, key := ca.Write(t, dir, "x", testpki.Leaf{DNS: []string{"x"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	s, _, _ := startSturdy(t, parseConfig(t, http3Config, map[string]string{"b": addr(b), "cert": cert, "key": key}))
	udp := s.HTTP3Addr("tls")
	_, port, _ := net.SplitHostPort(udp)
	if _, tcpPort, _ := net.SplitHostPort(s.Addr("tls")); port != tcpPort {
		t.Errorf("HTTP/3 on udp %s; want the TCP listener's port %s", udp, tcpPort)
	}

	tcp := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: "x"}}}
	resp, body := get(t, tcp, "https://"+s.Addr("tls")+"/a")
	if want := `h3=":` + port + `"; ma=86400`; resp.Header.Get("Alt-Svc") != want || body != "b1 GET /a proto=https" {
		t.Errorf("over TCP: Alt-Svc %q, body %q; want %q and the backend's answer", resp.Header.Get("Alt-Svc"), body, want)
	}
	if resp, _ := get(t, http.DefaultClient, "http://"+s.Addr("plain")+"/a"); resp.Header.Get("Alt-Svc") != "" {
		t.Errorf("a plain listener advertised %q", resp.Header.Get("Alt-Svc"))
	}

	h3 := &http3.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: "x"}}
	t.Cleanup(func() { h3.Close() })
	c := &http.Client{Timeout: 5 * time.Second, Transport: h3}
	host := s.Runtime().Pool("web").Hosts[0]
	before := host.Attempts(outcome.OK)
	resp, body = get(t, c, "https://"+udp+"/b")
	if resp.ProtoMajor != 3 || resp.StatusCode != 200 || body != "b1 GET /b proto=https" {
		t.Errorf("over HTTP/3: %s %d %q; want HTTP/3.0 200 and the backend's answer", resp.Proto, resp.StatusCode, body)
	}
	req, _ := http.NewRequest("POST", "https://"+udp+"/c", strings.NewReader("hello"))
	if resp, err := c.Do(req); err != nil {
		t.Error(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "b1 POST /c proto=https" {
			t.Errorf("POST over HTTP/3: %q", b)
		}
	}
	if n := host.Attempts(outcome.OK) - before; n != 2 {
		t.Errorf("%d attempts recorded for the HTTP/3 requests, want 2: the same health model", n)
	}
	if resp, _ := get(t, c, "https://"+udp+"/admin"); resp.StatusCode != 403 {
		t.Errorf("a denied route over HTTP/3: %d, want 403 (the same access controls)", resp.StatusCode)
	}
}

// Requests in 0-RTT early data (zero_rtt: true) are served only when
// safe to replay; others get 425 Too Early.
func TestTooEarly(t *testing.T) {
	h := tooEarly{named("b")}
	for _, tc := range []struct {
		method string
		early  bool
		want   int
	}{{"GET", true, 200}, {"HEAD", true, 200}, {"POST", true, 425}, {"DELETE", true, 425}, {"POST", false, 200}} {
		r := httptest.NewRequest(tc.method, "https://x/", nil)
		r.TLS = &tls.ConnectionState{HandshakeComplete: !tc.early}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("%s early=%v: %d, want %d", tc.method, tc.early, w.Code, tc.want)
		}
	}
}

// A reload keeps HTTP/3 serving on the same socket with the new routes,
// and Alt-Svc follows the new max age; a reload without the listener
// stops its HTTP/3 too.
func TestHTTP3Reload(t *testing.T) {
	t.Parallel()
	b := backend(t, "127.1.2.2", named("b2"))
	dir := t.TempDir()
	ca := testpki.NewCA(t, "h3 reload CA")
	cert, key := ca.Write(t, dir, "x", testpki.Leaf{DNS: []string{"x"}})
	vars := map[string]string{"b": addr(b), "cert": cert, "key": key}
	s, _, _ := startSturdy(t, parseConfig(t, http3Config, vars))
	udp, tcpAddr := s.HTTP3Addr("tls"), s.Addr("tls")
	_, port, _ := net.SplitHostPort(udp)
	h3 := &http3.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: "x"}}
	t.Cleanup(func() { h3.Close() })
	c := &http.Client{Timeout: 5 * time.Second, Transport: h3}

	next := strings.Replace(http3Config, `http3: {}`, `http3: { alt_svc_max_age: 1h }`, 1)
	next = strings.Replace(next, "{ name: all, default: true, pool: web }", "{ name: all, default: true, pool: web, response_headers: { set: { X-Config: two } } }", 1)
	if err := s.Reload(parseConfig(t, next, vars)); err != nil {
		t.Fatal(err)
	}
	if got := s.HTTP3Addr("tls"); got != udp {
		t.Errorf("HTTP/3 moved from %s to %s on reload", udp, got)
	}
	resp, body := get(t, c, "https://"+udp+"/r")
	if resp.ProtoMajor != 3 || body != "b2 GET /r" || resp.Header.Get("X-Config") != "two" {
		t.Errorf("after reload over HTTP/3: %s %q X-Config %q; want the new route's answer", resp.Proto, body, resp.Header.Get("X-Config"))
	}
	tcp := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: "x"}}}
	if resp, _ := get(t, tcp, "https://"+tcpAddr+"/"); resp.Header.Get("Alt-Svc") != `h3=":`+port+`"; ma=3600` {
		t.Errorf("Alt-Svc after reload: %q", resp.Header.Get("Alt-Svc"))
	}

	gone := `
admin: { listen: "off" }
listeners: [ { name: plain, listen: "127.0.0.1:0" } ]
routes: [ { name: all, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: "{{b}}" } ] } ]
`
	if err := s.Reload(parseConfig(t, gone, vars)); err != nil {
		t.Fatal(err)
	}
	if !testutil.Eventually(5*time.Second, func() bool {
		pc, err := net.ListenPacket("udp", udp) // free again once the listener's HTTP/3 stopped
		if err == nil {
			pc.Close()
		}
		return err == nil
	}) {
		t.Errorf("udp %s still bound after its listener was removed", udp)
	}
}

// signalCache is a TLS session cache that reports each ticket stored.
type signalCache struct {
	tls.ClientSessionCache
	put chan struct{}
}

func (c signalCache) Put(key string, cs *tls.ClientSessionState) {
	c.ClientSessionCache.Put(key, cs)
	if cs != nil {
		select {
		case c.put <- struct{}{}:
		default:
		}
	}
}

// 0-RTT is accepted only with zero_rtt: true. A client resumes with a
// ticket from a first connection and offers early data: by default the
// server declines it (a full round trip first); with zero_rtt it is used.
func TestHTTP3ZeroRTT(t *testing.T) {
	t.Parallel()
	b := backend(t, "127.1.2.3", named("b3"))
	dir := t.TempDir()
	ca := testpki.NewCA(t, "h3 0-rtt CA")
	cert, key := ca.Write(t, dir, "x", testpki.Leaf{DNS: []string{"x"}})
	for _, on := range []bool{false, true} {
		cfg := http3Config
		if on {
			cfg = strings.Replace(cfg, "http3: {}", "http3: { zero_rtt: true }", 1)
		}
		s, _, _ := startSturdy(t, parseConfig(t, cfg, map[string]string{"b": addr(b), "cert": cert, "key": key}))
		udp := s.HTTP3Addr("tls")
		cache := signalCache{tls.NewLRUClientSessionCache(4), make(chan struct{}, 1)}
		tc := &tls.Config{RootCAs: ca.Pool(), ServerName: "x", NextProtos: []string{http3.NextProtoH3}, ClientSessionCache: cache}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		first, err := quic.DialAddrEarly(ctx, udp, tc, &quic.Config{})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		select {
		case <-cache.put:
		case <-ctx.Done():
			t.Fatalf("zero_rtt %v: no session ticket from the first connection", on)
		}
		first.CloseWithError(0, "")
		second, err := quic.DialAddrEarly(ctx, udp, tc, &quic.Config{})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		select {
		case <-second.HandshakeComplete():
		case <-ctx.Done():
			t.Fatal("the resumed handshake did not complete")
		}
		if got := second.ConnectionState().Used0RTT; got != on {
			t.Errorf("zero_rtt %v: 0-RTT used = %v", on, got)
		}
		second.CloseWithError(0, "")
		cancel()
	}
}
