package certs

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/testing/testpki"
)

type mtlsSetup struct {
	addr       string
	server     *testpki.CA
	good, evil tls.Certificate
}

func mtls(t *testing.T, mode string) mtlsSetup {
	t.Helper()
	dir := t.TempDir()
	serverCA, clientCA, otherCA := testpki.NewCA(t, "server CA"), testpki.NewCA(t, "client CA"), testpki.NewCA(t, "other CA")
	cert, key := serverCA.Write(t, dir, "site", testpki.Leaf{DNS: []string{"site.test"}})
	extra := `, client_auth: { mode: ` + mode + ` }`
	if mode == "verify_if_given" || mode == "require_and_verify" {
		extra = `, client_auth: { mode: ` + mode + `, ca: "` + clientCA.WriteCA(t, dir, "clients.pem") + `" }`
	}
	c := parse(t, oneSite, map[string]string{"c": cert, "k": key, "extra": extra})
	return mtlsSetup{
		addr:   serve(t, NewHandle(compile(t, c)["web"])),
		server: serverCA,
		good:   clientCA.TLS(t, testpki.Leaf{CommonName: "alice", Org: "Example Ops", Client: true}),
		evil:   otherCA.TLS(t, testpki.Leaf{CommonName: "alice", Org: "Example Ops", Client: true}),
	}
}

func (m mtlsSetup) as(cert *tls.Certificate) *tls.Config {
	cfg := client(m.server.Pool(), "site.test")
	if cert != nil {
		// Always send it: Go's client would leave out a certificate that
		// the server's list of acceptable CAs does not name.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	return cfg
}

func fingerprint(c tls.Certificate) string {
	sum := sha256.Sum256(c.Certificate[0])
	return hex.EncodeToString(sum[:])
}

func TestRequireAndVerifyRefusesOthers(t *testing.T) {
	m := mtls(t, "require_and_verify")
	if _, err := get(t, m.addr, "/", m.as(nil), nil); err == nil {
		t.Error("a client without a certificate was let in")
	}
	if _, err := get(t, m.addr, "/", m.as(&m.evil), nil); err == nil {
		t.Error("a certificate from another CA was let in")
	}
	got, err := get(t, m.addr, "/admin", m.as(&m.good), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := seen{Subject: "CN=alice,O=Example Ops", Fingerprint: fingerprint(m.good), Verified: "true", Proto: "HTTP/2.0"}
	if got != want {
		t.Errorf("backend saw %+v\nwant %+v", got, want)
	}
}

// verify_if_given lets clients without a certificate in, and the route's
// requirement keeps them out of /admin.
func TestVerifyIfGivenWithRouteRequirement(t *testing.T) {
	m := mtls(t, "verify_if_given")
	got, err := get(t, m.addr, "/", m.as(nil), nil)
	if err != nil || got != (seen{Proto: "HTTP/2.0"}) {
		t.Errorf("no certificate, open route: %+v %v", got, err)
	}
	got, _ = get(t, m.addr, "/admin", m.as(nil), nil)
	if got.Refused != ErrNoClientCert.Error() {
		t.Errorf("no certificate on /admin: refused %q, want %q", got.Refused, ErrNoClientCert)
	}
	if _, err := get(t, m.addr, "/", m.as(&m.evil), nil); err == nil {
		t.Error("a certificate that is given is verified: another CA's must fail the handshake")
	}
	got, err = get(t, m.addr, "/admin", m.as(&m.good), nil)
	if err != nil || got.Refused != "" || got.Verified != "true" || got.Subject != "CN=alice,O=Example Ops" {
		t.Errorf("verified certificate on /admin: %+v %v", got, err)
	}
}

// In request mode any certificate is accepted but none is verified: the
// backend gets the fingerprint and Verified: false, never a subject, and a
// route that requires a verified certificate refuses.
func TestRequestModePassesUnverifiedFingerprintOnly(t *testing.T) {
	m := mtls(t, "request")
	got, err := get(t, m.addr, "/admin", m.as(&m.evil), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := seen{Fingerprint: fingerprint(m.evil), Verified: "false", Refused: ErrUnverified.Error(), Proto: "HTTP/2.0"}
	if got != want {
		t.Errorf("backend saw %+v\nwant %+v", got, want)
	}
	if _, err := get(t, m.addr, "/", m.as(nil), nil); err != nil {
		t.Errorf("request mode lets clients without certificates in: %v", err)
	}
}

func TestRequireModeNeedsAnyCertificate(t *testing.T) {
	m := mtls(t, "require")
	if _, err := get(t, m.addr, "/", m.as(nil), nil); err == nil {
		t.Error("require let a client without a certificate in")
	}
	if got, err := get(t, m.addr, "/", m.as(&m.evil), nil); err != nil || got.Verified != "false" {
		t.Errorf("require takes any certificate: %+v %v", got, err)
	}
}

// Identity headers sent by clients never reach the backend: not without a
// certificate, not with one, not on a plain listener.
func TestIdentityHeadersNotSpoofable(t *testing.T) {
	forged := http.Header{
		HeaderSubject:     {"CN=root,O=Example Ops"},
		HeaderFingerprint: {"00"},
		HeaderVerified:    {"true"},
	}
	m := mtls(t, "verify_if_given")
	got, err := get(t, m.addr, "/", m.as(nil), forged)
	if err != nil || got.Subject != "" || got.Fingerprint != "" || got.Verified != "" {
		t.Errorf("without a certificate the forged headers reached the backend: %+v %v", got, err)
	}
	got, err = get(t, m.addr, "/", m.as(&m.good), forged)
	if err != nil || got.Subject != "CN=alice,O=Example Ops" || got.Fingerprint != fingerprint(m.good) {
		t.Errorf("with a certificate the backend saw %+v %v", got, err)
	}

	// A plain listener: no TLS at all.
	r := httptest.NewRequest("GET", "http://site.test/", nil)
	r.Header = forged.Clone()
	out := r.Header.Clone()
	SetIdentity(out, r)
	if len(out) != 0 {
		t.Errorf("plain request kept %v", out)
	}
}

// A route without a requirement pays nothing; with one, and an identity
// kept per connection, neither the check nor the headers allocate per
// request.
func TestRequestPathAllocatesNothing(t *testing.T) {
	ca := testpki.NewCA(t, "CA")
	c := ca.TLS(t, testpki.Leaf{CommonName: "alice", Client: true})
	r := httptest.NewRequest("GET", "https://site.test/", nil)
	r = r.WithContext(ConnContext(r.Context(), nil))
	r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{c.Leaf}, VerifiedChains: [][]*x509.Certificate{{c.Leaf}}}
	out := http.Header{"Accept": {"*/*"}}
	SetIdentity(out, r) // the first request of the connection computes
	allocs := testing.AllocsPerRun(100, func() {
		if NoRequirement.Check(r) != nil || RequireVerified.Check(r) != nil {
			t.Fatal("refused")
		}
		SetIdentity(out, r)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per request", allocs)
	}
	if out.Get(HeaderSubject) != "CN=alice" || out.Get(HeaderVerified) != "true" {
		t.Errorf("headers: %v", out)
	}
}

func TestSubjectControlBytesEscaped(t *testing.T) {
	if got := headerSafe("CN=a\r\nX-Evil: 1"); got != `CN=a\x0d\x0aX-Evil: 1` {
		t.Errorf("got %q", got)
	}
}

// Sessions resume across a reload, except on a listener that verifies
// client certificates: the CA may have changed, and a resumed session
// would skip the check.
func TestTicketsAcrossReload(t *testing.T) {
	dir := t.TempDir()
	serverCA, clientCA := testpki.NewCA(t, "server CA"), testpki.NewCA(t, "client CA")
	cert, key := serverCA.Write(t, dir, "site", testpki.Leaf{DNS: []string{"site.test"}})
	caFile := clientCA.WriteCA(t, dir, "clients.pem")
	good := clientCA.TLS(t, testpki.Leaf{CommonName: "alice", Client: true})
	for _, tc := range []struct {
		extra  string
		resume bool
	}{
		{"", true},
		{`, client_auth: { mode: verify_if_given, ca: "` + caFile + `" }`, false},
	} {
		c := parse(t, oneSite, map[string]string{"c": cert, "k": key, "extra": tc.extra})
		h := NewHandle(compile(t, c)["web"])
		addr := serve(t, h)
		cfg := client(serverCA.Pool(), "site.test")
		cfg.MaxVersion = tls.VersionTLS12
		cfg.ClientSessionCache = tls.NewLRUClientSessionCache(4)
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &good, nil }
		if _, err := handshake(t, addr, cfg); err != nil {
			t.Fatal(err)
		}
		if cs, err := handshake(t, addr, cfg); err != nil || !cs.DidResume {
			t.Fatalf("%q: no resumption before the reload: %v", tc.extra, err)
		}
		h.Swap(compile(t, c)["web"])
		cs, err := handshake(t, addr, cfg)
		if err != nil || cs.DidResume != tc.resume {
			t.Errorf("%q: resumed across the reload %v, %v; want %v", tc.extra, cs.DidResume, err, tc.resume)
		}
	}
}
