package certs

import (
	"bufio"
	"crypto/tls"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/testpki"
)

const threeSites = `
listeners:
  - name: https
    listen: 127.0.0.1:0
    tls:
      unknown_sni: {{unknown}}
      certificates:
        - { cert: "{{a}}", key: "{{ak}}" }
        - { cert: "{{b}}", key: "{{bk}}", default: true }
        - { cert: "{{c}}", key: "{{ck}}" }
routes:
  - { name: a, hosts: [ a.test ], pool: web }
  - { name: b, hosts: [ b.test ], pool: web }
  - { name: c, hosts: [ "*.c.test" ], pool: web }
pools: [ { name: web, hosts: [ { addr: 127.0.0.1:9 } ] } ]
`

type site struct {
	ca   *testpki.CA
	vars map[string]string
}

func threeCerts(t *testing.T, unknown string) site {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "sites CA")
	v := map[string]string{"unknown": unknown}
	v["a"], v["ak"] = ca.Write(t, dir, "a", testpki.Leaf{DNS: []string{"a.test", "www.a.test"}})
	v["b"], v["bk"] = ca.Write(t, dir, "b", testpki.Leaf{DNS: []string{"b.test"}})
	v["c"], v["ck"] = ca.Write(t, dir, "c", testpki.Leaf{DNS: []string{"*.c.test"}})
	return site{ca, v}
}

// Three sites with three certificates on one listener: each client gets
// the certificate for the name it asked for, verified by a real client.
func TestThreeSitesEachGetTheirOwnCertificate(t *testing.T) {
	s := threeCerts(t, "default")
	ls := compile(t, parse(t, threeSites, s.vars))
	addr := serve(t, NewHandle(ls["https"]))
	for name, want := range map[string]string{
		"a.test": "a.test", "www.a.test": "a.test", "b.test": "b.test",
		"shop.c.test": "*.c.test", "SHOP.C.TEST": "*.c.test", "a.test.": "a.test",
	} {
		cfg := client(s.ca.Pool(), name)
		cfg.NextProtos = []string{"h2", "http/1.1"}
		cs, err := handshake(t, addr, cfg)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := leafNames(cs); got[0] != want {
			t.Errorf("%s got the certificate for %v, want %s", name, got, want)
		}
		if cs.NegotiatedProtocol != "h2" {
			t.Errorf("%s: ALPN %q, want h2 by default", name, cs.NegotiatedProtocol)
		}
	}
	// A wildcard stands for one label only.
	cfg := client(s.ca.Pool(), "a.b.c.test")
	cfg.InsecureSkipVerify = true
	cs, err := handshake(t, addr, cfg)
	if err != nil || leafNames(cs)[0] != "b.test" {
		t.Errorf("a.b.c.test: %v %v; want the default (b.test)", leafNames(cs), err)
	}
	if got, err := get(t, addr, "/", client(s.ca.Pool(), "b.test"), nil); err != nil || got.Proto != "HTTP/2.0" {
		t.Errorf("request: %+v %v", got, err)
	}
}

func TestNoOrUnknownSNIGetsTheDefault(t *testing.T) {
	s := threeCerts(t, "default")
	addr := serve(t, NewHandle(compile(t, parse(t, threeSites, s.vars))["https"]))
	// Dialing an IP address with no ServerName sends no SNI.
	for _, name := range []string{"", "unknown.test"} {
		cs, err := handshake(t, addr, &tls.Config{ServerName: name, InsecureSkipVerify: true})
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		if got := leafNames(cs); got[0] != "b.test" {
			t.Errorf("%q got %v, want the default b.test", name, got)
		}
	}
}

func TestUnknownSNIRefusedWhenConfigured(t *testing.T) {
	s := threeCerts(t, "refuse")
	addr := serve(t, NewHandle(compile(t, parse(t, threeSites, s.vars))["https"]))
	for _, name := range []string{"", "unknown.test"} {
		_, err := handshake(t, addr, &tls.Config{ServerName: name, InsecureSkipVerify: true})
		if err == nil || !strings.Contains(err.Error(), "unrecognized name") {
			t.Errorf("%q: %v; want the handshake refused with unrecognized_name", name, err)
		}
	}
	if _, err := handshake(t, addr, client(s.ca.Pool(), "a.test")); err != nil {
		t.Errorf("a known name is still served: %v", err)
	}
}

// The first form of the config, tls: {cert, key}, is one certificate that
// is also the default.
func TestSingleCertificateFormStillWorks(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "CA")
	cert, key := ca.Write(t, dir, "one", testpki.Leaf{DNS: []string{"one.test"}})
	c := parse(t, `
listeners: [ { name: web, listen: 127.0.0.1:0, tls: { cert: "{{c}}", key: "{{k}}" } } ]
routes: [ { name: all, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: 127.0.0.1:9 } ] } ]
`, map[string]string{"c": cert, "k": key})
	addr := serve(t, NewHandle(compile(t, c)["web"]))
	for _, name := range []string{"one.test", ""} {
		cfg := client(ca.Pool(), name)
		cfg.InsecureSkipVerify = name == ""
		if cs, err := handshake(t, addr, cfg); err != nil || leafNames(cs)[0] != "one.test" {
			t.Errorf("%q: %v %v", name, leafNames(cs), err)
		}
	}
}

// A reload swaps certificates while a connection stays open across it: the
// open connection keeps serving with the certificate it got, new
// connections get the new one, and the socket never closes.
func TestReloadSwapsCertificatesWithAConnectionOpen(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "CA")
	text := `
listeners: [ { name: web, listen: 127.0.0.1:0, tls: { cert: "{{c}}", key: "{{k}}", alpn: [ http/1.1 ] } } ]
routes: [ { name: all, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: 127.0.0.1:9 } ] } ]
`
	oldCert, oldKey := ca.Write(t, dir, "old", testpki.Leaf{DNS: []string{"site.test"}, Org: "old"})
	h := NewHandle(compile(t, parse(t, text, map[string]string{"c": oldCert, "k": oldKey}))["web"])
	addr := serve(t, h)

	conn, err := tls.Dial("tcp", addr, client(ca.Pool(), "site.test"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	roundTrip := func() {
		t.Helper()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		conn.Write([]byte("GET / HTTP/1.1\r\nHost: site.test\r\n\r\n"))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request on the open connection: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	roundTrip()

	newCert, newKey := ca.Write(t, dir, "new", testpki.Leaf{DNS: []string{"site.test"}, Org: "new"})
	h.Swap(compile(t, parse(t, text, map[string]string{"c": newCert, "k": newKey}))["web"])

	roundTrip() // the connection opened before the swap still works
	if org := conn.ConnectionState().PeerCertificates[0].Subject.Organization; !slices.Equal(org, []string{"old"}) {
		t.Errorf("open connection now shows %v; it keeps the certificate it got", org)
	}
	cs, err := handshake(t, addr, client(ca.Pool(), "site.test"))
	if err != nil {
		t.Fatal(err)
	}
	if org := cs.PeerCertificates[0].Subject.Organization; !slices.Equal(org, []string{"new"}) {
		t.Errorf("new connection got %v, want the new certificate", org)
	}
}

// openssl, a client that is not Go, sees the same choice by SNI.
func TestOpensslSeesCertificatePerName(t *testing.T) {
	bin, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl not installed (apt-get install -y openssl); Go clients cover the same ground")
	}
	s := threeCerts(t, "default")
	addr := serve(t, NewHandle(compile(t, parse(t, threeSites, s.vars))["https"]))
	caFile := s.ca.WriteCA(t, t.TempDir(), "ca.pem")
	for name, want := range map[string]string{"a.test": "CN = a.test", "shop.c.test": "CN = *.c.test", "b.test": "CN = b.test"} {
		cmd := exec.Command(bin, "s_client", "-connect", addr, "-servername", name, "-CAfile", caFile, "-verify_return_error", "-brief")
		cmd.Stdin = strings.NewReader("")
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v\n%s", name, err, out)
			continue
		}
		if !strings.Contains(string(out), "Peer certificate: "+want+"\n") || !strings.Contains(string(out), "Verification: OK") {
			t.Errorf("%s: want %s in\n%s", name, want, out)
		}
	}
}

func TestLookupTable(t *testing.T) {
	a := &Cert{Names: []string{"a.test", "*.a.test"}, Default: true}
	b := &Cert{Names: []string{"b.a.test"}}
	s := newStore([]*Cert{a, b}, false, nil)
	for name, want := range map[string]*Cert{
		"a.test": a, "x.a.test": a, "b.a.test": b, "B.A.Test.": b, "x.y.a.test": a /* default */, "": a,
	} {
		if got := s.Lookup(name); got != want {
			t.Errorf("%q: got %v", name, got)
		}
	}
	if s.Covers("x.y.a.test") || !s.Covers("x.a.test") || !s.Covers("B.a.test") {
		t.Error("Covers: a wildcard covers one label")
	}
	r := newStore([]*Cert{a, b}, true, nil)
	if r.Lookup("unknown.test") != nil || r.Lookup("") != nil || r.Lookup("a.test") != a {
		t.Error("refuse: unknown names get nothing")
	}
}
