package lint

import (
	"strings"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/config"
)

func TestRiskyButValid(t *testing.T) {
	c, err := config.Parse([]byte(`
listeners: [ { name: web, listen: 127.0.0.1:8080 } ]
routes:
  - name: api
    default: true
    pool: web
    timeouts: { response_header: 30s, total: 10s }
    retry: { tries: 4 }
    cache: { enabled: true, stale_if_error_max: 24h, bypass_paths: [ /metrics ] }
pools:
  - { name: web, hosts: [ { addr: 127.0.0.1:9001 }, { addr: 127.0.0.1:9002 } ] }
`), "risky.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range Check(c) {
		got = append(got, w.Error())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{
		"risky.yaml:7: routes[0].timeouts.total: total 10s is not longer than response_header 30s",
		"risky.yaml:8: routes[0].retry.tries: 4 tries but pool \"web\" has 2 hosts",
		"risky.yaml:9: routes[0].cache.stale_if_error_max: stale copies may hide a failing origin for 24h0m0s",
		"risky.yaml:9: routes[0].cache.bypass_paths: the list replaces the default and names no health path",
		"risky.yaml:11: pools[0].health: pool \"web\" ejects hosts on passive evidence alone",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("missing warning %q in:\n%s", want, all)
		}
	}
}

func TestQuietConfigHasNoWarnings(t *testing.T) {
	c, err := config.Parse([]byte(`
listeners: [ { name: web, listen: 127.0.0.1:8080 } ]
routes: [ { name: all, default: true, pool: web } ]
pools:
  - name: web
    hosts: [ { addr: 127.0.0.1:9001 }, { addr: 127.0.0.1:9002 } ]
    health: { active: { path: /healthz } }
`), "quiet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if w := Check(c); len(w) != 0 {
		t.Fatalf("warnings for a sound config: %v", w)
	}
}
