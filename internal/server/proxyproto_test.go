package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"
	"github.com/sturdyproxy/sturdy/internal/testing/fake"
	"github.com/sturdyproxy/sturdy/internal/testing/testpki"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

const proxyProtoConfig = `
admin: { listen: "off" }
trusted_proxies: [ 127.0.0.1 ]
listeners:
  - { name: required, listen: "127.0.0.1:0", proxy_protocol: required, h2c: true }
  - { name: optional, listen: "127.0.0.1:0", proxy_protocol: optional }
  - { name: tls, listen: "127.0.0.1:0", proxy_protocol: required, tls: { cert: "{{cert}}", key: "{{key}}" } }
routes: [ { name: all, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: "{{b}}" } ] } ]
`

// whoBackend answers with the client address sturdy forwarded.
func whoBackend(t *testing.T) *httptest.Server {
	return backend(t, "127.1.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("X-Forwarded-For"))
	}))
}

// proxyHeader is a PROXY header (version 1 or 2) naming client as the
// source of a TCP connection to dst.
func proxyHeader(t *testing.T, version byte, client, dst string) []byte {
	t.Helper()
	src, _ := net.ResolveTCPAddr("tcp", client)
	d, _ := net.ResolveTCPAddr("tcp", dst)
	h := proxyproto.HeaderProxyFromAddrs(version, src, d)
	var b strings.Builder
	if _, err := h.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return []byte(b.String())
}

// rawExchange dials addr from ip, writes pre and then an HTTP/1.1 GET,
// and returns the response body, or the error that ended the exchange.
func rawExchange(ip, addr string, pre []byte, wrap func(net.Conn) net.Conn) (string, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 2 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if len(pre) > 0 {
		if _, err := c.Write(pre); err != nil {
			return "", err
		}
	}
	var conn net.Conn = c
	if wrap != nil {
		conn = wrap(c)
	}
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// A PROXY header is believed from trusted_proxies only: the client it
// names is the client (X-Forwarded-For, attribution); from anyone else
// the connection is closed without a byte written, on plain, h2c and TLS
// listeners alike.
func TestProxyProtocolBelievedOnlyFromTrustedProxies(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testpki.NewCA(t, "pp CA")
	cert, key := ca.Write(t, dir, "site", testpki.Leaf{DNS: []string{"x"}})
	b := whoBackend(t)
	s, _, _ := startSturdy(t, parseConfig(t, proxyProtoConfig, map[string]string{"b": addr(b), "cert": cert, "key": key}))
	req, opt, tl := s.Addr("required"), s.Addr("optional"), s.Addr("tls")
	tlsWrap := func(c net.Conn) net.Conn { return tls.Client(c, &tls.Config{ServerName: "x", RootCAs: ca.Pool()}) }

	for _, v := range []byte{1, 2} {
		for _, c := range []struct {
			name, listener, from string
			wrap                 func(net.Conn) net.Conn
			header, want         bool // send a header; served (and the claimed client seen)
		}{
			{"trusted on required", req, "127.0.0.1", nil, true, true},
			{"trusted on tls", tl, "127.0.0.1", tlsWrap, true, true},
			{"trusted on optional", opt, "127.0.0.1", nil, true, true},
			{"untrusted on required", req, "127.0.0.9", nil, true, false},
			{"untrusted on tls", tl, "127.0.0.9", tlsWrap, true, false},
			{"untrusted on optional", opt, "127.0.0.9", nil, true, false},
		} {
			t.Run(fmt.Sprintf("v%d %s", v, c.name), func(t *testing.T) {
				got, err := rawExchange(c.from, c.listener, proxyHeader(t, v, "127.50.0.7:40000", c.listener), c.wrap)
				if c.want && (err != nil || got != "127.50.0.7") {
					t.Errorf("got %q, %v; want the client the header names, 127.50.0.7", got, err)
				}
				if !c.want && err == nil {
					t.Errorf("served (%q); want the connection closed", got)
				}
			})
		}
	}
	// Without a header: required refuses even a trusted proxy; optional
	// serves everyone as who they are.
	if got, err := rawExchange("127.0.0.1", req, nil, nil); err == nil {
		t.Errorf("required, no header: served %q; want the connection closed", got)
	}
	for _, ip := range []string{"127.0.0.1", "127.0.0.9"} {
		if got, err := rawExchange(ip, opt, nil, nil); err != nil || got != ip {
			t.Errorf("optional, no header, from %s: got %q, %v", ip, got, err)
		}
	}
	// h2c after a PROXY header: the HTTP/2 preface follows the header.
	h2 := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		Protocols: h2cOnly(),
		DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, a)
			if err == nil {
				_, err = c.Write(proxyHeader(t, 2, "127.50.0.8:40000", a))
			}
			return c, err
		},
	}}
	resp, body := get(t, h2, "http://"+req+"/")
	if resp.ProtoMajor != 2 || body != "127.50.0.8" {
		t.Errorf("h2c after PROXY v2: %s, body %q; want HTTP/2 and the client the header names", resp.Proto, body)
	}
}

// Behind HAProxy (send-proxy-v2, TCP mode) every client would otherwise
// look like HAProxy. Incident 000 through it: a WAF blocks one scanner;
// its failures are attributed to the scanner alone, innocent clients see
// none, and no backend leaves rotation.
func TestHAProxySendProxyV2KeepsRealClients(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("long: starts haproxy and runs incident 000 through it")
	}
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("haproxy not installed (apt-get install haproxy); .ci/run installs it")
	}
	const scanner = "127.0.0.66"
	var wafs []string
	for i := 1; i <= 2; i++ {
		b, err := fake.NewBackend(fmt.Sprintf("b%d", i), fmt.Sprintf("127.1.0.%d", i))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		w, err := fake.NewWAF(fmt.Sprintf("127.2.0.%d", i), b.Addr, scanner, fake.WAF502)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Close)
		wafs = append(wafs, w.Addr)
	}
	cfg := parseConfig(t, strings.Replace(wafConfig, `listeners: [ { name: web, listen: "127.0.0.1:0" } ]`,
		"trusted_proxies: [ 127.0.0.1 ]\nlisteners: [ { name: web, listen: \"127.0.0.1:0\", proxy_protocol: required } ]", 1),
		map[string]string{"w1": wafs[0], "w2": wafs[1]})
	s, _, _ := startSturdy(t, cfg)
	ev := countEvents(s)
	front := startHAProxy(t, bin, s.Addr("web"))
	url := "http://" + front

	var innocent *tally
	done := make(chan struct{})
	go func() {
		defer close(done)
		innocent = load(t, url, ips("127.0.0.", 5), 60, 10*time.Millisecond, func(i int) string { return fmt.Sprintf("/page/%d", i) })
	}()
	bad := load(t, url, []string{scanner}, 300, 0, func(i int) string { return fmt.Sprintf("/wp-admin/%d", i) })
	<-done
	if f := innocent.failures(); f != 0 {
		t.Errorf("innocent clients saw %d failures: %v", f, innocent.n)
	}
	if bad.failures() == 0 {
		t.Errorf("the scanner saw no failures; the WAF did not block it, so sturdy did not forward its address: %v", bad.n)
	}
	noEjections(t, s, ev)
	if !s.monitor.Attributed(scanner) {
		t.Errorf("the scanner is not attributed; events:%s", ev)
	}
	if s.monitor.Attributed("127.0.0.1") {
		t.Error("HAProxy's own address is attributed: sturdy saw HAProxy, not the clients")
	}
}

// startHAProxy runs haproxy in TCP mode on a free loopback port in front
// of target, sending PROXY v2, and stops it (by PID) when the test ends.
func startHAProxy(t *testing.T, bin, target string) string {
	t.Helper()
	front := deadAddr(t)
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global
  maxconn 512
defaults
  mode tcp
  timeout connect 2s
  timeout client 30s
  timeout server 30s
frontend fe
  bind %s
  default_backend be
backend be
  server sturdy %s send-proxy-v2
`, front, target)
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-db", "-f", path)
	cmd.Dir = dir
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("haproxy output:\n%s", out)
		}
	})
	gone := false
	listening := func() bool {
		select {
		case <-exited:
			gone = true
			return true
		default:
		}
		c, err := net.DialTimeout("tcp", front, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}
	// haproxy is a process of its own: its listening is seen by dialing.
	if !testutil.Eventually(10*time.Second, listening) {
		t.Fatalf("haproxy did not listen on %s within 10s: %s", front, out)
	}
	if gone {
		t.Fatalf("haproxy exited: %s", out)
	}
	return front
}

// h2cOnly are a client's protocols for HTTP/2 with prior knowledge.
func h2cOnly() *http.Protocols {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return p
}
