package drill

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// operatorConfig is a config as an operator would write it: real
// addresses, a DNS name, an admin listener and a webhook, none of which the
// drill may touch.
const operatorConfig = `
admin: { listen: "127.0.0.1:9901" }
listeners: [ { name: web, listen: "0.0.0.0:8080" } ]
routes:
  - { name: shop, hosts: [ shop.example.com ], pool: shop }
  - { name: api, hosts: [ "*.api.example.com" ], path: /v1/, pool: shop, timeouts: { response_header: 500ms } }
  - { name: catchall, default: true, pool: default }
pools:
  - name: shop
    hosts: [ { addr: "10.0.0.1:80" }, { addr: "10.0.0.2:80", weight: 3 }, { addr: "10.0.0.3:80" } ]
  - name: default
    hosts: [ { addr: "backend.internal:80" } ]
webhooks: [ { name: ops, url: "https://hooks.example.com/drill-must-not-call" } ]
`

func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "sturdy.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func stageOf(t *testing.T, name string) *stage {
	t.Helper()
	scs, err := Select([]string{name})
	if err != nil {
		t.Fatal(err)
	}
	// Each scenario builds its stage inside run; capture it through a
	// target that records the layout request and stops there.
	rec := &recordingTarget{}
	RunOne(context.Background(), rec, scs[0], short(), 0)
	if rec.st == nil {
		t.Fatalf("%s asked for no layout", name)
	}
	return rec.st
}

// recordingTarget keeps the stage a scenario asks for and refuses to run it.
type recordingTarget struct{ st *stage }

func (r *recordingTarget) Name() string { return "recorder" }
func (r *recordingTarget) layout(st *stage) (layout, error) {
	r.st = st
	return layout{skip: "recorded"}, nil
}
func (r *recordingTarget) start(context.Context, *stage) (proxy, error) { panic("not started") }

func TestMapOperatorConfig(t *testing.T) {
	path := writeConfig(t, operatorConfig)
	tg, err := FromConfig(path, "")
	if err != nil {
		t.Fatal(err)
	}
	ft := tg.(*fileTarget)
	cases := []struct {
		scenario string
		hosts    map[string]int
		roles    map[string]string // role -> "host path"
		skip     string
	}{
		{scenario: "waf-scanner", hosts: map[string]int{"main": 3}, roles: map[string]string{"site": "shop.example.com /drill/"}},
		{scenario: "slow-route", hosts: map[string]int{"main": 3}, roles: map[string]string{
			"slow": "drill.api.example.com /v1/drill-slow/", "fast": "shop.example.com /drill-fast/"}},
		{scenario: "empty-default", hosts: map[string]int{"main": 1, "other": 3}, roles: map[string]string{
			"default": unmatchedHost + " /", "named": "shop.example.com /drill/"}},
		{scenario: "stale-mask", skip: `no route on pool "shop" has the cache enabled`},
	}
	for _, c := range cases {
		st := stageOf(t, c.scenario)
		lay, err := ft.layout(st)
		if err != nil {
			t.Fatal(err)
		}
		if c.skip != "" {
			if !strings.Contains(lay.skip, c.skip) {
				t.Errorf("%s: skip %q, want %q", c.scenario, lay.skip, c.skip)
			}
			continue
		}
		if lay.skip != "" {
			t.Errorf("%s: skipped: %s", c.scenario, lay.skip)
			continue
		}
		for role, n := range c.hosts {
			if lay.hosts[role] != n {
				t.Errorf("%s: %d hosts for %s, want %d", c.scenario, lay.hosts[role], role, n)
			}
		}
		m := ft.mapConfig(mustLoad(t, path), st)
		for role, want := range c.roles {
			got := m.roles[role].host + " " + m.roles[role].path
			if got != want {
				t.Errorf("%s: role %s reaches %q, want %q", c.scenario, role, got, want)
			}
		}
	}
	if _, err := FromConfig(path, "nope"); err == nil || !strings.Contains(err.Error(), "its pools are shop, default") {
		t.Errorf("unknown pool: %v", err)
	}
}

// The drill runs an operator's config with its pool swapped for fakes and
// nothing else reaching outside: the run completes (no real backend, DNS
// name, admin port or webhook was needed) and is judged.
func TestOperatorConfigRuns(t *testing.T) {
	tg, err := FromConfig(writeConfig(t, operatorConfig), "shop")
	if err != nil {
		t.Fatal(err)
	}
	scs, _ := Select([]string{"waf-scanner"})
	r, err := RunOne(context.Background(), tg, scs[0], short(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s %v", r.Verdict, r.Why, r.Facts)
	if r.Target != "sturdy (sturdy.yaml)" || r.Innocent.Requests == 0 || r.Bad.Requests == 0 {
		t.Errorf("target %q, %d innocent and %d bad requests", r.Target, r.Innocent.Requests, r.Bad.Requests)
	}
	if r.Verdict != Pass {
		t.Errorf("defaults with a WAF: %s: %s", r.Verdict, r.Why)
	}
}

func mustLoad(t *testing.T, path string) *config.Config {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
