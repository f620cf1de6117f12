package lint

import (
	"net/netip"
	"strconv"
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
  - name: shop
    pool: shop
    hosts: [ shop.example.com ]
    fallback: { pool: backup }
    forward_auth: { url: "http://auth.internal/check", pool: auth }
pools:
  - { name: web, hosts: [ { addr: 127.0.0.1:9001 }, { addr: 127.0.0.1:9002 } ] }
  - name: shop
    hosts: [ { addr: 127.0.0.1:9003 }, { addr: 127.0.0.1:9004 } ]
    health: { active: { path: /healthz }, passive: { max_ejected: 100%, min_clients: 1 } }
  - name: backup
    hosts: [ { addr: 127.0.0.1:9005 }, { addr: 127.0.0.1:9006 } ]
    health: { active: { path: /healthz } }
  - { name: spare, hosts: [ { addr: 127.0.0.1:9007 }, { addr: 127.0.0.1:9008 } ], health: { active: { path: /healthz } } }
  - { name: auth, hosts: [ { addr: 127.0.0.1:9009 }, { addr: 127.0.0.1:9010 } ], health: { active: { path: /healthz } } }
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
		"risky.yaml:16: pools[0].health: pool \"web\" ejects hosts on passive evidence alone",
		"risky.yaml:19: pools[1].health.passive.max_ejected: max_ejected 100% lets passive evidence take every host of pool \"shop\" out",
		"risky.yaml:19: pools[1].health.passive.min_clients: min_clients 1 lets one client's failures make a host of pool \"shop\" an outlier",
		"pools[3].name: pool \"spare\" is not used by any route",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("missing warning %q in:\n%s", want, all)
		}
	}
	// A fallback pool is used: by the routes it stands in for; so is the
	// pool of a forward_auth service.
	for _, p := range []string{"backup", "auth"} {
		if strings.Contains(all, `pool "`+p+`" is not used`) {
			t.Errorf("pool %s is reported unused:\n%s", p, all)
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
	if w := check(c, fakeEnv(1<<20, 1<<20)); len(w) != 0 {
		t.Fatalf("warnings for a sound config: %v", w)
	}
}

// fakeEnv is a machine with the given file limits and one address of its
// own, 192.0.2.10.
func fakeEnv(soft, hard uint64) env {
	return env{
		fileLimit:  func() (uint64, uint64, error) { return soft, hard, nil },
		localAddrs: func() []netip.Addr { return []netip.Addr{netip.MustParseAddr("192.0.2.10")} },
	}
}

// A pool host that is one of sturdy's own listeners (or its admin
// listener) is a loop; one on the same port elsewhere is not.
func TestPoolPointingAtSturdyItself(t *testing.T) {
	c, err := config.Parse([]byte(`
admin: { listen: 127.0.0.1:9901 }
listeners:
  - { name: web, listen: 0.0.0.0:8080 }
  - { name: api, listen: 10.1.1.1:8443 }
routes: [ { name: all, default: true, pool: web } ]
pools:
  - name: web
    hosts:
      - { addr: 127.0.0.1:8080 }
      - { addr: "localhost:8080" }
      - { addr: 192.0.2.10:8080 }
      - { addr: 10.1.1.1:8443 }
      - { addr: 127.0.0.1:9901 }
      - { addr: 192.0.2.99:8080 }
      - { addr: 10.1.1.2:8443 }
      - { addr: 127.0.0.1:9902 }
    health: { active: { path: /healthz } }
`), "self.yaml")
	if err != nil {
		t.Fatal(err)
	}
	loops := map[string]bool{}
	for _, w := range check(c, fakeEnv(1<<20, 1<<20)) {
		if strings.Contains(w.Msg, "a loop") {
			loops[w.Path] = true
		}
	}
	for i, want := range []bool{true, true, true, true, true, false, false, false} {
		if p := "pools[0].hosts[" + strconv.Itoa(i) + "].addr"; loops[p] != want {
			t.Errorf("%s: loop warning %v, want %v", p, loops[p], want)
		}
	}
}

// A low file-descriptor limit is a warning, at check and at start; the
// hard limit counts, since sturdy raises the soft one to it.
func TestLowFileLimit(t *testing.T) {
	c, err := config.Parse([]byte(`
listeners: [ { name: web, listen: 127.0.0.1:8080 } ]
routes: [ { name: all, default: true, pool: web } ]
pools:
  - name: web
    max_conns_per_host: 2000
    hosts: [ { addr: 127.0.0.1:9001 }, { addr: 127.0.0.1:9002 } ]
    health: { active: { path: /healthz } }
`), "fd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		soft, hard uint64
		warn       bool
	}{
		{1024, 1024, true},
		{1024, 1 << 20, false}, // raised at start
		{4096, 4096, true},     // 2 hosts x 2000 connections want more
		{16384, 16384, false},
	} {
		got := false
		for _, w := range check(c, fakeEnv(tc.soft, tc.hard)) {
			if strings.Contains(w.Msg, "file descriptor limit") {
				got = true
			}
		}
		if got != tc.warn {
			t.Errorf("soft %d hard %d: warning %v, want %v", tc.soft, tc.hard, got, tc.warn)
		}
	}
}

// A pool that is only a split backend's fallback is used too.
func TestABackendsFallbackPoolIsUsed(t *testing.T) {
	c, err := config.Parse([]byte(`
listeners: [ { name: web, listen: 127.0.0.1:8080 } ]
routes:
  - name: all
    default: true
    backends: [ { pool: blue, weight: 90 }, { pool: green, weight: 10, fallback: spare } ]
pools:
  - { name: blue, hosts: [ { addr: 127.0.0.1:9001 }, { addr: 127.0.0.1:9002 } ], health: { active: { path: /healthz } } }
  - { name: green, hosts: [ { addr: 127.0.0.1:9003 }, { addr: 127.0.0.1:9004 } ], health: { active: { path: /healthz } } }
  - { name: spare, hosts: [ { addr: 127.0.0.1:9005 }, { addr: 127.0.0.1:9006 } ], health: { active: { path: /healthz } } }
`), "split.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range Check(c) {
		if strings.Contains(w.Error(), "not used") {
			t.Errorf("unexpected warning: %v", w)
		}
	}
}

// merge_slashes: false beside a protected path is a warning; the default,
// or a listener without protected routes, says nothing.
func TestKeptSlashesBesideAProtectedPath(t *testing.T) {
	c, err := config.Parse([]byte(`
listeners:
  - { name: web, listen: 127.0.0.1:8080, merge_slashes: false }
  - { name: merged, listen: 127.0.0.1:8081 }
  - { name: objects, listen: 127.0.0.1:8082, merge_slashes: false }
routes:
  - { name: admin, path: /admin/, pool: web, listeners: [web, merged], access: [ { deny: all } ] }
  - { name: site, default: true, pool: web }
pools:
  - { name: web, hosts: [ { addr: 127.0.0.1:9001 } ] }
`), "slashes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range Check(c) {
		if strings.Contains(w.Path, "merge_slashes") {
			got = append(got, w.Error())
		}
	}
	if len(got) != 1 || !strings.Contains(got[0], `slashes.yaml:3: listeners[0].merge_slashes: listener "web" keeps repeated slashes, and route "admin" protects a path with access rules: a request like //admin/`) {
		t.Errorf("warnings about merge_slashes: %q; want one, about listener web and route admin", got)
	}
}
