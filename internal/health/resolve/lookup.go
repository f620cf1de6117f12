package resolve

// Lookups and what they return: sorted addresses, SRV records, and the
// differences between two answers that make a change.

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// look resolves e: a host name to its sorted IPs, an SRV name to its
// records with each target's IPs.
func (r *Resolver) look(ctx context.Context, e *entry) ([]Addr, error) {
	if !e.srv {
		ips, err := r.lookup(ctx, e.name)
		if err != nil {
			return nil, err
		}
		out := make([]Addr, 0, len(ips))
		for _, ip := range ips {
			out = append(out, Addr{IP: ip})
		}
		return sortAddrs(out), nil
	}
	srvs, err := r.lookupSRV(ctx, e.name)
	if err != nil {
		return nil, err
	}
	var out []Addr
	var firstErr error
	for _, s := range srvs {
		target := strings.TrimSuffix(s.Target, ".")
		if target == "" {
			continue // "." : the service is decidedly not available
		}
		ips := []string{target}
		if _, err := netip.ParseAddr(target); err != nil {
			if ips, err = r.lookup(ctx, target); err != nil {
				firstErr = cmpOr(firstErr, err)
				continue
			}
		}
		for _, ip := range ips {
			out = append(out, Addr{IP: ip, Target: target, Port: s.Port, Priority: s.Priority, Weight: s.Weight})
		}
	}
	if len(out) == 0 && firstErr != nil {
		return nil, firstErr
	}
	return sortAddrs(out), nil
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func sortAddrs(a []Addr) []Addr {
	slices.SortFunc(a, func(x, y Addr) int {
		if c := strings.Compare(x.IP, y.IP); c != 0 {
			return c
		}
		if x.Port != y.Port {
			return int(x.Port) - int(y.Port)
		}
		return strings.Compare(x.Target, y.Target)
	})
	return slices.Compact(a)
}

// String is the address as shown: the IP, and for SRV the target and port.
func (a Addr) String() string {
	if a.Target == "" {
		return a.IP
	}
	s := net.JoinHostPort(a.IP, strconv.Itoa(int(a.Port)))
	if a.Target != a.IP {
		s = a.Target + "=" + s
	}
	return s
}

func describe(a []Addr) []string {
	out := make([]string, len(a))
	for i, x := range a {
		out[i] = x.String()
	}
	return out
}

func diff(old, cur []Addr) (added, removed []string) {
	for _, a := range cur {
		if !slices.Contains(old, a) {
			added = append(added, a.String())
		}
	}
	for _, a := range old {
		if !slices.Contains(cur, a) {
			removed = append(removed, a.String())
		}
	}
	return added, removed
}
