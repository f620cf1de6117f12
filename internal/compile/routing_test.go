package compile

import (
	"strings"
	"testing"
)

// A route hidden for some of its hosts (or listeners) still serves the
// others: a warning, not an error.
func TestPartlyHiddenRouteWarns(t *testing.T) {
	cfg := parse(t, `
listeners: [ { name: web, listen: 127.0.0.1:0 } ]
routes:
  - { name: a-only, hosts: [a.example], path: /x, pool: web }
  - { name: both, hosts: [a.example, b.example], path: /x, pool: web }
  - { name: site, default: true, pool: web }
pools: [ { name: web, hosts: [ { addr: 127.0.0.1:9001 } ] } ]
`)
	rt, err := Compile(cfg, nil, Env{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	var found bool
	for _, w := range rt.Warnings {
		found = found || strings.Contains(w.Error(), "routes[1]: never chosen for a.example on web: routes[0] (a-only) ranks above it")
	}
	if !found {
		t.Fatalf("warnings %v; want routes[1] hidden for a.example", rt.Warnings)
	}
}

// Routes that use no routing feature get none of its runtime.
func TestPlainRoutesHaveNoRouting(t *testing.T) {
	rt, err := Compile(parse(t, twoRoutes), nil, Env{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	for _, r := range rt.Routes {
		if r.Routing != nil || r.HostHeader != nil {
			t.Errorf("route %s has routing features compiled in", r.Name)
		}
	}
}
