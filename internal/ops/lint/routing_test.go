package lint

import (
	"strings"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// Header rules may replace sturdy's forwarding and identity headers, but
// not by accident: check says so. Pools used only through backends or a
// mirror are used.
func TestHeaderRulesOnSturdysHeaders(t *testing.T) {
	c, err := config.Parse([]byte(`
listeners: [ { name: web, listen: 127.0.0.1:8080 } ]
request_id: {}
routes:
  - name: site
    default: true
    backends: [ { pool: web } ]
    mirror: { pool: shadow }
    request_headers:
      set: { X-Forwarded-For: "$remote_addr", X-Client-Cert-Subject: "CN=x", X-Request-ID: "mine", X-Fine: ok }
      remove: [ X-Real-IP ]
pools:
  - { name: web, hosts: [ { addr: 127.0.0.1:9001 }, { addr: 127.0.0.1:9002 } ], health: { active: { path: /healthz } } }
  - { name: shadow, hosts: [ { addr: 127.0.0.1:9003 }, { addr: 127.0.0.1:9004 } ], health: { active: { path: /healthz } } }
`), "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range Check(c) {
		got = append(got, w.Error())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{
		"routes[0].request_headers.set.X-Forwarded-For: this rule replaces sturdy's own X-Forwarded-For",
		"routes[0].request_headers.set.X-Client-Cert-Subject: this rule replaces X-Client-Cert-Subject, which sturdy sets only from a verified client certificate",
		"routes[0].request_headers.set.X-Request-ID: this rule replaces X-Request-ID, which carries the request id",
		"routes[0].request_headers.remove[0]: this rule removes sturdy's own X-Real-IP",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("missing warning %q in:\n%s", want, all)
		}
	}
	if strings.Contains(all, "X-Fine") || strings.Contains(all, "not used by any route") {
		t.Errorf("unexpected warning in:\n%s", all)
	}
}
