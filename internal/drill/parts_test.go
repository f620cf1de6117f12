package drill

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

var staleLabelCases = []struct {
	cs      string
	status  int
	stale   bool
	present bool
}{
	{"", 200, false, false},
	{"sturdy; hit; ttl=1", 200, false, true},
	{"sturdy; fwd=uri-miss; fwd-status=200; stored", 200, false, true},
	{"sturdy; fwd=stale; fwd-status=200; stored", 200, false, true},                              // refreshed: a fresh answer
	{"sturdy; fwd=stale; fwd-status=502; detail=error-status", 502, false, true},                 // the origin's error, passed on
	{"sturdy; fwd=stale; fwd-status=502; detail=stale-if-error", 200, true, true},                // a copy instead of the 502
	{"sturdy; fwd=stale; fwd-status=502", 200, true, true},                                       // a copy, no detail
	{"sturdy; fwd=stale; detail=\"no backend available\"", 200, true, true},                      // pool empty: origin not asked
	{"sturdy; hit; detail=stale-while-revalidate", 200, true, true},                              // served while refreshing
	{"sturdy; fwd=stale; fwd-status=304", 200, false, true},                                      // revalidated
	{"OtherCDN; hit, sturdy; fwd=stale; fwd-status=503; detail=stale-if-error", 200, true, true}, // a list
}

func TestStaleLabel(t *testing.T) {
	for _, c := range staleLabelCases {
		stale, present := staleLabel(c.cs, c.status)
		if stale != c.stale || present != c.present {
			t.Errorf("staleLabel(%q, %d) = %v, %v; want %v, %v", c.cs, c.status, stale, present, c.stale, c.present)
		}
	}
}

func TestAnalyzeErrorLog(t *testing.T) {
	log := `2026/11/29 20:21:36 [error] 3374#3374: *2 upstream prematurely closed connection while reading response header from upstream, client: 127.10.102.1
2026/11/29 20:21:36 [warn] 3374#3374: *2 upstream server temporarily disabled while reading response header from upstream, client: 127.10.102.1
2026/11/29 20:21:36 [error] 3374#3374: *5 no live upstreams while connecting to upstream, client: 127.10.2.1
2026/11/29 20:21:36 [error] 3374#3374: *6 no live upstreams while connecting to upstream, client: 127.10.3.1
2026/11/29 20:21:38 [error] 3374#3374: *7 no live upstreams while connecting to upstream, client: 127.10.4.1
2026/11/29 20:21:38 [notice] 3374#3374: signal process started
`
	o := analyzeErrorLog(strings.NewReader(log))
	if o.logLines != 4 || o.ejections != 1 || o.poolEmpty != 2*time.Second || !o.estimated {
		t.Errorf("lines %d ejections %d empty %s estimated %v; want 4 1 2s true", o.logLines, o.ejections, o.poolEmpty, o.estimated)
	}
}

func TestSelect(t *testing.T) {
	got, err := Select([]string{"waf-scanner", "stale-mask/outage"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.Name)
	}
	if want := "waf-scanner waf-scanner/reset stale-mask/outage"; strings.Join(names, " ") != want {
		t.Errorf("got %v, want %s", names, want)
	}
	if _, err := Select([]string{"waf"}); err == nil || !strings.Contains(err.Error(), "known: waf-scanner") {
		t.Errorf("unknown name: %v", err)
	}
	if all, _ := Select(nil); len(all) != len(Scenarios()) {
		t.Errorf("no names selected %d scenarios", len(all))
	}
}

func TestReportTables(t *testing.T) {
	r := NewReport("sturdy drill --against nginx", Options{})
	r.Targets = []TargetReport{
		{Target: "sturdy", Results: []*Result{{Scenario: "waf-scanner", Incident: "000", Verdict: Pass, Why: "fine | really", Headline: "innocent clients: 0 errors",
			Innocent: Group{Requests: 10, Answers: map[string]int{"200": 10}}, Bad: &Group{Requests: 5}}}},
		{Target: "nginx", Comparison: true, Results: []*Result{{Scenario: "waf-scanner", Incident: "000", Verdict: Fail, Why: "502s", Headline: "innocent clients: 502×9",
			Innocent: Group{Requests: 10, Answers: map[string]int{"200": 1, "502": 9}, Failures: 9}, PoolEmptySeconds: 3, PoolEmptyEstimated: true}}},
	}
	var md, txt bytes.Buffer
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| waf-scanner | pass — innocent clients: 0 errors | fail — innocent clients: 502×9 |",
		"| waf-scanner (000) | 10 | 0 | 5 | 0 | 0s | – | 0 | **pass**: fine \\| really |",
		"| waf-scanner (000) | 10 | 502×9 | – | 0 | ≈3.0s | – | 0 | **fail**: 502s |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	if !strings.Contains(txt.String(), "waf-scanner: FAIL: 502s") {
		t.Errorf("text:\n%s", txt.String())
	}
	if r.Failed() {
		t.Error("nginx failing made the report failed")
	}
}
