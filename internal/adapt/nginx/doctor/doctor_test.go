package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// cases are the directories under ../testdata/cases; each has nginx.conf
// and optionally error.log(.gz) and access.log.
func cases(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob("../testdata/cases/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no test cases: %v", err)
	}
	for i, d := range dirs {
		dirs[i] = filepath.Base(d)
	}
	return dirs
}

// input builds the doctor input of a case, relative to ../testdata/cases.
func input(dir string) Input {
	in := Input{Config: dir + "/nginx.conf"}
	base := filepath.Join("../testdata/cases", dir)
	for _, n := range []string{"error.log", "error.log.gz"} {
		if _, err := os.Stat(filepath.Join(base, n)); err == nil {
			in.ErrorLogs = append(in.ErrorLogs, dir+"/"+n)
		}
	}
	if _, err := os.Stat(filepath.Join(base, "access.log")); err == nil {
		in.AccessLogs = []string{dir + "/access.log"}
	}
	return in
}

// runCase runs the doctor on a case with the case directory's parent as
// working directory, so that paths in the report are short and stable.
func runCase(t *testing.T, dir string) *Report {
	t.Helper()
	in := input(dir)
	t.Chdir("../testdata/cases")
	rep, err := Run(context.Background(), in)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return rep
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output (run go test -update to accept):\n%s", path, firstDiff(string(want), string(got)))
	}
}

func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(wl), len(gl)); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return "line " + itoa(i+1) + ":\nwant: " + w + "\ngot:  " + g
		}
	}
	return "(no line differs)"
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestGolden(t *testing.T) {
	for _, dir := range cases(t) {
		t.Run(dir, func(t *testing.T) {
			rep := runCase(t, dir)
			var text bytes.Buffer
			if err := rep.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			findings, err := json.MarshalIndent(rep.Findings, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			t.Chdir(filepath.Join("..", "..", "doctor"))
			golden(t, dir+".txt", text.Bytes())
			golden(t, dir+".findings.json", append(findings, '\n'))
		})
	}
}

// TestFirstFindingNamesTheIncident is the acceptance test: on a
// config and log shaped like each incident, the first finding names its
// cause.
func TestFirstFindingNamesTheIncident(t *testing.T) {
	tests := []struct {
		dir, id, incident, inTitle string
	}{
		{"000-waf-scanner", "log-client-ejection", Inc000, "came from client 123.45.67.5: one client took the pool down"},
		{"001-ingress-default-server", "log-default-pool-empty", Inc001, "behind the default server for *:443, *:80"},
		{"002-slow-route", "log-route-ejection", Inc002, "were on POST /mdata/getdistinct: one slow route took the pool down"},
		{"003-malformed-url", "log-request-ejection", Inc003, "raw non-ASCII bytes"},
		{"004-stale-cache", "stale-hid-outage", Inc004, "the cache kept answering for upstream backend_upstream while it failed"},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			rep := runCase(t, tt.dir)
			if len(rep.Findings) == 0 {
				t.Fatal("no findings")
			}
			f := rep.Findings[0]
			if f.ID != tt.id || f.Incident != tt.incident || f.Severity != High || !strings.Contains(f.Title, tt.inTitle) {
				t.Errorf("first finding = %s (%s, %s): %s\nwant %s (%s, high) containing %q", f.ID, f.Incident, f.Severity, f.Title, tt.id, tt.incident, tt.inTitle)
			}
		})
	}
}

// TestConfigOnly checks the config findings each incident-shaped config
// produces without any log.
func TestConfigOnly(t *testing.T) {
	tests := []struct {
		dir  string
		want []string // finding IDs that must be present
		not  []string // and absent
	}{
		{"000-waf-scanner", []string{"passive-5xx", "retry-non-idempotent", "passive-no-zone"}, []string{"ssl-no-certificate", "stale-unbounded"}},
		{"001-ingress-default-server", []string{"default-server-no-fallback", "ssl-no-certificate", "keepalive-oversized", "keepalive-without-http11", "dns-on-data-path"}, []string{"passive-5xx"}},
		{"002-slow-route", []string{"passive-timeout-slow-route", "ip-hash-few-servers"}, []string{"passive-5xx", "ssl-no-certificate"}},
		{"003-malformed-url", []string{"passive-request-ejection"}, []string{"passive-5xx"}},
		{"004-stale-cache", []string{"health-path-cached", "stale-unbounded"}, []string{"passive-no-zone"}},
		{"debian-default", []string{"passive-timeout-slow-route", "default-server-no-fallback"}, []string{"ssl-no-certificate", "passive-5xx"}},
		{"k8s-ingress", []string{"passive-5xx"}, []string{"ssl-no-certificate", "passive-no-zone", "default-server-no-fallback"}},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			t.Chdir("../testdata/cases")
			rep, err := Run(context.Background(), Input{Config: tt.dir + "/nginx.conf"})
			if err != nil {
				t.Fatal(err)
			}
			ids := map[string]bool{}
			for _, f := range rep.Findings {
				ids[f.ID] = true
				if f.File == "" || f.Line == 0 || f.Why == "" || f.NginxFix == "" || f.Sturdy == "" || f.Incident == "" || len(f.Evidence) == 0 {
					t.Errorf("finding %s lacks a field: %+v", f.ID, f)
				}
			}
			for _, id := range tt.want {
				if !ids[id] {
					t.Errorf("missing finding %s; got %v", id, ids)
				}
			}
			for _, id := range tt.not {
				if ids[id] {
					t.Errorf("unexpected finding %s", id)
				}
			}
		})
	}
}

func TestJSONReport(t *testing.T) {
	rep := runCase(t, "001-ingress-default-server")
	var b bytes.Buffer
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Findings []struct {
			ID, Severity, File, Incident string
			Line                         int
		}
		ErrorLog struct {
			Lines    int
			Timeline []struct{ Time string }
			Episodes []struct {
				Upstream         string
				NoLive           int `json:"no_live_upstreams"`
				DistinctBackends int `json:"distinct_backends"`
				DistinctClients  int `json:"distinct_clients"`
			}
			Files []struct{ Gzip bool }
		} `json:"error_log"`
		Summary Summary
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("the JSON report does not decode: %v", err)
	}
	if got.Findings[0].Severity != "high" || got.Findings[0].Line == 0 {
		t.Errorf("first finding = %+v", got.Findings[0])
	}
	if got.Summary.High == 0 || got.ErrorLog.Lines != 750 || !got.ErrorLog.Files[0].Gzip {
		t.Errorf("summary = %+v, lines %d, files %+v", got.Summary, got.ErrorLog.Lines, got.ErrorLog.Files)
	}
	if len(got.ErrorLog.Episodes) != 1 || got.ErrorLog.Episodes[0].Upstream != "default-app" || got.ErrorLog.Episodes[0].DistinctBackends != 3 {
		t.Errorf("episodes = %+v", got.ErrorLog.Episodes)
	}
	if len(got.ErrorLog.Timeline) < 300 {
		t.Errorf("timeline has %d minutes, want the whole 6h38m", len(got.ErrorLog.Timeline))
	}
}

func TestLogsWithoutConfig(t *testing.T) {
	t.Chdir("../testdata/cases")
	rep, err := Run(context.Background(), Input{ErrorLogs: []string{"000-waf-scanner/error.log"}})
	if err != nil {
		t.Fatal(err)
	}
	f := rep.Findings[0]
	if f.ID != "log-client-ejection" || f.File != "000-waf-scanner/error.log" {
		t.Errorf("first finding = %s at %s", f.ID, f.Pos())
	}
}

func TestRunErrors(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want string
	}{
		{"missing config", Input{Config: "testdata/nope.conf"}, "cannot read nginx config"},
		{"bad config", Input{Config: "testdata/broken.conf"}, "testdata/broken.conf:3: unexpected end of file"},
		{"missing log", Input{ErrorLogs: []string{"testdata/nope.log"}}, "cannot open log"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(context.Background(), tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want %q", err, tt.want)
			}
		})
	}
}
