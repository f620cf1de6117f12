package acme

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/edge/certs"
	"github.com/sturdyproxy/sturdy/internal/testing/testpki"
)

func parseACME(t *testing.T, storage, caRoot string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(`
acme: { agree: true, email: ops@example.com, storage: "`+storage+`", ca_root: "`+caRoot+`", challenges: [ tls-alpn-01 ] }
listeners:
  - { name: alt, listen: "127.0.0.1:8080" }
  - { name: http, listen: "0.0.0.0:80", redirect_https: {} }
  - { name: tls-other, listen: "127.0.0.1:8443", tls: { acme: true } }
  - { name: https, listen: "0.0.0.0:443", tls: { acme: true } }
routes: [ { name: all, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: 127.0.0.1:9 } ] } ]
`), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCompileOptions(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "private ACME CA").WriteCA(t, dir, "root.pem")
	o, err := Compile(parseACME(t, filepath.Join(dir, "acme"), ca), os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	if o.Directory != config.DefaultACMEDirectory || !o.Agree || o.Roots == nil || o.HTTP01 || !o.TLSALPN01 {
		t.Errorf("options: %+v", o)
	}
	if o.HTTPAddr != "0.0.0.0:80" || o.TLSAddr != "0.0.0.0:443" {
		t.Errorf("challenge listeners %q %q; want the ones on 80 and 443", o.HTTPAddr, o.TLSAddr)
	}
	if _, err := os.Stat(filepath.Join(dir, "acme")); !errors.Is(err, os.ErrNotExist) {
		t.Error("Compile (and so sturdy check) must not create the storage directory")
	}
}

func TestCompileRefusesOpenStorageAndBadRoots(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o755)
	os.Chmod(open, 0o755)
	ca := testpki.NewCA(t, "CA").WriteCA(t, dir, "root.pem")
	_, err := Compile(parseACME(t, open, ca), os.ReadFile)
	if err == nil || !strings.Contains(err.Error(), "acme.storage: "+open+" is open to other users (mode 0755) and will hold private keys; run chmod 700 "+open) {
		t.Errorf("open storage: %v", err)
	}
	_, err = Compile(parseACME(t, filepath.Join(dir, "acme"), filepath.Join(dir, "missing.pem")), os.ReadFile)
	if err == nil || !strings.Contains(err.Error(), "test.yaml:2: acme.ca_root: cannot read the CA file") {
		t.Errorf("missing root: %v", err)
	}
}

func TestUrgent(t *testing.T) {
	day := 24 * time.Hour
	for _, tc := range []struct {
		ev   Event
		want bool
	}{
		{Event{Kind: Failed, Renewal: true, Failures: 3, Remaining: 6 * day}, true},
		{Event{Kind: Failed, Renewal: true, Failures: 2, Remaining: 6 * day}, false},
		{Event{Kind: Failed, Renewal: true, Failures: 9, Remaining: 20 * day}, false},
		{Event{Kind: Failed, Renewal: false, Failures: 9}, false},
		{Event{Kind: Renewed, Renewal: true, Failures: 0, Remaining: day}, false},
	} {
		if got := tc.ev.Urgent(); got != tc.want {
			t.Errorf("%+v: urgent %v", tc.ev, got)
		}
	}
}

func TestNamesForAndWarnings(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "CA")
	cert, key := ca.Write(t, dir, "shop", testpki.Leaf{DNS: []string{"shop.test"}})
	c, err := config.Parse([]byte(`
acme: { agree: true, challenges: [ http-01 ] }
listeners:
  - { name: https, listen: "127.0.0.1:0", tls: { acme: true, certificates: [ { cert: "`+cert+`", key: "`+key+`" } ] } }
  - { name: files, listen: "127.0.0.1:0", tls: { cert: "`+cert+`", key: "`+key+`" } }
routes:
  - { name: shop, hosts: [ shop.test, blog.test, "*.cdn.test" ], pool: web }
  - { name: api, hosts: [ api.test, blog.test ], pool: web, listeners: [ https ] }
  - { name: internal, hosts: [ internal.test ], pool: web, listeners: [ files ] }
pools: [ { name: web, hosts: [ { addr: 127.0.0.1:9 } ] } ]
`), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ls, err := certs.Compile(c, New(Options{}), os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	if got := NamesFor(c, ls); strings.Join(got, " ") != "api.test blog.test" {
		t.Errorf("names: %v; want the uncovered exact hosts of the acme listener", got)
	}
	var msgs []string
	for _, w := range Warnings(c) {
		msgs = append(msgs, w.Error())
	}
	want := []string{
		"test.yaml:2: acme: no email: the CA cannot warn you before a certificate expires if renewal keeps failing; set acme.email",
		"test.yaml:2: acme.challenges: no challenge can be answered: http-01 needs a plain listener (port 80 for a public CA), tls-alpn-01 the TLS listener (port 443)",
	}
	if strings.Join(msgs, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s", strings.Join(msgs, "\n"))
	}
}
