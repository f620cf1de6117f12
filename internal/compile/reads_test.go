package compile

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/testing/testpki"
)

// writeFileSet writes every file readsConfig names into dir, in the
// version named v (a certificate for v.test, a user v, ...).
func writeFileSet(t *testing.T, dir, v string) {
	t.Helper()
	ca := testpki.NewCA(t, v+" CA")
	ca.Write(t, dir, "site", testpki.Leaf{DNS: []string{v + ".test"}})
	ca.Write(t, dir, "client", testpki.Leaf{DNS: []string{v + ".client"}, Client: true})
	ca.WriteCA(t, dir, "clients.pem")
	ca.WriteCA(t, dir, "upstream-ca.pem")
	ca.WriteCA(t, dir, "acme-root.pem")
	for name, body := range map[string]string{
		"deny.txt":   "192.0.2.0/24 # " + v + "\n",
		"allow.txt":  "198.51.100.0/24 # " + v + "\n",
		"users":      v + ":{PLAIN}secret\n",
		"sorry.html": "<p>sorry " + v + "</p>",
		"error.html": "<p>error " + v + "</p>",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func readsConfig(t *testing.T, dir string) *config.Config {
	t.Helper()
	text := strings.NewReplacer("STORAGE", filepath.Join(t.TempDir(), "acme"), "D/", dir+"/").Replace(`
acme: { agree: true, email: ops@example.com, storage: "STORAGE", ca_root: "D/acme-root.pem" }
listeners:
  - { name: web, listen: "127.0.0.1:0" }
  - name: https
    listen: "127.0.0.1:0"
    tls: { cert: D/site.pem, key: D/site.key, client_auth: { mode: verify_if_given, ca: D/clients.pem } }
  - { name: auto, listen: "127.0.0.1:0", tls: { acme: true } }
edge: { deny_file: D/deny.txt }
routes:
  - name: all
    default: true
    pool: web
    sorry: { body_file: D/sorry.html }
    error_pages: [ { codes: [502], file: D/error.html } ]
    access: [ { allow_file: D/allow.txt }, { deny: all } ]
    basic_auth: { htpasswd: D/users }
pools:
  - name: web
    hosts: [ { addr: "127.0.0.1:9" } ]
    tls: { ca: D/upstream-ca.pem, cert: D/client.pem, key: D/client.key }
`)
	cfg, err := config.Parse([]byte(text), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// virtual is where the config's files are named: nothing is there, so a
// read that bypasses the compile's own fails the compile.
const virtual = "/nonexistent/sturdy-compile-reads"

// changing serves the files under virtual from dir1 the first time each
// is asked for and from dir2 (the file as changed on disk) every time
// after; it counts the reads.
type changing struct {
	mu         sync.Mutex
	dir1, dir2 string
	reads      map[string]int
}

func (c *changing) read(name string) ([]byte, error) {
	c.mu.Lock()
	c.reads[name]++
	n := c.reads[name]
	c.mu.Unlock()
	dir := c.dir1
	if n > 1 {
		dir = c.dir2
	}
	return os.ReadFile(filepath.Join(dir, strings.TrimPrefix(name, virtual)))
}

// The compile reads each file the config names once, through its own
// reads, and hashes those bytes: a file that changes on disk during a
// compile cannot leave the config hash describing content other than
// what serves.
func TestCompileReadsEachFileOnceAndHashesThoseBytes(t *testing.T) {
	dir1, dir2 := t.TempDir(), t.TempDir()
	writeFileSet(t, dir1, "one")
	writeFileSet(t, dir2, "two")
	cfg := readsConfig(t, virtual)
	ch := &changing{dir1: dir1, dir2: dir2, reads: map[string]int{}}
	rt, err := compileFrom(cfg, nil, Env{}, ch.read)
	if err != nil {
		t.Fatal(err) // a file read around the compile's reads is not found
	}
	defer rt.Discard(nil)
	names := cfg.Files()
	if f := filepath.Join(virtual, "error.html"); !slices.Contains(names, f) {
		names = append(names, f)
	}
	if len(names) != 12 {
		t.Fatalf("the config names %d files, want 12: %v", len(names), names)
	}
	for _, f := range names {
		if n := ch.reads[f]; n != 1 {
			t.Errorf("%s read %d times; want once", filepath.Base(f), n)
		}
	}
	if len(ch.reads) != len(names) {
		t.Errorf("read %d files, want the %d the config names: %v", len(ch.reads), len(names), ch.reads)
	}
	if c := rt.Listeners[1].TLS.Store.Default(); c == nil || !slices.Equal(c.Names, []string{"one.test"}) {
		t.Fatalf("serves %+v, want the certificate of the first read (one.test)", c)
	}

	// The hash is that of the first read's content, not of a mix.
	from := func(dir string) func(string) ([]byte, error) {
		return func(name string) ([]byte, error) {
			return os.ReadFile(filepath.Join(dir, strings.TrimPrefix(name, virtual)))
		}
	}
	stable, err := compileFrom(cfg, nil, Env{}, from(dir1))
	if err != nil {
		t.Fatal(err)
	}
	defer stable.Discard(nil)
	if rt.Hash != stable.Hash {
		t.Errorf("hash %s after reads that changed, %s from the same first content", rt.Hash, stable.Hash)
	}
	// And it does describe the content: the second version hashes apart.
	changed, err := compileFrom(cfg, nil, Env{}, from(dir2))
	if err != nil {
		t.Fatal(err)
	}
	defer changed.Discard(nil)
	if changed.Hash == stable.Hash {
		t.Error("other file content, same hash")
	}
}
