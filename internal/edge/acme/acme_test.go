package acme

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ocsp"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/edge/certs"
	"github.com/sturdyproxy/sturdy/internal/edge/forcehttps"

	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

// site is a plain and a TLS listener on loopback, as sturdy would run them
// for a config with redirect_https on the plain one and tls.acme on the
// other.
type site struct {
	plain, secure net.Listener
}

func listen(t *testing.T) site {
	t.Helper()
	var s site
	var err error
	if s.plain, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if s.secure, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.plain.Close(); s.secure.Close() })
	return s
}

func portOf(l net.Listener) int { return l.Addr().(*net.TCPAddr).Port }

// serve runs the plain listener with the challenge handler in front of the
// redirect, and the TLS listener with m as its certificate source.
func (s site) serve(t *testing.T, m *Manager, directory string) {
	t.Helper()
	c, err := config.Parse([]byte(`
acme: { agree: true, directory: "`+directory+`" }
listeners:
  - { name: http, listen: "`+s.plain.Addr().String()+`", redirect_https: {} }
  - { name: https, listen: "`+s.secure.Addr().String()+`", tls: { acme: true } }
routes: [ { name: all, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: 127.0.0.1:9 } ] } ]
`), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tl, err := certs.CompileListener(c, 1, m, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	quiet := log.New(io.Discard, "", 0)
	plain := &http.Server{Handler: m.HTTPHandler(forcehttps.Redirect(c.Listeners[0].RedirectHTTPS, http.NotFoundHandler())), ErrorLog: quiet}
	secure := &http.Server{TLSConfig: certs.NewHandle(tl).TLSConfig(), ErrorLog: quiet,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello "+r.Host) })}
	go plain.Serve(s.plain)
	go secure.ServeTLS(s.secure, "", "")
	t.Cleanup(func() { plain.Close(); secure.Close() })
}

// events collects a manager's events for the test to wait on.
type events struct {
	mu   sync.Mutex
	all  []Event
	wake chan struct{}
}

func newEvents() *events { return &events{wake: make(chan struct{}, 1)} }

func (e *events) add(ev Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *events) count(k Kind, name string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.all {
		if ev.Kind == k && ev.Name == name {
			n++
		}
	}
	return n
}

func (e *events) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var b strings.Builder
	for _, ev := range e.all {
		b.WriteString(string(ev.Kind) + " " + ev.Name)
		if ev.Err != nil {
			b.WriteString(": " + ev.Err.Error())
		}
		b.WriteString("\n")
	}
	return b.String()
}

// wait blocks until cond holds, for at most d.
func (e *events) wait(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(d)
	for !cond() {
		select {
		case <-e.wake:
		case <-deadline:
			t.Fatalf("no %s within %s; events:\n%s", what, d, e)
		}
	}
}

func newManager(t *testing.T, p *pebble, storage string, ev *events, mod func(*Options)) *Manager {
	t.Helper()
	o := Options{Directory: p.directory, Agree: true, Email: "ops@example.com", Roots: p.apiRoots, Storage: storage, OnEvent: ev.add, RenewCheck: time.Second}
	mod(&o)
	m := New(o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return m
}

// fetch does a real handshake with the TLS listener for name, verified
// against pebble's root, and returns the leaf's serial.
func fetch(t *testing.T, s site, p *pebble, name string) string {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", s.secure.Addr().String(), &tls.Config{ServerName: name, RootCAs: p.issuer})
	if err != nil {
		t.Fatalf("handshake for %s: %v", name, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func TestHTTP01IssuesThroughThePlainListener(t *testing.T) {
	s := listen(t)
	p := startPebble(t, pebbleOpts{httpPort: portOf(s.plain), tlsPort: portOf(s.secure)})
	ev := newEvents()
	storage := filepath.Join(t.TempDir(), "acme")
	m := newManager(t, p, storage, ev, func(o *Options) { o.HTTP01, o.HTTPAddr = true, s.plain.Addr().String() })
	s.serve(t, m, p.directory)
	m.SetNames([]string{"shop.test", "*.wild.test"})

	ev.wait(t, 60*time.Second, "certificate for shop.test", func() bool { return ev.count(Loaded, "shop.test") > 0 })
	if ev.count(Ordering, "shop.test") != 1 || ev.count(Obtained, "shop.test") != 1 {
		t.Errorf("want one order and one issuance:\n%s", ev)
	}
	fetch(t, s, p, "shop.test")
	if fi, err := os.Stat(storage); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("storage directory: %v %v; want mode 0700", fi.Mode(), err)
	}
	if got := m.Certificates(); len(got) != 1 || got[0].Name != "shop.test" || time.Until(got[0].NotAfter) < time.Hour {
		t.Errorf("certificates: %+v", got)
	}
	if m.Manages("*.wild.test") || m.Manages("other.test") {
		t.Error("wildcards and names not asked for are not managed")
	}
	// Every other plain request is still redirected.
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + s.plain.Addr().String() + "/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 308 {
		t.Errorf("plain request: %d, want the redirect", resp.StatusCode)
	}

	// A name no route uses any more stops being served (and renewed).
	m.SetNames(nil)
	if !testutil.Eventually(5*time.Second, func() bool { return !m.Manages("shop.test") }) {
		t.Fatal("shop.test still managed after SetNames(nil)")
	}
	if _, err := tls.Dial("tcp", s.secure.Addr().String(), &tls.Config{ServerName: "shop.test", RootCAs: p.issuer}); err == nil {
		t.Error("a name removed from the manager is still served")
	}
}

func TestTLSALPN01IssuesThroughTheTLSListener(t *testing.T) {
	s := listen(t)
	p := startPebble(t, pebbleOpts{httpPort: portOf(s.plain), tlsPort: portOf(s.secure)})
	ev := newEvents()
	m := newManager(t, p, filepath.Join(t.TempDir(), "acme"), ev, func(o *Options) { o.TLSALPN01, o.TLSAddr = true, s.secure.Addr().String() })
	s.serve(t, m, p.directory)
	// Before the certificate arrives, the name is unknown to the listener
	// (no file certificate): the handshake is refused, not answered with
	// a wrong certificate.
	if _, err := tls.Dial("tcp", s.secure.Addr().String(), &tls.Config{ServerName: "api.test", InsecureSkipVerify: true}); err == nil {
		t.Error("a handshake before issuance succeeded")
	}
	m.SetNames([]string{"api.test"})
	ev.wait(t, 60*time.Second, "certificate for api.test", func() bool { return ev.count(Loaded, "api.test") > 0 })
	fetch(t, s, p, "api.test")
}

// Certificates that live 20 seconds are renewed at about two thirds of
// their life, and new handshakes get the new one.
func TestRenewalReplacesTheCertificate(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a real renewal (about 15s)")
	}
	s := listen(t)
	p := startPebble(t, pebbleOpts{httpPort: portOf(s.plain), tlsPort: portOf(s.secure), validity: 20 * time.Second})
	ev := newEvents()
	m := newManager(t, p, filepath.Join(t.TempDir(), "acme"), ev, func(o *Options) { o.HTTP01, o.HTTPAddr = true, s.plain.Addr().String() })
	s.serve(t, m, p.directory)
	m.SetNames([]string{"short.test"})
	ev.wait(t, 60*time.Second, "first certificate", func() bool { return ev.count(Loaded, "short.test") > 0 })
	first := fetch(t, s, p, "short.test")
	ev.wait(t, 60*time.Second, "renewal", func() bool { return ev.count(Renewed, "short.test") > 0 })
	// The renewed certificate is swapped into the cache just after the event.
	if !testutil.Eventually(10*time.Second, func() bool { return fetch(t, s, p, "short.test") != first }) {
		t.Fatal("handshakes still get the first certificate after the renewal")
	}
}

// Two instances sharing one storage directory: one orders, the other
// waits on the lock and loads what the first stored. The challenge is
// answered by the first instance's plain listener whichever ordered,
// because challenge state is kept in the shared storage too.
func TestInstancesSharingStorageOrderOnce(t *testing.T) {
	a, b := listen(t), listen(t)
	p := startPebble(t, pebbleOpts{httpPort: portOf(a.plain), tlsPort: portOf(a.secure)})
	storage := filepath.Join(t.TempDir(), "shared")
	evA, evB := newEvents(), newEvents()
	ma := newManager(t, p, storage, evA, func(o *Options) { o.HTTP01, o.HTTPAddr = true, a.plain.Addr().String() })
	mb := newManager(t, p, storage, evB, func(o *Options) { o.HTTP01, o.HTTPAddr = true, a.plain.Addr().String() })
	a.serve(t, ma, p.directory)
	b.serve(t, mb, p.directory)
	ma.SetNames([]string{"shared.test"})
	mb.SetNames([]string{"shared.test"})
	evA.wait(t, 90*time.Second, "certificate in instance A", func() bool { return evA.count(Loaded, "shared.test") > 0 })
	evB.wait(t, 90*time.Second, "certificate in instance B", func() bool { return evB.count(Loaded, "shared.test") > 0 })
	if n := evA.count(Ordering, "shared.test") + evB.count(Ordering, "shared.test"); n != 1 {
		t.Errorf("%d orders for one name; want 1\nA:\n%s\nB:\n%s", n, evA, evB)
	}
	if sa, sb := fetch(t, a, p, "shared.test"), fetch(t, b, p, "shared.test"); sa != sb {
		t.Errorf("instances serve different certificates: %s and %s", sa, sb)
	}
}

// A challenge nobody answers fails the order, and the failure is reported
// with its reason and a count (the order is retried with backoff).
func TestFailureIsReported(t *testing.T) {
	s := listen(t)
	p := startPebble(t, pebbleOpts{httpPort: portOf(s.plain), tlsPort: portOf(s.secure)})
	ev := newEvents()
	m := newManager(t, p, filepath.Join(t.TempDir(), "acme"), ev, func(o *Options) { o.HTTP01, o.HTTPAddr = true, s.plain.Addr().String() })
	s.serve(t, New(Options{}), p.directory) // the listeners answer for a manager that never runs
	m.SetNames([]string{"broken.test"})
	ev.wait(t, 60*time.Second, "failure", func() bool { return ev.count(Failed, "broken.test") > 0 })
	ev.mu.Lock()
	defer ev.mu.Unlock()
	for _, e := range ev.all {
		if e.Kind == Failed && (e.Err == nil || e.Failures != 1 || e.Renewal) {
			t.Errorf("failure event: %+v", e)
		}
	}
	if m.Manages("broken.test") {
		t.Error("a name without a certificate is not managed")
	}
}

// The certificate names an OCSP responder (run here, signing with pebble's
// intermediate key): the manager fetches a response and staples it to
// every handshake.
func TestOCSPIsStapled(t *testing.T) {
	s := listen(t)
	responder, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := startPebble(t, pebbleOpts{httpPort: portOf(s.plain), tlsPort: portOf(s.secure), ocsp: "http://" + responder.Addr().String() + "/"})
	issuerCert, issuerKey := intermediate(t, p)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, err := ocsp.ParseRequest(body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		now := time.Now()
		resp, err := ocsp.CreateResponse(issuerCert, issuerCert, ocsp.Response{
			Status: ocsp.Good, SerialNumber: req.SerialNumber,
			ThisUpdate: now.Add(-time.Minute), NextUpdate: now.Add(time.Hour),
		}, issuerKey)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.Header().Set("Content-Type", "application/ocsp-response")
		w.Write(resp)
	})}
	go srv.Serve(responder)
	t.Cleanup(func() { srv.Close() })

	ev := newEvents()
	m := newManager(t, p, filepath.Join(t.TempDir(), "acme"), ev, func(o *Options) { o.HTTP01, o.HTTPAddr = true, s.plain.Addr().String() })
	s.serve(t, m, p.directory)
	m.SetNames([]string{"stapled.test"})
	ev.wait(t, 60*time.Second, "certificate", func() bool { return ev.count(Loaded, "stapled.test") > 0 })

	c, err := tls.Dial("tcp", s.secure.Addr().String(), &tls.Config{ServerName: "stapled.test", RootCAs: p.issuer})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cs := c.ConnectionState()
	if len(cs.OCSPResponse) == 0 {
		t.Fatal("no OCSP response stapled")
	}
	resp, err := ocsp.ParseResponseForCert(cs.OCSPResponse, cs.PeerCertificates[0], issuerCert)
	if err != nil || resp.Status != ocsp.Good {
		t.Errorf("staple: %v %v", resp, err)
	}
}

// intermediate fetches pebble's issuing certificate and its key.
func intermediate(t *testing.T, p *pebble) (*x509.Certificate, crypto.Signer) {
	t.Helper()
	blk, _ := pem.Decode(p.get(t, "/intermediates/0"))
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	kblk, _ := pem.Decode(p.get(t, "/intermediate-keys/0"))
	var key any
	if key, err = x509.ParsePKCS1PrivateKey(kblk.Bytes); err != nil {
		if key, err = x509.ParsePKCS8PrivateKey(kblk.Bytes); err != nil {
			if key, err = x509.ParseECPrivateKey(kblk.Bytes); err != nil {
				t.Fatalf("pebble's intermediate key (%s): %v", kblk.Type, err)
			}
		}
	}
	return cert, key.(crypto.Signer)
}

// Without a RenewCheck of the test's, the manager looks for renewals on
// a schedule derived from the certificates it holds, not every 10
// minutes: a 20-second certificate is renewed before it expires, and
// handshakes are answered throughout.
func TestRenewalScheduleFollowsTheLifetime(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a real renewal (about 25s)")
	}
	s := listen(t)
	p := startPebble(t, pebbleOpts{httpPort: portOf(s.plain), tlsPort: portOf(s.secure), validity: 20 * time.Second})
	ev := newEvents()
	m := newManager(t, p, filepath.Join(t.TempDir(), "acme"), ev, func(o *Options) {
		o.HTTP01, o.HTTPAddr = true, s.plain.Addr().String()
		o.RenewCheck = 0 // the default, 10 minutes
	})
	s.serve(t, m, p.directory)
	m.SetNames([]string{"short.test"})
	ev.wait(t, 60*time.Second, "first certificate", func() bool { return ev.count(Loaded, "short.test") > 0 })
	first := fetch(t, s, p, "short.test")
	deadline := time.Now().Add(19 * time.Second)
	for fetch(t, s, p, "short.test") == first {
		if time.Now().After(deadline) {
			t.Fatalf("the 20s certificate was not replaced within 19s of the first handshake (renewed events: %d)", ev.count(Renewed, "short.test"))
		}
		// real: pebble, a process of its own, issues a certificate that
		// expires on the real clock; a handshake every 200ms shows they
		// are answered throughout the renewal.
		time.Sleep(200 * time.Millisecond)
	}
}
