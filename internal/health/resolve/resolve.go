// Package resolve keeps the addresses of backend host names and SRV names,
// resolved in the background and never on the request path. When the
// resolver fails or times out, the last good addresses stay in use for up
// to a hold time, and the failure is an event (incident 001: a cluster
// resolver under pressure turned every request into a DNS failure). When a
// name's addresses change, the resolver says so (OnChange), so that each
// address is a host of its own and traffic follows the backends.
package resolve

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
)

// Lookup resolves a host name to addresses (net.Resolver.LookupHost).
type Lookup func(ctx context.Context, host string) ([]string, error)

// LookupSRV resolves an SRV name to its records (net.Resolver.LookupSRV
// with no service and proto).
type LookupSRV func(ctx context.Context, name string) ([]*net.SRV, error)

// Options configure a Resolver.
type Options struct {
	// Lookup and LookupSRV replace the resolver's lookups (tests); nil
	// means the system resolver, or Servers when set.
	Lookup    Lookup
	LookupSRV LookupSRV
	// Servers are DNS servers (host:port) to ask instead of the system's.
	Servers []string
	// Refresh is how often every name is looked up again; Timeout bounds
	// one lookup; Hold is how long the last good addresses stay in use
	// while lookups fail (0: for ever).
	Refresh, Timeout, Hold time.Duration
	// Bus receives dns_failed, dns_recovered, dns_changed, dns_expired.
	Bus event.Emitter
	// OnChange is called, from the refresh loop, after a refresh changed
	// the addresses of some name.
	OnChange func()
}

// Addr is one address of a name: an IP, and for an SRV name the record's
// target, port, priority and weight.
type Addr struct {
	IP               string
	Target           string // SRV: the record's target, without the final dot
	Port             uint16 // SRV
	Priority, Weight uint16 // SRV
}

// Resolver owns the names of every pool and one goroutine that refreshes
// them (Run).
type Resolver struct {
	o         Options
	lookup    Lookup
	lookupSRV LookupSRV

	names atomic.Pointer[map[key]*entry] // replaced whole by Set

	mu      sync.Mutex     // serialises Set with the refresh loop's reads of names; guards pending
	pending map[key]*entry // resolved by Prepare, not yet in use
}

type key struct {
	name string
	srv  bool
}

type entry struct {
	key
	addrs    atomic.Pointer[[]Addr] // nil: never resolved; empty: none (expired)
	next     atomic.Uint32
	failing  atomic.Bool
	expired  atomic.Bool
	failures atomic.Uint64
	mu       sync.Mutex // guards lastErr, lastOK
	lastErr  string
	lastOK   time.Time
}

// New returns a resolver; nothing runs until Run.
func New(o Options) *Resolver {
	r := &Resolver{o: o, lookup: o.Lookup, lookupSRV: o.LookupSRV}
	res := net.DefaultResolver
	if len(o.Servers) > 0 {
		res = serversResolver(o.Servers, o.Timeout)
	}
	if r.lookup == nil {
		r.lookup = res.LookupHost
	}
	if r.lookupSRV == nil {
		r.lookupSRV = func(ctx context.Context, name string) ([]*net.SRV, error) {
			_, srvs, err := res.LookupSRV(ctx, "", "", name)
			return srvs, err
		}
	}
	empty := map[key]*entry{}
	r.names.Store(&empty)
	return r
}

// serversResolver asks the given DNS servers, in turn, with Go's resolver.
func serversResolver(servers []string, timeout time.Duration) *net.Resolver {
	var next atomic.Uint32
	d := &net.Dialer{Timeout: timeout}
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, servers[next.Add(1)%uint32(len(servers))])
		},
	}
}

// keys returns the distinct host names (not IP addresses) of addrs and the
// SRV names.
func keys(addrs, services []string) []key {
	seen := map[key]bool{}
	var out []key
	for _, a := range addrs {
		if IsUnix(a) {
			continue
		}
		host := a
		if h, _, err := net.SplitHostPort(a); err == nil {
			host = h
		}
		k := key{name: host}
		if _, err := netip.ParseAddr(host); err == nil || host == "" || seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, k)
	}
	for _, s := range services {
		k := key{name: strings.TrimSuffix(s, "."), srv: true}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// Prepare resolves the names in addrs and services that are not in use
// yet, without changing what is in use; a later Set takes their answers
// instead of looking them up again. It lets a reload do its lookups before
// it takes any lock, and compile the new names' hosts.
func (r *Resolver) Prepare(addrs, services []string) {
	cur := *r.names.Load()
	for _, k := range keys(addrs, services) {
		if cur[k] != nil {
			continue
		}
		e := &entry{key: k}
		r.resolve(e)
		r.mu.Lock()
		if r.pending == nil {
			r.pending = map[key]*entry{}
		}
		r.pending[k] = e
		r.mu.Unlock()
	}
}

// Set installs the names to keep resolved: the host names of addrs
// (host:port or names; IP addresses are ignored) and the SRV names.
// Names already known keep their addresses; new names are resolved now, so
// that a config's first requests do not wait. It returns the names that
// could not be resolved at all.
func (r *Resolver) Set(addrs, services []string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.names.Load()
	next := map[key]*entry{}
	var fresh, prepared []*entry
	for _, k := range keys(addrs, services) {
		e := old[k]
		switch {
		case e != nil:
		case r.pending[k] != nil:
			e = r.pending[k]
			prepared = append(prepared, e)
		default:
			e = &entry{key: k}
			fresh = append(fresh, e)
		}
		next[k] = e
	}
	r.pending = nil
	r.names.Store(&next)
	var unresolved []string
	for _, e := range prepared {
		if p := e.addrs.Load(); p == nil || len(*p) == 0 {
			unresolved = append(unresolved, e.name)
		}
	}
	for _, e := range fresh {
		if r.resolve(e); !e.has() {
			unresolved = append(unresolved, e.name)
		}
	}
	return unresolved
}

func (e *entry) has() bool {
	p := e.addrs.Load()
	return p != nil && len(*p) > 0
}

// Run refreshes every name once per refresh interval until ctx ends.
func (r *Resolver) Run(ctx context.Context) error {
	t := time.NewTicker(r.o.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if r.refreshAll() && r.o.OnChange != nil {
				r.o.OnChange()
			}
		}
	}
}

// refreshAll looks every name up once and reports whether any changed.
func (r *Resolver) refreshAll() bool {
	r.mu.Lock()
	names := *r.names.Load()
	r.mu.Unlock()
	changed := false
	for _, e := range names {
		if r.resolve(e) {
			changed = true
		}
	}
	return changed
}

// resolve looks e up once and reports whether its addresses changed from
// ones it had before (the first answer is not a change).
func (r *Resolver) resolve(e *entry) bool {
	ctx, cancel := context.WithTimeout(context.Background(), r.o.Timeout)
	defer cancel()
	addrs, err := r.look(ctx, e)
	if err == nil && len(addrs) == 0 {
		err = errors.New("no addresses")
	}
	if err != nil {
		return r.failed(e, err)
	}
	prev := e.addrs.Load()
	changed := prev != nil && !slices.Equal(*prev, addrs)
	if prev == nil || changed {
		e.addrs.Store(&addrs)
	}
	e.mu.Lock()
	e.lastOK, e.lastErr = time.Now(), ""
	e.mu.Unlock()
	e.expired.Store(false)
	if e.failing.CompareAndSwap(true, false) {
		r.emit(event.Event{
			Type: event.DNSRecovered, Host: e.name, Message: "name resolution works again",
			Evidence: map[string]any{"addresses": describe(addrs)},
		})
	}
	if changed && len(*prev) > 0 { // back from none is dns_recovered's news
		added, removed := diff(*prev, addrs)
		r.emit(event.Event{
			Type: event.DNSChanged, Host: e.name,
			Message:  "the name's addresses changed; its hosts follow (connections to removed addresses close)",
			Evidence: map[string]any{"added": added, "removed": removed, "addresses": describe(addrs)},
		})
	}
	return changed
}

// failed handles a failed lookup: the last good addresses stay in use,
// until the hold is over. It reports whether the addresses changed (they
// expired).
func (r *Resolver) failed(e *entry, err error) bool {
	e.failures.Add(1)
	e.mu.Lock()
	e.lastErr = err.Error()
	lastOK := e.lastOK
	e.mu.Unlock()
	last := e.addrs.Load()
	if e.failing.CompareAndSwap(false, true) {
		kept := []string{}
		if last != nil {
			kept = describe(*last)
		}
		r.emit(event.Event{
			Type: event.DNSFailed, Severity: event.Warning, Host: e.name,
			Message:  "name resolution failed; the last good addresses stay in use",
			Evidence: map[string]any{"error": err.Error(), "kept_addresses": kept, "hold_seconds": r.o.Hold.Seconds()},
		})
	}
	if last == nil || len(*last) == 0 || r.o.Hold <= 0 || time.Since(lastOK) < r.o.Hold {
		return false
	}
	none := []Addr{}
	e.addrs.Store(&none)
	if e.expired.CompareAndSwap(false, true) {
		r.emit(event.Event{
			Type: event.DNSExpired, Severity: event.Critical, Host: e.name,
			Message:  "name resolution has failed for longer than dns.hold: the last good addresses are dropped and the name has none",
			Evidence: map[string]any{"error": err.Error(), "dropped": describe(*last), "last_ok": lastOK, "hold_seconds": r.o.Hold.Seconds()},
		})
	}
	return true
}

func (r *Resolver) emit(e event.Event) {
	if r.o.Bus != nil {
		r.o.Bus.Emit(e)
	}
}
