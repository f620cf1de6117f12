package compile

import (
	"path/filepath"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// The acme section is compiled by the compile alone: the first compile
// makes the manager from it, and a reload that is handed that manager
// keeps it (the acme section applies at restart).
func TestTheACMEManagerComesFromTheCompile(t *testing.T) {
	cfg, err := config.Parse([]byte(`
acme: { agree: true, email: ops@example.com, storage: "`+filepath.Join(t.TempDir(), "acme")+`" }
listeners: [ { name: https, listen: "127.0.0.1:0", tls: { acme: true } } ]
routes: [ { name: all, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: 127.0.0.1:9 } ] } ]
`), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := Compile(cfg, nil, Env{})
	if err != nil {
		t.Fatal(err)
	}
	if rt.ACME == nil {
		t.Fatal("no ACME manager from a config with an acme section")
	}
	next, err := Compile(cfg, rt, Env{ACME: rt.ACME})
	if err != nil {
		t.Fatal(err)
	}
	if next.ACME != rt.ACME {
		t.Error("a reload handed the manager made another")
	}
	plain, err := config.Parse([]byte(`
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: all, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: 127.0.0.1:9 } ] } ]
`), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if rt, err := Compile(plain, nil, Env{}); err != nil {
		t.Fatal(err)
	} else if rt.ACME != nil {
		t.Error("a config without acme has a manager")
	}
}
