package resolve

// What the rest of sturdy asks of the resolver: the addresses it holds,
// and dials that use them.

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// find returns the entry of k in use, or a prepared one.
func (r *Resolver) find(k key) *entry {
	if e := (*r.names.Load())[k]; e != nil {
		return e
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pending[k]
}

// Addresses returns the IP addresses of host name name; known is false
// when the name was never resolved (or is not one the resolver keeps).
// After dns.hold of failures a name is known with no addresses.
func (r *Resolver) Addresses(name string) (ips []string, known bool) {
	e := r.find(key{name: name})
	if e == nil {
		return nil, false
	}
	p := e.addrs.Load()
	if p == nil {
		return nil, false
	}
	for _, a := range *p {
		ips = append(ips, a.IP)
	}
	return ips, true
}

// Service returns the records of SRV name name, each target resolved to
// its addresses; known as for Addresses.
func (r *Resolver) Service(name string) (addrs []Addr, known bool) {
	e := r.find(key{name: strings.TrimSuffix(name, "."), srv: true})
	if e == nil {
		return nil, false
	}
	p := e.addrs.Load()
	if p == nil {
		return nil, false
	}
	return *p, true
}

// DialContext wraps d so that host names are dialled at their last good
// addresses, without a lookup: in turn, and when one cannot be reached, the
// next one, until one answers or the context ends. A name never resolved
// fails at once with a *net.DNSError.
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
		e := (*r.names.Load())[key{name: host}]
		if e == nil {
			return d.DialContext(ctx, network, addr) // not a pool's name
		}
		p := e.addrs.Load()
		if p == nil || len(*p) == 0 {
			why := "not resolved yet (background resolution has not succeeded)"
			if p != nil {
				why = "no addresses: resolution has failed for longer than dns.hold"
			}
			return nil, &net.DNSError{Err: why, Name: host}
		}
		addrs := *p
		start := e.next.Add(1)
		var firstErr error
		for i := range uint32(len(addrs)) {
			c, err := d.DialContext(ctx, network, net.JoinHostPort(addrs[(start+i)%uint32(len(addrs))].IP, port))
			if err == nil {
				return c, nil
			}
			firstErr = cmpOr(firstErr, err)
			if ctx.Err() != nil {
				break
			}
		}
		return nil, firstErr
	}
}

// Name is one name's state, for the status page.
type Name struct {
	Name      string
	SRV       bool
	Addresses []string
	Failing   bool
	Expired   bool
	Failures  uint64
	LastOK    time.Time
	LastError string
}

// Names returns every name's state.
func (r *Resolver) Names() []Name {
	var out []Name
	for _, e := range *r.names.Load() {
		n := Name{Name: e.name, SRV: e.srv, Failing: e.failing.Load(), Expired: e.expired.Load(), Failures: e.failures.Load()}
		if p := e.addrs.Load(); p != nil {
			n.Addresses = describe(*p)
		}
		e.mu.Lock()
		n.LastOK, n.LastError = e.lastOK, e.lastErr
		e.mu.Unlock()
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b Name) int { return strings.Compare(a.Name, b.Name) })
	return out
}
