package lint

import (
	"strings"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/config"
)

func grpcWarnings(t *testing.T, yaml string) string {
	t.Helper()
	c, err := config.Parse([]byte(yaml), "g.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range Check(c) {
		if strings.Contains(w.Msg, "gRPC") {
			got = append(got, w.Error())
		}
	}
	return strings.Join(got, "\n")
}

// A catch-all route to an HTTP/1.1 pool on a listener that also carries
// gRPC is named; the same site without gRPC, or with the catch-all on an
// HTTP/2 pool, is not.
func TestCatchAllOnHTTP1BesideGRPC(t *testing.T) {
	const withGRPC = `
listeners: [ { name: edge, listen: 127.0.0.1:8080, h2c: true } ]
routes:
  - { name: svc, path: /pkg.Greeter/, pool: grpc }
  - { name: site, default: true, pool: web }
pools:
  - { name: web, hosts: [ { addr: 127.0.0.1:9001 } ] }
  - { name: grpc, protocol: h2c, hosts: [ { addr: 127.0.0.1:9002 } ] }
`
	got := grpcWarnings(t, withGRPC)
	if want := `g.yaml:5: routes[1].pool: route "site" catches every path on listener "edge", which speaks HTTP/2, and sends to pool "web" over HTTP/1.1, while pool "grpc" speaks HTTP/2 (gRPC)`; !strings.Contains(got, want) {
		t.Errorf("warnings:\n%s\nwant %s", got, want)
	}
	if strings.Count(got, "\n") != 0 {
		t.Errorf("more than one gRPC warning:\n%s", got)
	}
	for name, yaml := range map[string]string{
		"no gRPC pool": `
listeners: [ { name: edge, listen: 127.0.0.1:8080, h2c: true } ]
routes: [ { name: site, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: 127.0.0.1:9001 } ] } ]
`,
		"catch-all on HTTP/2": strings.Replace(withGRPC, "{ name: site, default: true, pool: web }", "{ name: site, default: true, pool: grpc }", 1),
		"HTTP/1.1 listener":   strings.Replace(withGRPC, ", h2c: true", "", 1),
	} {
		if got := grpcWarnings(t, yaml); got != "" {
			t.Errorf("%s: %s", name, got)
		}
	}
}
