package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/testpki"
)

const threeSitesConfig = `
admin: { listen: "off" }
listeners:
  - name: https
    listen: "127.0.0.1:0"
    tls:
      certificates:
        - { cert: "{{acert}}", key: "{{akey}}" }
        - { cert: "{{bcert}}", key: "{{bkey}}" }
        - { cert: "{{ccert}}", key: "{{ckey}}" }
      client_auth: { mode: verify_if_given, ca: "{{clientca}}" }
      hsts: { max_age: 1h }
  - name: http
    listen: "127.0.0.1:0"
    redirect_https: { status: 301, port: 8443 }
routes:
  - { name: a, hosts: [a.test], pool: web, listeners: [https] }
  - { name: b, hosts: [b.test], pool: web, listeners: [https] }
  - { name: admin, hosts: [c.test], path: /admin/, pool: web, client_cert: required, listeners: [https] }
  - { name: c, hosts: [c.test], pool: web, listeners: [https] }
pools:
  - { name: web, hosts: [ { addr: "{{b}}" } ] }
`

// One TLS listener serves three sites, each with its own certificate
// chosen by SNI; a route can require a verified client certificate whose
// identity reaches the backend unspoofable; a plain listener redirects to
// HTTPS; certificates are swapped by a reload on the same socket.
func TestThreeSitesOnOneTLSListener(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testpki.NewCA(t, "sites CA")
	clients := testpki.NewCA(t, "clients CA")
	vars := map[string]string{"clientca": clients.WriteCA(t, dir, "clients.pem")}
	for _, site := range []string{"a", "b", "c"} {
		vars[site+"cert"], vars[site+"key"] = ca.Write(t, dir, site, testpki.Leaf{DNS: []string{site + ".test"}})
	}
	var seen http.Header
	b := backend(t, "127.1.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		io.WriteString(w, "site "+r.Host)
	}))
	vars["b"] = addr(b)
	s, _, _ := startSturdy(t, parseConfig(t, threeSitesConfig, vars))
	https := s.Addr("https")

	// get asks for path on host over TLS (SNI host), with cert if given.
	get := func(host, path string, cert *tls.Certificate, hdr ...string) (*http.Response, string) {
		t.Helper()
		tc := &tls.Config{RootCAs: ca.Pool(), ServerName: host}
		if cert != nil {
			tc.Certificates = []tls.Certificate{*cert}
		}
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: tc, ForceAttemptHTTP2: true,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "tcp", https)
			},
		}}
		req, _ := http.NewRequest("GET", "https://"+host+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET https://%s%s: %v", host, path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(body)
	}
	for _, site := range []string{"a", "b", "c"} {
		conn, err := tls.Dial("tcp", https, &tls.Config{ServerName: site + ".test", RootCAs: ca.Pool()})
		if err != nil {
			t.Fatalf("%s.test: %v", site, err)
		}
		got := conn.ConnectionState().PeerCertificates[0].DNSNames
		conn.Close()
		if len(got) != 1 || got[0] != site+".test" {
			t.Errorf("SNI %s.test got the certificate for %v", site, got)
		}
		resp, body := get(site+".test", "/", nil)
		if resp.StatusCode != 200 || body != "site "+site+".test" || resp.ProtoMajor != 2 {
			t.Errorf("%s.test: %d %q over %s", site, resp.StatusCode, body, resp.Proto)
		}
		if got := resp.Header.Get("Strict-Transport-Security"); got != "max-age=3600" {
			t.Errorf("HSTS %q", got)
		}
	}
	// No SNI: the default (first) certificate.
	conn, err := tls.Dial("tcp", https, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := conn.ConnectionState().PeerCertificates[0].DNSNames[0]; got != "a.test" {
		t.Errorf("no SNI got %s, want the default a.test", got)
	}

	// The admin path needs a verified client certificate.
	if resp, body := get("c.test", "/admin/x", nil, "X-Client-Cert-Subject", "CN=forged"); resp.StatusCode != 403 || !strings.Contains(body, "client certificate") {
		t.Errorf("admin without a certificate: %d %q", resp.StatusCode, body)
	}
	cert := clients.TLS(t, testpki.Leaf{CommonName: "ops-laptop", Client: true})
	if resp, _ := get("c.test", "/admin/x", &cert, "X-Client-Cert-Subject", "CN=forged"); resp.StatusCode != 200 {
		t.Fatalf("admin with a verified certificate: %d", resp.StatusCode)
	}
	if seen.Get("X-Client-Cert-Verified") != "true" || !strings.Contains(seen.Get("X-Client-Cert-Subject"), "ops-laptop") || len(seen.Get("X-Client-Cert-Fingerprint")) != 64 {
		t.Errorf("identity headers upstream: %v", seen)
	}
	if get("c.test", "/", nil, "X-Client-Cert-Subject", "CN=forged"); seen.Get("X-Client-Cert-Subject") != "" {
		t.Errorf("a client's own X-Client-Cert-Subject reached the backend: %q", seen.Get("X-Client-Cert-Subject"))
	}

	// The plain listener sends everyone to HTTPS, path and query kept.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("GET", "http://"+s.Addr("http")+"/shop?item=7", nil)
	req.Host = "b.test"
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 301 || resp.Header.Get("Location") != "https://b.test:8443/shop?item=7" {
		t.Errorf("redirect: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}

	// A reload with a new certificate for b.test: the socket stays, the
	// open connection keeps working, a new handshake gets the new one.
	ca2 := testpki.NewCA(t, "sites CA 2")
	vars["bcert"], vars["bkey"] = ca2.Write(t, dir, "b2", testpki.Leaf{DNS: []string{"b.test"}})
	if err := s.Reload(parseConfig(t, threeSitesConfig, vars)); err != nil {
		t.Fatal(err)
	}
	if s.Addr("https") != https {
		t.Fatal("the TLS listener was re-bound on reload")
	}
	nc, err := tls.Dial("tcp", https, &tls.Config{ServerName: "b.test", RootCAs: ca2.Pool()})
	if err != nil {
		t.Fatalf("b.test after the reload: %v", err)
	}
	nc.Close()
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
	line, _ := bufio.NewReader(conn).ReadString('\n')
	conn.Close()
	if !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Errorf("the connection opened before the reload: %q", line)
	}
}
