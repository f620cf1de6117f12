package config

import (
	"slices"
	"testing"
)

// The TLS keys load without touching any file (the files named here do not
// exist), and what is left out gets the documented defaults.
func TestTLSDefaultsWithoutReadingFiles(t *testing.T) {
	c, err := Parse([]byte(`
acme: { agree: true, email: ops@example.com }
listeners:
  - { name: plain, listen: 127.0.0.1:8080, redirect_https: {} }
  - name: https
    listen: 127.0.0.1:8443
    tls:
      certificates:
        - { cert: /nonexistent/a.pem, key: /nonexistent/a.key, names: [ A.Example.COM ] }
      acme: true
      client_auth: { mode: require_and_verify, ca: /nonexistent/ca.pem }
      hsts: {}
  - { name: legacy, listen: 127.0.0.1:8444, tls: { cert: /nonexistent/c.pem, key: /nonexistent/c.key } }
routes: [ { name: site, default: true, pool: web }, { name: admin, path: /admin/, pool: web, client_cert: required } ]
pools: [ { name: web, hosts: [ { addr: 127.0.0.1:9001 } ], tls: { cert: /nonexistent/client.pem, key: /nonexistent/client.key } } ]
`), "inline")
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Listeners[0].RedirectHTTPS; r.Status != DefaultRedirectCode || r.Port != DefaultRedirectPort {
		t.Errorf("redirect defaults: %+v", r)
	}
	tl := c.Listeners[1].TLS
	if tl.MinVersion != "1.2" || tl.UnknownSNI != "default" || !slices.Equal(tl.ALPN, []string{"h2", "http/1.1"}) || tl.SessionTickets != nil {
		t.Errorf("tls defaults: %+v", tl)
	}
	if tl.HSTS.MaxAge.D() != DefaultHSTSMaxAge || tl.HSTS.IncludeSubdomains || tl.HSTS.Preload {
		t.Errorf("hsts defaults: %+v", tl.HSTS)
	}
	if tl.Certificates[0].Names[0] != "a.example.com" {
		t.Errorf("names are lower-cased: %q", tl.Certificates[0].Names[0])
	}
	if !tl.ClientAuth.VerifiesClients() || c.Listeners[2].TLS.ClientAuth.Mode != ClientAuthNone {
		t.Errorf("client auth: %+v / %+v", tl.ClientAuth, c.Listeners[2].TLS.ClientAuth)
	}
	if c.Routes[0].ClientCert != ClientCertNone || c.Routes[1].ClientCert != ClientCertRequired {
		t.Errorf("client_cert: %q %q", c.Routes[0].ClientCert, c.Routes[1].ClientCert)
	}
	if a := c.ACME; a.Directory != DefaultACMEDirectory || a.Storage != DefaultACMEStorage || !slices.Equal(a.Challenges, []string{"http-01", "tls-alpn-01"}) {
		t.Errorf("acme defaults: %+v", a)
	}
}

func TestCipherSuiteNames(t *testing.T) {
	if id, err := CipherSuite("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"); err != nil || id == 0 {
		t.Errorf("a secure TLS 1.2 suite: %v %v", id, err)
	}
	for _, bad := range []string{"TLS_RSA_WITH_RC4_128_SHA", "TLS_AES_256_GCM_SHA384", "ECDHE-RSA-AES128-GCM-SHA256", ""} {
		if _, err := CipherSuite(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
