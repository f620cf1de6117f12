// Package resolve keeps the addresses of backend host names, resolved in the
// background and never on the request path. When the resolver fails or
// times out, the last good addresses stay in use, and the failure is an
// event (incident 001: a cluster resolver under pressure turned every
// request into a DNS failure).
package resolve

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
)

// Lookup resolves a host name to addresses (net.DefaultResolver.LookupHost
// in production; tests pass their own).
type Lookup func(ctx context.Context, host string) ([]string, error)

// Resolver owns the names of every pool and one goroutine that refreshes
// them. Close stops it.
type Resolver struct {
	lookup  Lookup
	refresh time.Duration
	timeout time.Duration
	bus     event.Emitter

	names atomic.Pointer[map[string]*entry] // replaced whole by Set

	mu      sync.Mutex        // serialises Set with the refresh loop's reads of names; guards pending
	pending map[string]*entry // resolved by Prepare, not yet in use
}

type entry struct {
	name     string
	addrs    atomic.Pointer[[]string]
	next     atomic.Uint32
	failing  atomic.Bool
	failures atomic.Uint64
	mu       sync.Mutex // guards lastErr, lastOK
	lastErr  string
	lastOK   time.Time
}

// New returns a resolver; lookup nil means the system resolver.
func New(lookup Lookup, refresh, timeout time.Duration, bus event.Emitter) *Resolver {
	if lookup == nil {
		lookup = net.DefaultResolver.LookupHost
	}
	r := &Resolver{lookup: lookup, refresh: refresh, timeout: timeout, bus: bus}
	empty := map[string]*entry{}
	r.names.Store(&empty)
	return r
}

// Prepare resolves the names in addrs that are not in use yet, without
// changing what is in use; a later Set takes their answers instead of
// looking them up again. It lets a reload do its lookups before it takes
// any lock.
func (r *Resolver) Prepare(addrs []string) {
	cur := *r.names.Load()
	for _, host := range hostNames(addrs) {
		if cur[host] != nil {
			continue
		}
		e := &entry{name: host}
		r.resolve(e)
		r.mu.Lock()
		if r.pending == nil {
			r.pending = map[string]*entry{}
		}
		r.pending[host] = e
		r.mu.Unlock()
	}
}

// hostNames returns the distinct host names (not IP addresses, not unix
// sockets) in addrs.
func hostNames(addrs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, a := range addrs {
		if IsUnix(a) {
			continue
		}
		host := a
		if h, _, err := net.SplitHostPort(a); err == nil {
			host = h
		}
		if _, err := netip.ParseAddr(host); err == nil || seen[host] {
			continue
		}
		seen[host] = true
		out = append(out, host)
	}
	return out
}

// Set installs the host names to keep resolved (host:port or names; IP
// addresses are ignored). Names already known keep their addresses; new
// names are resolved now, so that a config's first requests do not wait.
// It returns the names that could not be resolved at all.
func (r *Resolver) Set(addrs []string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.names.Load()
	next := map[string]*entry{}
	var fresh, prepared []*entry
	for _, host := range hostNames(addrs) {
		e := old[host]
		switch {
		case e != nil:
		case r.pending[host] != nil:
			e = r.pending[host]
			prepared = append(prepared, e)
		default:
			e = &entry{name: host}
			fresh = append(fresh, e)
		}
		next[host] = e
	}
	r.pending = nil
	r.names.Store(&next)
	var unresolved []string
	for _, e := range prepared {
		if e.addrs.Load() == nil {
			unresolved = append(unresolved, e.name)
		}
	}
	for _, e := range fresh {
		if !r.resolve(e) {
			unresolved = append(unresolved, e.name)
		}
	}
	return unresolved
}

// Run refreshes every name once per refresh interval until ctx ends.
func (r *Resolver) Run(ctx context.Context) error {
	t := time.NewTicker(r.refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			r.refreshAll()
		}
	}
}

func (r *Resolver) refreshAll() {
	r.mu.Lock()
	names := *r.names.Load()
	r.mu.Unlock()
	for _, e := range names {
		r.resolve(e)
	}
}

// resolve looks e up once and reports whether e has addresses afterwards.
func (r *Resolver) resolve(e *entry) bool {
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	addrs, err := r.lookup(ctx, e.name)
	if err == nil && len(addrs) == 0 {
		err = errors.New("no addresses")
	}
	if err != nil {
		e.failures.Add(1)
		e.mu.Lock()
		e.lastErr = err.Error()
		e.mu.Unlock()
		last := e.addrs.Load()
		if e.failing.CompareAndSwap(false, true) {
			kept := []string{}
			if last != nil {
				kept = *last
			}
			r.emit(event.Event{
				Type: event.DNSFailed, Severity: event.Warning, Host: e.name,
				Message:  "name resolution failed; the last good addresses stay in use",
				Evidence: map[string]any{"error": err.Error(), "kept_addresses": kept},
			})
		}
		return last != nil
	}
	slices.Sort(addrs)
	if prev := e.addrs.Load(); prev == nil || !slices.Equal(*prev, addrs) {
		e.addrs.Store(&addrs)
	}
	e.mu.Lock()
	e.lastOK, e.lastErr = time.Now(), ""
	e.mu.Unlock()
	if e.failing.CompareAndSwap(true, false) {
		r.emit(event.Event{
			Type: event.DNSRecovered, Host: e.name, Message: "name resolution works again",
			Evidence: map[string]any{"addresses": addrs},
		})
	}
	return true
}

func (r *Resolver) emit(e event.Event) {
	if r.bus != nil {
		r.bus.Emit(e)
	}
}

// DialContext wraps d so that host names are dialled at their last good
// addresses, in turn, without a lookup. A name never resolved fails at once
// with a *net.DNSError.
func (r *Resolver) DialContext(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if path, ok := unixPath(addr); ok {
			return d.DialContext(ctx, "unix", path)
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return d.DialContext(ctx, network, addr)
		}
		if _, err := netip.ParseAddr(host); err == nil {
			return d.DialContext(ctx, network, addr)
		}
		e := (*r.names.Load())[host]
		if e == nil {
			return d.DialContext(ctx, network, addr) // not a pool's name
		}
		p := e.addrs.Load()
		if p == nil || len(*p) == 0 {
			return nil, &net.DNSError{Err: "not resolved yet (background resolution has not succeeded)", Name: host}
		}
		ips := *p
		ip := ips[e.next.Add(1)%uint32(len(ips))]
		return d.DialContext(ctx, network, net.JoinHostPort(ip, port))
	}
}

// Name is one name's state, for the status page.
type Name struct {
	Name      string
	Addresses []string
	Failing   bool
	Failures  uint64
	LastOK    time.Time
	LastError string
}

// Names returns every name's state.
func (r *Resolver) Names() []Name {
	var out []Name
	for _, e := range *r.names.Load() {
		n := Name{Name: e.name, Failing: e.failing.Load(), Failures: e.failures.Load()}
		if p := e.addrs.Load(); p != nil {
			n.Addresses = *p
		}
		e.mu.Lock()
		n.LastOK, n.LastError = e.lastOK, e.lastErr
		e.mu.Unlock()
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b Name) int {
		if a.Name < b.Name {
			return -1
		}
		return 1
	})
	return out
}
