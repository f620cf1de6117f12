package compile

import (
	"testing"

	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/health/resolve"
)

// names is a fixed set of resolved names.
type names struct {
	a   map[string][]string
	srv map[string][]resolve.Addr
}

func (n names) Addresses(name string) ([]string, bool) { ips, ok := n.a[name]; return ips, ok }
func (n names) Service(name string) ([]resolve.Addr, bool) {
	s, ok := n.srv[name]
	return s, ok
}

// Each address of a name is a host of its own, by name and address; an
// SRV name gives its records' targets, ports and weights, later
// priorities as backups; a name not resolved stays one host; host state
// is kept, by address, from the previous runtime.
func TestHostsFromNames(t *testing.T) {
	cfg := parse(t, `
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: a, default: true, pool: p } ]
pools:
  - name: p
    hosts:
      - { addr: "app.internal:8080", weight: 2 }
      - { addr: "10.0.0.9:80" }
      - { addr: "ghost.internal:80" }
      - { srv: "_http._tcp.web.internal" }
`)
	n := names{
		a: map[string][]string{"app.internal": {"10.0.0.1", "10.0.0.2"}},
		srv: map[string][]resolve.Addr{"_http._tcp.web.internal": {
			{IP: "10.0.1.1", Target: "w1.internal", Port: 9001, Priority: 1, Weight: 0},
			{IP: "10.0.1.2", Target: "w2.internal", Port: 9002, Priority: 1, Weight: 65535},
			{IP: "10.0.1.3", Target: "w3.internal", Port: 9003, Priority: 5, Weight: 7},
		}},
	}
	rt, err := Compile(cfg, nil, Env{Names: n})
	if err != nil {
		t.Fatal(err)
	}
	want := []health.HostSpec{
		{Addr: "10.0.0.1:8080", Name: "app.internal:8080", Weight: 2},
		{Addr: "10.0.0.2:8080", Name: "app.internal:8080", Weight: 2},
		{Addr: "10.0.0.9:80", Weight: 1},
		{Addr: "ghost.internal:80", Name: "ghost.internal:80", Weight: 1},
		{Addr: "10.0.1.1:9001", Name: "w1.internal:9001", Weight: 1},
		{Addr: "10.0.1.2:9002", Name: "w2.internal:9002", Weight: 1000},
		{Addr: "10.0.1.3:9003", Name: "w3.internal:9003", Weight: 1, Backup: true},
	}
	p := rt.Pool("p")
	if len(p.Hosts) != len(want) {
		t.Fatalf("%d hosts, want %d", len(p.Hosts), len(want))
	}
	for i, w := range want {
		h := p.Hosts[i]
		if h.Addr != w.Addr || h.Name != w.Name || h.Weight != w.Weight || h.Backup != w.Backup {
			t.Errorf("host %d: %s %q w%d backup=%v, want %+v", i, h.Addr, h.Name, h.Weight, h.Backup, w)
		}
	}
	p.SetMode("10.0.0.2:8080", health.Drained, p.Hosts[0].LastCheck().Time)
	n.a["app.internal"] = []string{"10.0.0.2", "10.0.0.3"}
	rt2, err := Compile(cfg, rt, Env{Names: n})
	if err != nil {
		t.Fatal(err)
	}
	p2 := rt2.Pool("p")
	if p2.Host("10.0.0.1:8080") != nil || p2.Host("10.0.0.2:8080").Mode() != health.Drained || p2.Host("10.0.0.3:8080") == nil {
		t.Fatal("hosts did not follow the name's addresses, keeping the state of those that stayed")
	}
	rt.Retire(rt2)
}
