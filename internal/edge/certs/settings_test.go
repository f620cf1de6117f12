package certs

import (
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/testing/testpki"
)

const oneSite = `
listeners:
  - name: web
    listen: 127.0.0.1:0
    tls: { cert: "{{c}}", key: "{{k}}" {{extra}} }
routes: [ { name: all, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: 127.0.0.1:9 } ] } ]
`

// oneSiteWith serves site.test with extra TLS keys and returns the
// address and a client config that trusts it.
func oneSiteWith(t *testing.T, extra string) (string, *tls.Config) {
	t.Helper()
	ca := testpki.NewCA(t, "CA")
	cert, key := ca.Write(t, t.TempDir(), "site", testpki.Leaf{DNS: []string{"site.test"}})
	c := parse(t, oneSite, map[string]string{"c": cert, "k": key, "extra": extra})
	return serve(t, NewHandle(compile(t, c)["web"])), client(ca.Pool(), "site.test")
}

func TestMinimumVersion(t *testing.T) {
	for _, tc := range []struct {
		extra      string
		max        uint16
		handshakes bool
	}{
		{"", tls.VersionTLS12, true},
		{"", tls.VersionTLS11, false},
		{`, min_version: "1.3"`, tls.VersionTLS12, false},
		{`, min_version: "1.3"`, tls.VersionTLS13, true},
	} {
		addr, cfg := oneSiteWith(t, tc.extra)
		cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS10, tc.max
		_, err := handshake(t, addr, cfg)
		if (err == nil) != tc.handshakes {
			t.Errorf("%q with a client of at most %x: err %v, want handshake %v", tc.extra, tc.max, err, tc.handshakes)
		}
	}
}

func TestCipherSuitesRestrictTLS12(t *testing.T) {
	addr, cfg := oneSiteWith(t, `, cipher_suites: [ TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 ], alpn: [ http/1.1 ]`)
	cfg.MaxVersion = tls.VersionTLS12
	cfg.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}
	if _, err := handshake(t, addr, cfg); err == nil {
		t.Error("a suite the listener does not offer was negotiated")
	}
	cfg.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}
	cs, err := handshake(t, addr, cfg)
	if err != nil || cs.CipherSuite != tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 {
		t.Errorf("got %x, %v; want the configured suite", cs.CipherSuite, err)
	}
}

func TestALPNProtocols(t *testing.T) {
	addr, cfg := oneSiteWith(t, `, alpn: [ http/1.1 ]`)
	cfg.NextProtos = []string{"h2", "http/1.1"}
	cs, err := handshake(t, addr, cfg)
	if err != nil || cs.NegotiatedProtocol != "http/1.1" {
		t.Errorf("negotiated %q, %v; want http/1.1 only", cs.NegotiatedProtocol, err)
	}
	if got, err := get(t, addr, "/", cfg, nil); err != nil || got.Proto != "HTTP/1.1" {
		t.Errorf("request went %+v, %v; want HTTP/1.1", got, err)
	}
}

// Session tickets let a client resume; turned off, every connection does a
// full handshake.
func TestSessionTickets(t *testing.T) {
	for _, tc := range []struct {
		extra  string
		resume bool
	}{{"", true}, {", session_tickets: false", false}} {
		addr, cfg := oneSiteWith(t, tc.extra)
		cfg.MaxVersion = tls.VersionTLS12 // tickets arrive in the handshake itself
		cfg.ClientSessionCache = tls.NewLRUClientSessionCache(4)
		if _, err := handshake(t, addr, cfg); err != nil {
			t.Fatal(err)
		}
		cs, err := handshake(t, addr, cfg)
		if err != nil || cs.DidResume != tc.resume {
			t.Errorf("%q: resumed %v, %v; want %v", tc.extra, cs.DidResume, err, tc.resume)
		}
	}
}

func TestCompileErrorsNameFileAndKey(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "CA")
	a, ak := ca.Write(t, dir, "a", testpki.Leaf{DNS: []string{"a.test"}})
	_, bk := ca.Write(t, dir, "b", testpki.Leaf{DNS: []string{"b.test"}})
	noNames, noNamesKey := ca.Write(t, dir, "ip", testpki.Leaf{CommonName: "ip only"})
	c := parse(t, `
listeners:
  - name: web
    listen: 127.0.0.1:0
    tls:
      certificates:
        - { cert: "{{a}}", key: "{{bk}}" }
        - { cert: /nonexistent/c.pem, key: /nonexistent/c.key }
      client_auth: { mode: require_and_verify, ca: "{{ak}}" }
  - name: web2
    listen: 127.0.0.1:0
    tls:
      certificates:
        - { cert: "{{a}}", key: "{{ak}}", default: true }
        - { cert: "{{n}}", key: "{{nk}}" }
routes: [ { name: all, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: 127.0.0.1:9 } ] } ]
`, map[string]string{"a": a, "ak": ak, "bk": bk, "n": noNames, "nk": noNamesKey})
	_, err := Compile(c, nil, os.ReadFile)
	var list config.ErrorList
	if !errors.As(err, &list) || len(list) != 4 {
		t.Fatalf("got %v; want 4 errors", err)
	}
	for i, want := range []string{
		"test.yaml:7: listeners[0].tls.certificates[0]: cannot load certificate " + a + " with key " + bk + ": tls: private key does not match public key",
		"test.yaml:8: listeners[0].tls.certificates[1]: cannot load certificate /nonexistent/c.pem with key /nonexistent/c.key: open /nonexistent/c.pem: no such file or directory",
		"test.yaml:9: listeners[0].tls.client_auth.ca: no PEM certificate in " + ak,
		"test.yaml:15: listeners[1].tls.certificates[1]: " + noNames + " has no DNS names in its SANs and is not the default",
	} {
		if !strings.HasPrefix(list[i].Error(), want) {
			t.Errorf("error %d:\n got %s\nwant %s", i, list[i], want)
		}
	}
}

// A pool's tls.cert and key are shown to backends that ask for a client
// certificate; the CA file verifies the backend.
func TestUpstreamClientCertificate(t *testing.T) {
	dir := t.TempDir()
	serverCA, clientCA := testpki.NewCA(t, "backend CA"), testpki.NewCA(t, "sturdy CA")
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(r.TLS.PeerCertificates[0].Subject.CommonName))
	}))
	backend.TLS = &tls.Config{
		Certificates: []tls.Certificate{serverCA.TLS(t, testpki.Leaf{DNS: []string{"backend.internal"}})},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    clientCA.Pool(),
	}
	backend.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	backend.StartTLS()
	defer backend.Close()
	caFile := serverCA.WriteCA(t, dir, "backend-ca.pem")
	cert, key := clientCA.Write(t, dir, "sturdy", testpki.Leaf{CommonName: "sturdy-edge", Client: true})

	try := func(u *config.UpstreamTLS) (string, error) {
		cfg, err := UpstreamConfig(u, "pools[0].tls", os.ReadFile)
		if err != nil {
			return "", err
		}
		cl := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 5 * time.Second}
		resp, err := cl.Get(backend.URL)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	got, err := try(&config.UpstreamTLS{CA: caFile, ServerName: "backend.internal", Cert: cert, Key: key})
	if err != nil || got != "sturdy-edge" {
		t.Errorf("with a client certificate: %q, %v", got, err)
	}
	if _, err := try(&config.UpstreamTLS{CA: caFile, ServerName: "backend.internal"}); err == nil {
		t.Error("without a client certificate the backend should refuse")
	}
	if _, err := UpstreamConfig(&config.UpstreamTLS{CA: caFile, Cert: cert, Key: caFile}, "pools[3].tls", os.ReadFile); err == nil || !strings.HasPrefix(err.Error(), "pools[3].tls.cert: cannot load client certificate") {
		t.Errorf("bad key: %v", err)
	}
	if _, err := UpstreamConfig(&config.UpstreamTLS{CA: key}, "pools[3].tls", os.ReadFile); err == nil || !strings.HasPrefix(err.Error(), "pools[3].tls.ca: no PEM certificate") {
		t.Errorf("bad CA: %v", err)
	}
}
