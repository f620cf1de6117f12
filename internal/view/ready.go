package view

import (
	"fmt"
	"strings"
	"time"
)

// The reasons /readyz gives (Status.NotReady) that another view must
// recognise: the status page shows each under the cause it comes from (a
// route's failing hosts, an expired certificate, the shutdown) instead of
// as one more "Not ready".

// NotReadyDraining is the reason while sturdy shuts down.
const NotReadyDraining = "shutting down: draining in-flight requests"

// NotReadyRoute is the reason for a counted route that has nothing left
// but its sorry page, saying whether its pool's hosts are failing, taken
// out by an operator, or absent (pools: the snapshot's, to look it up).
func NotReadyRoute(r Route, pools []Pool) string {
	var p *Pool
	for i := range pools {
		if pools[i].Name == r.Pool {
			p = &pools[i]
		}
	}
	return fmt.Sprintf("route %s: no backend can answer (%s); only the sorry page is left", r.Name, emptiness(r.Pool, p))
}

// emptiness says why pool name has no host to try.
func emptiness(name string, p *Pool) string {
	if p == nil || len(p.Hosts) == 0 {
		return fmt.Sprintf("pool %s has no hosts: none configured, or its DNS names resolve to no address", name)
	}
	n := map[string]int{}
	for _, h := range p.Hosts {
		n[h.State]++
	}
	failing := n[Down] + n[Ejected] + n[Suspect]
	operator := n[Drained] + n[Maintenance]
	var parts []string
	for _, c := range []struct {
		n    int
		what string
	}{{n[Down], "down on its health checks"}, {n[Ejected], "ejected on its traffic"}, {n[Suspect], "suspect"}, {n[Drained], "drained"}, {n[Maintenance], "in maintenance"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	list := strings.Join(parts, ", ")
	hosts := fmt.Sprintf("its %d hosts are", len(p.Hosts))
	if len(p.Hosts) == 1 {
		hosts = "its one host is"
	}
	switch {
	case operator == 0 && failing == len(p.Hosts):
		return fmt.Sprintf("pool %s is empty: %s failing (%s)", name, hosts, list)
	case failing == 0 && operator == len(p.Hosts):
		return fmt.Sprintf("pool %s is empty: %s taken out by an operator (%s)", name, hosts, list)
	}
	return fmt.Sprintf("pool %s is empty: %s", name, list)
}

// NotReadyCertificate is the reason for an expired certificate, when
// admin.expired_certificate_not_ready asks for it.
func NotReadyCertificate(c Certificate) string {
	return fmt.Sprintf("certificate of listener %s (%s) expired at %s", c.Listener, c.Names, c.NotAfter.UTC().Format(time.RFC3339))
}
