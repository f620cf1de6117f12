package telemetry

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"

	"github.com/sturdyproxy/sturdy/internal/view"
)

const rulesFile = "../../../examples/prometheus-alerts.yaml"

type ruleFile struct {
	Groups []struct {
		Name  string
		Rules []struct {
			Alert       string
			Expr        string
			For         string
			Labels      map[string]string
			Annotations map[string]string
		}
	}
}

// emitted returns every sample name the collector can produce: a snapshot
// with every optional part set, plus the series names of histograms.
func emitted(t *testing.T) map[string]bool {
	t.Helper()
	st := scenario()
	st.Pools[0].Hosts[0].LastCheck = t0
	st.AccessLog = view.AccessLog{Enabled: true}
	st.Reloads.Last = t0
	st.Certificates = []view.Certificate{{Listener: "https", Names: "a.test", NotAfter: t0, Source: "file"}}
	st.Panics = map[string]uint64{"webhooks": 1}
	st.Access = view.Access{
		RateLimits: []view.RateLimit{{Route: "site", Zone: "z", Key: "client_ip", Decisions: map[string]uint64{"allowed": 1}}},
		Zones:      []view.RateZone{{Zone: "z", Key: "client_ip", Shared: true}},
		ConnLimits: []view.ConnLimit{{Route: "site", Zone: "c", Key: "client_ip"}},
		Auth:       []view.Auth{{Route: "site", Kind: "basic", Results: map[string]uint64{"ok": 1}}},
	}
	st.Edge = view.Edge{Requests: map[string]uint64{"4xx": 1}, Decisions: map[string]map[string]uint64{"client_fault": {"malformed_body": 1}}}
	st.Local = view.Local{Failures: map[string]map[string]uint64{"upstream": {"file_descriptors": 1}}, AcceptErrors: map[string]uint64{"web": 1}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(func() view.Status { return st }))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[mf.GetName()+s] = true
			}
		}
	}
	return names
}

var metricName = regexp.MustCompile(`\bsturdy_[a-zA-Z0-9_]+`)

// Every metric an alert rule uses must be one sturdy emits, or the alert
// can never fire.
func TestAlertRulesUseEmittedMetrics(t *testing.T) {
	data, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(data, &rf); err != nil {
		t.Fatal(err)
	}
	have := emitted(t)
	alerts := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %q: needs alert, expr, labels.severity and annotations.summary", r.Alert)
			}
			used := metricName.FindAllString(r.Expr, -1)
			if len(used) == 0 {
				t.Errorf("rule %s uses no sturdy metric", r.Alert)
			}
			for _, name := range used {
				if !have[name] {
					t.Errorf("rule %s uses %s, which sturdy does not emit", r.Alert, name)
				}
			}
		}
	}
	// The conditions the issue asks alerts for.
	for _, a := range []string{"SturdyPoolEmpty", "SturdyHostOutOfRotationLong", "SturdyOriginErrorRatioHigh", "SturdyStaleMaskingLong", "SturdyRetryBudgetExhausted"} {
		if !alerts[a] {
			t.Errorf("no alert %s", a)
		}
	}
}

// promtool validates the rules and runs their unit tests
// (testdata/alerts_test.yaml: incidents 001 and 004 as series).
func TestAlertRulesWithPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian: apt-get install -y --no-install-recommends prometheus); the rules were checked by TestAlertRulesUseEmittedMetrics only")
	}
	for _, args := range [][]string{
		{"check", "rules", rulesFile},
		{"test", "rules", "testdata/alerts_test.yaml"},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// docs/observability.md must describe every metric sturdy emits.
func TestDocsListEveryMetric(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range emitted(t) {
		if strings.HasSuffix(name, "_bucket") || strings.HasSuffix(name, "_sum") || strings.HasSuffix(name, "_count") {
			continue
		}
		if !strings.Contains(string(doc), "| `"+name+"` |") {
			t.Errorf("docs/observability.md has no table row for %s", name)
		}
	}
}

// docs/observability.md's table of alert rules lists every rule of the
// example file, with the severity the rule carries, and no rule it lacks.
func TestDocsListEveryAlertRule(t *testing.T) {
	data, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(data, &rf); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			rules[r.Alert] = true
			if row := "| `" + r.Alert + "` | " + r.Labels["severity"] + " |"; !strings.Contains(string(doc), row) {
				t.Errorf("docs/observability.md has no row %q", row)
			}
		}
	}
	_, section, _ := strings.Cut(string(doc), "\n## Alert rules\n")
	section, _, _ = strings.Cut(section, "\n## ")
	for _, m := range regexp.MustCompile("(?m)^\\| `(Sturdy[A-Za-z0-9]+)` \\|").FindAllStringSubmatch(section, -1) {
		if !rules[m[1]] {
			t.Errorf("docs/observability.md lists %s, which %s does not have", m[1], rulesFile)
		}
	}
}
