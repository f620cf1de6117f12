package acme

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/testpki"
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
	o, err := Compile(parseACME(t, filepath.Join(dir, "acme"), ca))
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
	_, err := Compile(parseACME(t, open, ca))
	if err == nil || !strings.Contains(err.Error(), "acme.storage: "+open+" is open to other users (mode 0755) and will hold private keys; run chmod 700 "+open) {
		t.Errorf("open storage: %v", err)
	}
	_, err = Compile(parseACME(t, filepath.Join(dir, "acme"), filepath.Join(dir, "missing.pem")))
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
