package server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/testing/fake"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

// countedAt is a counting backend on a given address (ip:port).
func countedAt(t *testing.T, addr string) *counted {
	c := &counted{t: t, addr: addr}
	c.start()
	t.Cleanup(c.stop)
	return c
}

// samePort starts counting backends on each ip, all on one port, as the
// addresses of one DNS name are.
func samePort(t *testing.T, ips ...string) (string, []*counted) {
	first := newCounted(t, ips[0])
	_, port, _ := net.SplitHostPort(first.addr)
	out := []*counted{first}
	for _, ip := range ips[1:] {
		out = append(out, countedAt(t, net.JoinHostPort(ip, port)))
	}
	return port, out
}

func dnsServer(t *testing.T) *fake.DNS {
	t.Helper()
	d, err := fake.NewDNS("127.0.0.53")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

const dnsPoolConfig = `
admin: { listen: "off" }
dns: { servers: [ "{{dns}}" ], refresh: 100ms, timeout: 500ms, hold: {{hold}} }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: site, default: true, pool: app } ]
pools:
  - name: app
    hosts: [ {{hosts}} ]
`

func dnsConfig(t *testing.T, d *fake.DNS, hosts, hold string) (*Server, string) {
	s, url, _ := startSturdy(t, parseConfig(t, dnsPoolConfig, map[string]string{"dns": d.Addr, "hosts": hosts, "hold": hold}))
	return s, url
}

// sequential sends n GETs one after the other on one keep-alive client and
// returns how many were not 200.
func sequential(t *testing.T, c *http.Client, url string, n int) int {
	t.Helper()
	bad := 0
	for i := range n {
		resp, err := c.Get(fmt.Sprintf("%s/x/%d", url, i))
		if err != nil {
			bad++
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			bad++
		}
	}
	return bad
}

// A name's address changes while traffic flows on keep-alive connections:
// the requests follow the name, and the connections to the old address
// are not reused.
func TestTrafficFollowsANameToItsNewAddress(t *testing.T) {
	t.Parallel()
	port, bs := samePort(t, "127.1.4.1", "127.1.4.2")
	d := dnsServer(t)
	d.SetA("app.sturdy.test", "127.1.4.1")
	s, url := dnsConfig(t, d, `{ addr: "app.sturdy.test:`+port+`" }`, "1h")
	ev := countEvents(s)
	c := fake.Client("127.0.0.30", 5*time.Second)
	if bad := sequential(t, c, url, 20); bad != 0 || bs[0].n.Load() != 20 {
		t.Fatalf("before the move: %d failed, old address got %d", bad, bs[0].n.Load())
	}
	d.SetA("app.sturdy.test", "127.1.4.2")
	if !testutil.Eventually(3*time.Second, func() bool { return ev.get(event.DNSChanged) > 0 }) {
		t.Fatalf("no dns_changed; events:%s", ev)
	}
	// Measure once the runtime that follows the change is published.
	published := func() bool {
		h := s.Runtime().Pool("app").Hosts
		return len(h) == 1 && h[0].Addr == "127.1.4.2:"+port
	}
	if !testutil.Eventually(3*time.Second, published) {
		t.Fatalf("the new address was not published within 3s: %+v", s.Runtime().Pool("app").Hosts)
	}
	old := bs[0].n.Load()
	bad := sequential(t, c, url, 150)
	moved := bs[1].n.Load()
	t.Logf("measured: after the name moved, 150 requests on keep-alive connections: %d to the old address, %d to the new one, %d failed", bs[0].n.Load()-old, moved, bad)
	if bs[0].n.Load() != old || moved != 150 || bad != 0 {
		t.Errorf("%d requests still went to the old address, %d to the new one, %d failed", bs[0].n.Load()-old, moved, bad)
	}
	p := s.Runtime().Pool("app")
	if len(p.Hosts) != 1 || p.Hosts[0].Addr != "127.1.4.2:"+port || p.Hosts[0].Name != "app.sturdy.test:"+port {
		t.Errorf("hosts after the move: %+v", p.Hosts)
	}
}

// A name with three addresses, one of them dead: each address is a host of
// its own, so only the dead one leaves rotation and nobody gets a sorry
// page; state is kept across refreshes for the addresses that stay.
func TestEachAddressOfANameIsAHost(t *testing.T) {
	t.Parallel()
	port, bs := samePort(t, "127.1.4.11", "127.1.4.12")
	d := dnsServer(t)
	d.SetA("app.sturdy.test", "127.1.4.11", "127.1.4.12", "127.1.4.13") // nothing on .13
	s, url := dnsConfig(t, d, `{ addr: "app.sturdy.test:`+port+`" }`, "1h")
	ev := countEvents(s)
	tl := load(t, url, ips("127.0.0.", 4), 30, 5*time.Millisecond, func(i int) string { return "/" })
	p := s.Runtime().Pool("app")
	t.Logf("measured: name with 3 addresses, one dead: %d of %d requests failed, answers %v, hosts %d", tl.failures(), tl.total(), tl.n, len(p.Hosts))
	if tl.failures() != 0 {
		t.Errorf("%d failures: %v", tl.failures(), tl.n)
	}
	modes := map[string]health.Mode{}
	for _, h := range p.Hosts {
		if h.Name != "app.sturdy.test:"+port {
			t.Errorf("host %s shows name %q", h.Addr, h.Name)
		}
		modes[h.Addr] = h.Mode()
	}
	dead := "127.1.4.13:" + port
	if len(modes) != 3 || modes[dead] != health.Ejected || modes["127.1.4.11:"+port] != health.Healthy || modes["127.1.4.12:"+port] != health.Healthy {
		t.Fatalf("modes %v", modes)
	}
	if bs[0].n.Load() == 0 || bs[1].n.Load() == 0 {
		t.Errorf("a live address got nothing: %d %d", bs[0].n.Load(), bs[1].n.Load())
	}
	st := s.Status()
	if st.Pools[0].Hosts[0].Name == "" {
		t.Errorf("status shows no name: %+v", st.Pools[0].Hosts[0])
	}
	// A fourth address joins: the dead one stays ejected (state kept), the
	// new one is a host.
	d.SetA("app.sturdy.test", "127.1.4.11", "127.1.4.12", "127.1.4.13", "127.1.4.14")
	if !testutil.Eventually(3*time.Second, func() bool { return len(s.Runtime().Pool("app").Hosts) == 4 }) {
		t.Fatalf("hosts %d after a fourth address; events:%s", len(s.Runtime().Pool("app").Hosts), ev)
	}
	if h := s.Runtime().Pool("app").Host(dead); h == nil || h.Mode() != health.Ejected {
		t.Fatalf("the dead address lost its state across the refresh: %+v", h)
	}
}

// Lookups fail for longer than dns.hold: the last good addresses are
// dropped (dns_expired), the name has no hosts left to send to, and the
// empty-pool chain answers; when lookups work again, so does the pool.
func TestLastGoodAddressesExpireAfterHold(t *testing.T) {
	t.Parallel()
	port, bs := samePort(t, "127.1.4.21")
	d := dnsServer(t)
	d.SetA("app.sturdy.test", "127.1.4.21")
	s, url := dnsConfig(t, d, `{ addr: "app.sturdy.test:`+port+`" }`, "400ms")
	ev := countEvents(s)
	c := fake.Client("127.0.0.31", 5*time.Second)
	if bad := sequential(t, c, url, 5); bad != 0 {
		t.Fatalf("%d failed before", bad)
	}
	d.Fail(true)
	if !testutil.Eventually(3*time.Second, func() bool { return ev.get(event.DNSExpired) == 1 }) {
		t.Fatalf("no dns_expired; events:%s", ev)
	}
	testutil.Eventually(2*time.Second, func() bool { return s.Runtime().Pool("app").Hosts[0].Addr == "app.sturdy.test:"+port })
	resp, err := c.Get(url + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("with no addresses: %d, want the sorry page", resp.StatusCode)
	}
	if st := s.Status(); !st.DNS[0].Expired || len(st.DNS[0].Addresses) != 0 {
		t.Errorf("status %+v", st.DNS)
	}
	d.Fail(false)
	before := bs[0].n.Load()
	if !testutil.Eventually(5*time.Second, func() bool { return sequential(t, c, url, 1) == 0 }) || bs[0].n.Load() == before {
		t.Fatalf("the pool did not come back with the name; events:%s", ev)
	}
}

// An SRV name is a source of hosts: each record's target address and port
// with its weight, and the records of a later priority as backups, used
// only while no earlier one is healthy.
func TestSRVRecordsAreHosts(t *testing.T) {
	t.Parallel()
	a, b, backup := newCounted(t, "127.1.4.31"), newCounted(t, "127.1.4.32"), newCounted(t, "127.1.4.33")
	port := func(c *counted) uint16 {
		_, p, _ := net.SplitHostPort(c.addr)
		n, _ := strconv.Atoi(p)
		return uint16(n)
	}
	d := dnsServer(t)
	d.SetA("a.sturdy.test", "127.1.4.31")
	d.SetA("b.sturdy.test", "127.1.4.32")
	d.SetA("backup.sturdy.test", "127.1.4.33")
	d.SetSRV("_http._tcp.web.sturdy.test",
		fake.SRV{Target: "a.sturdy.test", Port: port(a), Priority: 10, Weight: 30},
		fake.SRV{Target: "b.sturdy.test", Port: port(b), Priority: 10, Weight: 10},
		fake.SRV{Target: "backup.sturdy.test", Port: port(backup), Priority: 20, Weight: 10})
	s, url := dnsConfig(t, d, `{ srv: "_http._tcp.web.sturdy.test" }`, "1h")
	got, bad := spread(t, url, []*counted{a, b, backup}, 800)
	t.Logf("measured: SRV weights 30/10 and a backup: %v (%s), %d not 200", got, percents(got), bad)
	if bad != 0 || got[2] != 0 || got[0] < 540 || got[0] > 660 {
		t.Fatalf("shares %v (%s), want about 600/200/0", got, percents(got))
	}
	p := s.Runtime().Pool("app")
	if len(p.Hosts) != 3 || p.Hosts[0].Name != "a.sturdy.test:"+strconv.Itoa(int(port(a))) {
		t.Fatalf("hosts %+v", p.Hosts)
	}
	for _, h := range p.Hosts[:2] {
		if err := s.SetHostMode("app", h.Addr, "drain"); err != nil {
			t.Fatal(err)
		}
	}
	got, bad = spread(t, url, []*counted{a, b, backup}, 40)
	if bad != 0 || got[2] != 40 {
		t.Fatalf("with the priority-10 hosts drained: %v, %d not 200; the backup should take everything", got, bad)
	}
}
