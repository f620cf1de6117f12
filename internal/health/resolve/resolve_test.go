package resolve

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
)

type fakeDNS struct {
	mu      sync.Mutex
	answers map[string][]string
	fail    bool
	calls   int
}

func (f *fakeDNS) lookup(ctx context.Context, host string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.fail {
		return nil, &net.DNSError{Err: "server misbehaving", Name: host, IsTemporary: true}
	}
	if a, ok := f.answers[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// acceptAndClose listens on ip and closes every connection it accepts,
// until the test ends; it returns the port.
func acceptAndClose(t *testing.T, ip string) string {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

type events struct {
	mu sync.Mutex
	ev []event.Event
}

func (e *events) Emit(ev event.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ev = append(e.ev, ev)
}

func TestLastGoodAddressesSurviveResolverFailure(t *testing.T) {
	port := acceptAndClose(t, "127.1.2.3")
	dns := &fakeDNS{answers: map[string][]string{"app.internal": {"127.1.2.3"}}}
	ev := &events{}
	r := New(Options{Lookup: dns.lookup, Refresh: time.Hour, Timeout: time.Second, Bus: ev})
	if un := r.Set([]string{"app.internal:" + port, "10.0.0.1:80", "ghost.internal:80"}, nil); len(un) != 1 || un[0] != "ghost.internal" {
		t.Fatalf("unresolved %v", un)
	}
	dial := r.DialContext(&net.Dialer{Timeout: time.Second})
	ctx := context.Background()
	c, err := dial(ctx, "tcp", "app.internal:"+port)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	dns.mu.Lock()
	dns.fail = true
	calls := dns.calls
	dns.mu.Unlock()
	r.refreshAll()
	r.refreshAll()
	c, err = dial(ctx, "tcp", "app.internal:"+port)
	if err != nil {
		t.Fatalf("dial after the resolver failed: %v", err)
	}
	c.Close()
	// Dialling never looks up: only the refreshes did.
	dns.mu.Lock()
	if dns.calls != calls+4 { // two refreshes of two names
		t.Errorf("%d lookups, want %d", dns.calls, calls+4)
	}
	dns.fail = false
	dns.mu.Unlock()
	r.refreshAll()
	var typs []string
	for _, e := range ev.ev {
		if e.Host == "app.internal" {
			typs = append(typs, e.Type)
		}
	}
	if len(typs) != 2 || typs[0] != event.DNSFailed || typs[1] != event.DNSRecovered {
		t.Fatalf("events for app.internal: %v", typs)
	}
	_, err = dial(ctx, "tcp", "ghost.internal:80")
	var de *net.DNSError
	if !errors.As(err, &de) {
		t.Fatalf("never-resolved name: %v, want a DNS error", err)
	}
	names := r.Names()
	if len(names) != 2 || names[0].Name != "app.internal" || names[0].Addresses[0] != "127.1.2.3" || !names[1].Failing {
		t.Fatalf("names %+v", names)
	}
}

func TestPrepareResolvesWithoutChangingWhatIsInUse(t *testing.T) {
	dns := &fakeDNS{answers: map[string][]string{"a.internal": {"127.1.2.3"}, "b.internal": {"127.1.2.4"}}}
	r := New(Options{Lookup: dns.lookup, Refresh: time.Hour, Timeout: time.Second})
	r.Set([]string{"a.internal:80"}, nil)
	r.Prepare([]string{"a.internal:80", "b.internal:80"}, nil)
	if names := r.Names(); len(names) != 1 || names[0].Name != "a.internal" {
		t.Fatalf("Prepare changed the names in use: %+v", names)
	}
	dns.mu.Lock()
	calls := dns.calls
	dns.mu.Unlock()
	if un := r.Set([]string{"b.internal:80"}, nil); len(un) != 0 {
		t.Fatalf("unresolved %v", un)
	}
	dns.mu.Lock()
	defer dns.mu.Unlock()
	if dns.calls != calls {
		t.Fatalf("Set looked up again (%d calls) what Prepare had resolved", dns.calls-calls)
	}
	if names := r.Names(); len(names) != 1 || names[0].Addresses[0] != "127.1.2.4" {
		t.Fatalf("names %+v", names)
	}
}
