package compile

import (
	"net/http"
	"slices"
	"testing"
)

// routes[].forwarding_headers keeps only the forwarding headers it lists:
// the others sturdy set are removed before the route's own rules, so a
// request_headers rule for one of them still wins, and a route without the
// key keeps all four (and no routing runtime).
func TestForwardingHeadersKeepOnlyThoseListed(t *testing.T) {
	rt, err := Compile(parse(t, `
listeners: [ { name: web, listen: 127.0.0.1:0 } ]
routes:
  - { name: none, path: /none/, pool: web, forwarding_headers: [] }
  - { name: xff, path: /xff/, pool: web, forwarding_headers: [ x-forwarded-for ] }
  - { name: rule, path: /rule/, pool: web, forwarding_headers: [], request_headers: { set: { X-Real-IP: 10.0.0.1 } } }
  - { name: site, default: true, pool: web }
pools: [ { name: web, hosts: [ { addr: 127.0.0.1:9001 } ] } ]
`), nil, Env{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	want := map[string][]string{
		"none": {},
		"xff":  {"X-Forwarded-For"},
		"rule": {"X-Real-Ip"},
		"site": {"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip"},
	}
	for _, r := range rt.Routes {
		h := http.Header{}
		for _, k := range []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip", "Via"} {
			h.Set(k, "sturdy's")
		}
		if r.Name == "site" {
			if r.Routing != nil {
				t.Errorf("route site has routing compiled in without the key")
			}
		} else {
			r.Routing.Request.Apply(h, nil)
		}
		var got []string
		for k := range h {
			if k != "Via" {
				got = append(got, k)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want[r.Name]) {
			t.Errorf("route %s: the backend would get %v, want %v", r.Name, got, want[r.Name])
		}
		if h.Get("Via") == "" {
			t.Errorf("route %s: Via was removed; the key never touches it", r.Name)
		}
	}
}
