package server

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/testing/fake"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

// Incident 001's resolver under pressure: when lookups start failing, the
// last good addresses keep serving, and the failure is an event.
func TestDNSFailureKeepsLastGoodAddresses(t *testing.T) {
	t.Parallel()
	b, _ := fake.NewBackend("app", "127.1.0.7")
	t.Cleanup(b.Close)
	_, port, _ := net.SplitHostPort(b.Addr)
	var failing atomic.Bool
	lookup := func(ctx context.Context, host string) ([]string, error) {
		if failing.Load() || host != "app.internal" {
			return nil, &net.DNSError{Err: "i/o timeout", Name: host, IsTimeout: true}
		}
		return []string{"127.1.0.7"}, nil
	}
	cfg := parseConfig(t, `
admin: { listen: "off" }
dns: { refresh: 100ms, timeout: 50ms }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: app, default: true, pool: app } ]
pools: [ { name: app, hosts: [ { addr: "app.internal:`+port+`" } ] } ]
`, nil)
	s, url, _ := startSturdy(t, cfg, WithLookup(lookup))
	ev := countEvents(s)
	if resp, body := get(t, http.DefaultClient, url+"/"); resp.StatusCode != 200 || !strings.Contains(body, "app") {
		t.Fatalf("before: %d %q", resp.StatusCode, body)
	}
	failing.Store(true)
	testutil.Eventually(3*time.Second, func() bool { return ev.get(event.DNSFailed) > 0 })
	if ev.get(event.DNSFailed) != 1 {
		t.Fatalf("no dns_failed event; events:%s", ev)
	}
	for i := range 20 {
		if resp, _ := get(t, http.DefaultClient, url+"/"); resp.StatusCode != 200 {
			t.Fatalf("request %d while DNS fails: %d", i, resp.StatusCode)
		}
	}
	if st := s.Status(); len(st.DNS) != 1 || !st.DNS[0].Failing || st.DNS[0].Addresses[0] != "127.1.0.7" {
		t.Fatalf("status DNS %+v", st.DNS)
	}
}
