package resolve

import (
	"context"
	"net"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/testing/fake"
)

func newDNS(t *testing.T) *fake.DNS {
	t.Helper()
	d, err := fake.NewDNS("127.0.0.53")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

func types(ev *events, host string) []string {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var out []string
	for _, e := range ev.ev {
		if e.Host == host {
			out = append(out, e.Type)
		}
	}
	return out
}

// Against a real DNS server: a name's addresses are followed (a change is
// an event and an OnChange), an SRV name gives targets, ports, priorities
// and weights, and when lookups fail the last good addresses stay for
// dns.hold, then the name has none (dns_expired).
func TestNamesFollowTheirDNSServer(t *testing.T) {
	d := newDNS(t)
	d.SetA("app.sturdy.test", "127.1.3.1", "127.1.3.2")
	d.SetA("web-1.sturdy.test", "127.1.3.11")
	d.SetA("web-2.sturdy.test", "127.1.3.12")
	d.SetSRV("_http._tcp.web.sturdy.test",
		fake.SRV{Target: "web-1.sturdy.test", Port: 8001, Priority: 10, Weight: 3},
		fake.SRV{Target: "web-2.sturdy.test", Port: 8002, Priority: 20, Weight: 1})
	// The net package sets up its resolver state once, on its first
	// lookup; that must happen outside the bubble, which may not own what
	// other tests use.
	New(Options{Servers: []string{d.Addr}, Timeout: time.Second}).Set([]string{"app.sturdy.test:80"}, nil)
	// Fake time for dns.hold; the lookups go to the real server over
	// loopback and come back at once.
	synctest.Test(t, func(t *testing.T) {
		ev := &events{}
		changes := 0
		r := New(Options{Servers: []string{d.Addr}, Refresh: time.Hour, Timeout: time.Second, Hold: time.Hour, Bus: ev, OnChange: func() { changes++ }})
		if un := r.Set([]string{"app.sturdy.test:80"}, []string{"_http._tcp.web.sturdy.test"}); len(un) != 0 {
			t.Fatalf("unresolved %v", un)
		}
		if ips, ok := r.Addresses("app.sturdy.test"); !ok || !slices.Equal(ips, []string{"127.1.3.1", "127.1.3.2"}) {
			t.Fatalf("addresses %v %v", ips, ok)
		}
		srv, ok := r.Service("_http._tcp.web.sturdy.test")
		want := []Addr{{IP: "127.1.3.11", Target: "web-1.sturdy.test", Port: 8001, Priority: 10, Weight: 3}, {IP: "127.1.3.12", Target: "web-2.sturdy.test", Port: 8002, Priority: 20, Weight: 1}}
		if !ok || !slices.Equal(srv, want) {
			t.Fatalf("service %+v %v", srv, ok)
		}
		if r.refreshAll() {
			t.Fatal("a refresh with the same answers is a change")
		}
		d.SetA("app.sturdy.test", "127.1.3.2", "127.1.3.3")
		if !r.refreshAll() {
			t.Fatal("a changed answer is no change")
		}
		if ips, _ := r.Addresses("app.sturdy.test"); !slices.Equal(ips, []string{"127.1.3.2", "127.1.3.3"}) {
			t.Fatalf("addresses after the change %v", ips)
		}
		d.Fail(true)
		r.refreshAll()
		if ips, _ := r.Addresses("app.sturdy.test"); len(ips) != 2 {
			t.Fatalf("the last good addresses were dropped before dns.hold: %v", ips)
		}
		time.Sleep(time.Hour + time.Second)
		if !r.refreshAll() {
			t.Fatal("expiry is no change")
		}
		if ips, ok := r.Addresses("app.sturdy.test"); !ok || len(ips) != 0 {
			t.Fatalf("after dns.hold: %v %v, want known with no addresses", ips, ok)
		}
		dial := r.DialContext(&net.Dialer{Timeout: time.Second})
		if _, err := dial(context.Background(), "tcp", "app.sturdy.test:80"); err == nil {
			t.Fatal("dialled a name whose addresses expired")
		}
		d.Fail(false)
		r.refreshAll()
		got := types(ev, "app.sturdy.test")
		wantTypes := []string{event.DNSChanged, event.DNSFailed, event.DNSExpired, event.DNSRecovered}
		if !slices.Equal(got, wantTypes) {
			t.Fatalf("events %v, want %v", got, wantTypes)
		}
	})
}

// A failed dial tries the name's next address.
func TestDialTriesTheNextAddress(t *testing.T) {
	port := acceptAndClose(t, "127.1.3.22")
	d := newDNS(t)
	d.SetA("two.sturdy.test", "127.1.3.21", "127.1.3.22") // nothing listens on .21
	r := New(Options{Servers: []string{d.Addr}, Refresh: time.Hour, Timeout: time.Second})
	r.Set([]string{"two.sturdy.test:" + port}, nil)
	dial := r.DialContext(&net.Dialer{Timeout: time.Second})
	for i := range 4 {
		c, err := dial(context.Background(), "tcp", "two.sturdy.test:"+port)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		c.Close()
	}
}
