package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/testpki"
)

// check reads the certificate files: one that cannot load is an error
// with file, line and key; certificates that load get their warnings.
func TestCheckLoadsCertificates(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "CA")
	cert, key := ca.Write(t, dir, "shop", testpki.Leaf{DNS: []string{"shop.test"}, NotBefore: time.Now().AddDate(0, -2, 0), NotAfter: time.Now().AddDate(0, 0, 5)})
	f := filepath.Join(dir, "sturdy.yaml")
	write := func(certFile string) {
		os.WriteFile(f, []byte(`listeners:
  - name: https
    listen: 127.0.0.1:8443
    tls: { cert: "`+certFile+`", key: "`+key+`" }
routes: [ { name: shop, hosts: [ shop.test, blog.test ], pool: web }, { name: all, default: true, pool: web, listeners: [ https ] } ]
pools: [ { name: web, hosts: [ { addr: "127.0.0.1:9001" }, { addr: "127.0.0.1:9002" } ] } ]
`), 0o644)
	}
	write(filepath.Join(dir, "missing.pem"))
	code, _, stderr := run("check", "-c", f)
	if want := f + ":4: listeners[0].tls: cannot load certificate " + filepath.Join(dir, "missing.pem"); code != 1 || !strings.HasPrefix(stderr, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant prefix %s", code, stderr, want)
	}
	write(cert)
	code, _, stderr = run("check", "-c", f)
	for _, w := range []string{
		f + ":4: listeners[0].tls: " + cert + " expires in 4d",
		f + ":5: routes[0].hosts[1]: no certificate of listener https covers blog.test",
	} {
		if code != 0 || !strings.Contains(stderr, "warning: "+w) {
			t.Errorf("exit %d, missing warning %q in:\n%s", code, w, stderr)
		}
	}
}
