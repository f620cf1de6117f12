package view

import "testing"

// The /readyz reason says why the pool has nothing to try: hosts failing,
// hosts an operator took out, or no hosts at all.
func TestNotReadyRouteSaysWhyThePoolIsEmpty(t *testing.T) {
	r := Route{Name: "site", Pool: "web"}
	hosts := func(states ...string) []Pool {
		p := Pool{Name: "web"}
		for _, s := range states {
			p.Hosts = append(p.Hosts, Host{State: s})
		}
		return []Pool{p}
	}
	for _, tc := range []struct {
		pools []Pool
		want  string
	}{
		{hosts(Down, Down, Ejected), "route site: no backend can answer (pool web is empty: its 3 hosts are failing (2 down on its health checks, 1 ejected on its traffic)); only the sorry page is left"},
		{hosts(Down), "route site: no backend can answer (pool web is empty: its one host is failing (1 down on its health checks)); only the sorry page is left"},
		{hosts(Drained, Maintenance), "route site: no backend can answer (pool web is empty: its 2 hosts are taken out by an operator (1 drained, 1 in maintenance)); only the sorry page is left"},
		{hosts(Down, Maintenance), "route site: no backend can answer (pool web is empty: 1 down on its health checks, 1 in maintenance); only the sorry page is left"},
		{hosts(), "route site: no backend can answer (pool web has no hosts: none configured, or its DNS names resolve to no address); only the sorry page is left"},
		{nil, "route site: no backend can answer (pool web has no hosts: none configured, or its DNS names resolve to no address); only the sorry page is left"},
	} {
		if got := NotReadyRoute(r, tc.pools); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}
