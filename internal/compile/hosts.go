package compile

import (
	"context"
	"crypto/tls"
	"net"
	"net/netip"
	"strconv"
	"sync"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/health/resolve"
)

// Names is where the addresses of host names and SRV names come from: the
// background resolver, which has looked them up before the compile.
type Names interface {
	// Addresses returns a host name's IPs; known is false when it was
	// never resolved.
	Addresses(name string) (ips []string, known bool)
	// Service returns an SRV name's records, targets resolved.
	Service(name string) (addrs []resolve.Addr, known bool)
}

// hosts expands a pool's configured hosts into the hosts the health model
// follows: each address of a DNS name, and each target address of an SRV
// name, is a host of its own (shown as name and address), so that one dead
// address is one host out, not the whole name. A host by IP address stays
// as it is; a name not resolved yet stays one host that fails with
// dns_error until it is. Without Names (sturdy check) nothing is expanded.
func (c *compiler) hosts(pc config.Pool) []health.HostSpec {
	var out []health.HostSpec
	seen := map[string]bool{}
	add := func(h health.HostSpec) {
		if !seen[h.Addr] {
			seen[h.Addr] = true
			out = append(out, h)
		}
	}
	names := c.env.Names
	for _, h := range pc.Hosts {
		if h.SRV != "" {
			if names != nil {
				recs, _ := names.Service(h.SRV)
				for _, s := range srvHosts(recs) {
					add(s)
				}
			}
			continue
		}
		if resolve.IsUnix(h.Addr) {
			add(health.HostSpec{Addr: h.Addr, Target: resolve.Target(h.Addr), Weight: h.Weight})
			continue
		}
		host, port, _ := net.SplitHostPort(h.Addr)
		if _, err := netip.ParseAddr(host); err == nil || names == nil {
			add(health.HostSpec{Addr: h.Addr, Weight: h.Weight})
			continue
		}
		ips, _ := names.Addresses(host)
		if len(ips) == 0 {
			add(health.HostSpec{Addr: h.Addr, Name: h.Addr, Weight: h.Weight})
			continue
		}
		for _, ip := range ips {
			add(health.HostSpec{Addr: net.JoinHostPort(ip, port), Name: h.Addr, Weight: h.Weight})
		}
	}
	return out
}

// srvHosts turns SRV records into hosts: the records of the lowest
// priority are the pool's hosts, the others backups; weights are the
// records' (0 counts as 1), scaled down to at most config.MaxWeight.
func srvHosts(recs []resolve.Addr) []health.HostSpec {
	if len(recs) == 0 {
		return nil
	}
	best, most := recs[0].Priority, uint16(0)
	for _, r := range recs {
		best = min(best, r.Priority)
		most = max(most, r.Weight)
	}
	out := make([]health.HostSpec, 0, len(recs))
	for _, r := range recs {
		w := int(r.Weight)
		if most > config.MaxWeight {
			w = w * config.MaxWeight / int(most)
		}
		port := strconv.Itoa(int(r.Port))
		out = append(out, health.HostSpec{
			Addr: net.JoinHostPort(r.IP, port), Name: net.JoinHostPort(r.Target, port),
			Weight: max(w, 1), Backup: r.Priority != best,
		})
	}
	return out
}

// serverNames maps the addresses of a TLS pool's hosts to the names they
// came from, for SNI and certificate checks: a host dialled by IP is still
// the name it was configured as. It outlives reloads with the pool's
// upstream clients.
type serverNames struct{ m sync.Map } // addr -> host name

func (n *serverNames) set(hosts []health.HostSpec) {
	for _, h := range hosts {
		if h.Name != "" {
			if name, _, err := net.SplitHostPort(h.Name); err == nil {
				n.m.Store(h.Addr, name)
			}
		}
	}
}

func (n *serverNames) of(addr string) string {
	if v, ok := n.m.Load(addr); ok {
		return v.(string)
	}
	host, _, _ := net.SplitHostPort(addr)
	return host
}

// dialTLS dials addr and shakes hands with tc, naming the server by what
// the address came from when tc names none.
func (n *serverNames) dialTLS(tc *tls.Config, dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		raw, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cfg := tc.Clone()
		cfg.ServerName = n.of(addr)
		tc := tls.Client(raw, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, err
		}
		return tc, nil
	}
}
