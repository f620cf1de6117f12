package telemetry

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const dashboardFile = "../../../contrib/grafana/sturdy.json"

// dashboard is the part of Grafana's dashboard JSON model the test reads.
type dashboard struct {
	Title         string `json:"title"`
	UID           string `json:"uid"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
	Annotations struct {
		List []struct {
			Name string `json:"name"`
			Expr string `json:"expr"`
		} `json:"list"`
	} `json:"annotations"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	GridPos    map[string]int `json:"gridPos"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", dashboardFile, err)
	}
	return d
}

// The dashboard is a Grafana dashboard: a title and uid, a schema version,
// panels with unique ids laid out on the 24-column grid, every query on
// the data source variable, and every sturdy metric it queries one that
// the collector emits (taken from the collector, not from a list).
func TestGrafanaDashboard(t *testing.T) {
	d := loadDashboard(t)
	if d.Title == "" || d.UID == "" || len(d.UID) > 40 || d.SchemaVersion < 30 || len(d.Panels) == 0 {
		t.Fatalf("not a dashboard: title %q uid %q schemaVersion %d, %d panels", d.Title, d.UID, d.SchemaVersion, len(d.Panels))
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" {
		t.Error("no datasource variable: the dashboard would be tied to one Grafana's data source")
	}
	have := emitted(t)
	used := map[string]bool{}
	check := func(where, expr string) {
		if strings.TrimSpace(expr) == "" {
			t.Errorf("%s: empty query", where)
		}
		for _, name := range metricName.FindAllString(expr, -1) {
			used[name] = true
			if !have[name] {
				t.Errorf("%s queries %s, which sturdy does not emit", where, name)
			}
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			check("variable "+v.Name, v.Definition)
		}
	}
	for _, a := range d.Annotations.List {
		if a.Expr != "" {
			check("annotation "+a.Name, a.Expr)
		}
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if p.ID == 0 || ids[p.ID] {
			t.Errorf("%s: id missing or repeated", where)
		}
		ids[p.ID] = true
		g := p.GridPos
		if p.Type == "" || p.Title == "" || g["w"] < 1 || g["h"] < 1 || g["x"] < 0 || g["x"]+g["w"] > 24 || g["y"] < 0 {
			t.Errorf("%s: type %q, gridPos %v", where, p.Type, g)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("%s: no Prometheus query on ${datasource}", where)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("%s: refId missing or repeated", where)
			}
			refs[tg.RefID] = true
			check(where, tg.Expr)
		}
	}
	// What the dashboard is for: requests by route and status class,
	// latency quantiles, host states, ejections, attributed failures,
	// retries, empty pools, stale answers, reloads, per-host latency and
	// bytes.
	for _, m := range []string{"sturdy_requests_total", "sturdy_request_duration_seconds_bucket", "sturdy_host_state",
		"sturdy_host_ejections_total", "sturdy_attributed_failures_total", "sturdy_retries_total", "sturdy_pool_empty",
		"sturdy_cache_results_total", "sturdy_origin_errors_hidden_by_stale_total", "sturdy_config_reloads_total",
		"sturdy_upstream_header_duration_seconds_bucket", "sturdy_upstream_received_bytes_total", "sturdy_upstream_sent_bytes_total"} {
		if !used[m] {
			t.Errorf("no panel shows %s", m)
		}
	}
}

// Every query of the dashboard is valid PromQL: promtool checks them as
// recording rules, with Grafana's variables replaced by what they expand
// to.
func TestGrafanaDashboardQueriesParse(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian: apt-get install -y --no-install-recommends prometheus); the dashboard's PromQL is not parsed")
	}
	d := loadDashboard(t)
	expand := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$instance", ".*", "$route", ".*", "$pool", ".*")
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for _, p := range d.Panels {
		for i, tg := range p.Targets {
			rules = append(rules, rule{Record: fmt.Sprintf("dashboard:panel%d:%d", p.ID, i), Expr: expand.Replace(tg.Expr)})
		}
	}
	for i, a := range d.Annotations.List {
		if a.Expr != "" {
			rules = append(rules, rule{Record: fmt.Sprintf("dashboard:annotation:%d", i), Expr: expand.Replace(a.Expr)})
		}
	}
	doc := map[string]any{"groups": []map[string]any{{"name": "dashboard", "rules": rules}}}
	data, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	os.WriteFile(f, data, 0o644)
	if out, err := exec.Command(promtool, "check", "rules", f).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules on the dashboard's queries: %v\n%s", err, out)
	}
}
