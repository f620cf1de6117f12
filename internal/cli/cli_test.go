package cli

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func run(args ...string) (code int, stdout, stderr string) {
	return runProgram(sturdy(), args...)
}

func runProgram(p *program, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = p.run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestCheckReportsEveryErrorWithFileAndLine(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "bad.yaml")
	os.WriteFile(f, []byte(`listeners:
  - { name: web, listen: 127.0.0.1:8080 }
routes:
  - { name: a, pool: nope, timeouts: { conect: 1s } }
pools:
  - { name: web, hosts: [ { addr: "10.0.0.1" } ] }
`), 0o644)
	code, _, stderr := run("check", "-c", f)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	want := f + ":4: routes[0].timeouts.conect: unknown key; did you mean \"connect\"? expected one of: client_body, client_send, connect, response_header, total\n"
	if !strings.HasPrefix(stderr, want) {
		t.Fatalf("stderr:\n%s\nwant prefix:\n%s", stderr, want)
	}
	// Decoding errors stop before validation; fix the key and the rest shows.
	os.WriteFile(f, []byte(`listeners:
  - { name: web, listen: 127.0.0.1:8080 }
routes:
  - { name: a, pool: nope }
pools:
  - { name: web, hosts: [ { addr: "10.0.0.1" } ] }
`), 0o644)
	code, _, stderr = run("validate", "-c", f)
	for _, w := range []string{
		f + `:4: routes[0].pool: no pool named "nope"; define it under pools`,
		f + `:6: pools[0].hosts[0].addr: invalid address "10.0.0.1"; expected host:port`,
		"2 error(s)",
	} {
		if code != 1 || !strings.Contains(stderr, w) {
			t.Errorf("exit %d, stderr lacks %q:\n%s", code, w, stderr)
		}
	}
}

func TestCheckWarnsButPasses(t *testing.T) {
	f := filepath.Join(t.TempDir(), "risky.yaml")
	os.WriteFile(f, []byte(`admin: { listen: "0.0.0.0:9901", token: "s3cret-token-for-tests" }
listeners: [ { name: web, listen: 127.0.0.1:8080 } ]
routes: [ { name: a, pool: web } ]
pools:
  - { name: web, max_idle_conns_per_host: 10240, hosts: [ { addr: "10.0.0.1:80" } ] }
`), 0o644)
	code, stdout, stderr := run("check", "-c", f)
	if code != 0 || !strings.Contains(stdout, "ok") {
		t.Fatalf("exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	for _, w := range []string{":1: admin.listen: the admin listener", ":3: routes: no route is default", ":5: pools[0].hosts: pool \"web\" has a single host", ":5: pools[0].max_idle_conns_per_host: 10240 idle connections"} {
		if !strings.Contains(stderr, "warning: "+f+w) {
			t.Errorf("missing warning %q in:\n%s", w, stderr)
		}
	}
}

func TestUsageAndVersion(t *testing.T) {
	if code, _, stderr := run("frobnicate"); code != 2 || !strings.Contains(stderr, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: %d %q", code, stderr)
	}
	if code, _, _ := run("check", "-nope"); code != 2 {
		t.Errorf("bad flag: exit %d", code)
	}
	if code, out, _ := run("version"); code != 0 || !strings.HasPrefix(out, "sturdy ") {
		t.Errorf("version: %d %q", code, out)
	}
	if code, out, _ := run("demo", "-print-config"); code != 0 || !strings.Contains(out, "listeners:") {
		t.Errorf("demo -print-config: %d", code)
	}
	if code, _, stderr := run("check", "-c", "/nonexistent.yaml"); code != 1 || !strings.Contains(stderr, "cannot read config") {
		t.Errorf("missing file: %d %q", code, stderr)
	}
}

// Every file in examples/ passes check, without a warning (an example is
// what users copy): sturdy's, or sturdy-gateway's for a file with a
// kubernetes section. TLS file paths are pointed at a
// certificate made here, since examples name production paths.
func TestExamplesPassCheck(t *testing.T) {
	files, _ := filepath.Glob("../../examples/*.yaml")
	if len(files) == 0 {
		t.Fatal("no examples")
	}
	cert, key := selfSigned(t)
	for _, f := range files {
		if strings.HasSuffix(f, "prometheus-alerts.yaml") {
			continue
		}
		data, _ := os.ReadFile(f)
		s := strings.ReplaceAll(string(data), "/etc/sturdy/tls/site.crt", cert)
		s = strings.ReplaceAll(s, "/etc/sturdy/tls/site.key", key)
		// check refuses a log path this user cannot write (the unit
		// makes /var/log/sturdy): point it at one it can.
		s = strings.ReplaceAll(s, "/var/log/sturdy/", t.TempDir()+"/")
		tmp := filepath.Join(t.TempDir(), filepath.Base(f))
		os.WriteFile(tmp, []byte(s), 0o644)
		p := sturdy()
		if strings.Contains(s, "\nkubernetes:") {
			p = gateway(refuseKube)
		}
		if code, _, stderr := runProgram(p, "check", "-c", tmp); code != 0 || stderr != "" {
			t.Errorf("%s: exit %d\n%s", f, code, stderr)
		}
	}
}

func selfSigned(t *testing.T) (certFile, keyFile string) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "example.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"example.com", "*.example.com"}}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	kb, _ := x509.MarshalECPrivateKey(key)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return certFile, keyFile
}
