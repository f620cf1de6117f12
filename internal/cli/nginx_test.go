package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// nginxCases is where the nginx test configs and logs live.
const nginxCases = "../adapt/nginx/testdata/cases"

func runNginx(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestDoctorCommand(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		code     int
		inStdout string
		inStderr string
	}{
		{"incident 000", []string{"doctor", "nginx", "-c", nginxCases + "/000-waf-scanner/nginx.conf", "--error-log", nginxCases + "/000-waf-scanner/error.log"}, exitFail, "came from client 123.45.67.5: one client took the pool down", ""},
		{"flags before the subject", []string{"doctor", "-c", nginxCases + "/002-slow-route/nginx.conf", "nginx", "--error-log", nginxCases + "/002-slow-route/error.log"}, exitFail, "POST /mdata/getdistinct: one slow route took the pool down", ""},
		{"config only", []string{"doctor", "nginx", "-c", nginxCases + "/k8s-ingress/nginx.conf"}, exitFail, "passive-5xx", ""},
		{"missing subject", []string{"doctor", "-c", "x"}, exitUsage, "", "missing what to read"},
		{"other subject", []string{"doctor", "haproxy"}, exitUsage, "", `unknown source "haproxy"`},
		{"extra argument", []string{"doctor", "nginx", "extra"}, exitUsage, "", `unexpected argument "extra"`},
		{"bad flag", []string{"doctor", "nginx", "--nope"}, exitUsage, "", "flag provided but not defined"},
		{"help", []string{"doctor", "nginx", "-h"}, exitOK, "", "usage: sturdy doctor nginx"},
		{"missing config", []string{"doctor", "nginx", "-c", "testdata/none.conf"}, exitFail, "", "cannot read nginx config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runNginx(t, tt.args...)
			if code != tt.code || !strings.Contains(stdout, tt.inStdout) || !strings.Contains(stderr, tt.inStderr) {
				t.Errorf("exit %d, want %d\nstdout: %.600s\nstderr: %s", code, tt.code, stdout, stderr)
			}
		})
	}
}

func TestDoctorCleanConfig(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "nginx.conf")
	src := "http { upstream u { server 10.0.0.1:80; } server { listen 80; server_name a.example; error_page 502 503 504 /sorry.html; location / { proxy_pass http://u; } } }\n"
	if err := os.WriteFile(conf, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runNginx(t, "doctor", "nginx", "-c", conf)
	if code != exitOK || !strings.Contains(stdout, "No findings.") {
		t.Errorf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

func TestDoctorJSON(t *testing.T) {
	code, stdout, stderr := runNginx(t, "doctor", "nginx", "--json", "-c", nginxCases+"/003-malformed-url/nginx.conf", "--error-log", nginxCases+"/003-malformed-url/error.log")
	if code != exitFail {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Findings []struct{ ID, Severity, Incident string }
		Summary  struct{ High int }
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("--json output does not decode: %v", err)
	}
	if len(rep.Findings) == 0 || rep.Findings[0].ID != "log-request-ejection" || rep.Summary.High == 0 {
		t.Errorf("report = %+v", rep)
	}
}

func TestImportCommand(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "sturdy.yaml")
	code, stdout, stderr := runNginx(t, "import", "nginx", "-c", nginxCases+"/001-ingress-default-server/nginx.conf", "-o", out)
	if code != exitOK || stdout != "" {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "not translated (all listed at the top of the output)") {
		t.Errorf("stderr = %s", stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := config.Parse(data, out); err != nil {
		t.Errorf("the imported config fails sturdy check: %v", err)
	}

	code, stdout, _ = runNginx(t, "import", "nginx", "-c", nginxCases+"/000-waf-scanner/nginx.conf")
	if code != exitOK || !strings.HasPrefix(stdout, "# sturdy configuration translated from nginx") {
		t.Errorf("import to stdout: exit %d, output %.200s", code, stdout)
	}
}

func TestImportErrors(t *testing.T) {
	php := filepath.Join(t.TempDir(), "php.conf")
	if err := os.WriteFile(php, []byte("http { server { listen 80; location / { fastcgi_pass 127.0.0.1:9000; } } }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"nothing translatable", []string{"import", "nginx", "-c", php}, exitFail, "php.conf:1: server at"},
		{"missing config", []string{"import", "nginx", "-c", "testdata/none.conf"}, exitFail, "cannot read nginx config"},
		{"usage", []string{"import"}, exitUsage, "usage: sturdy import nginx"},
		{"unwritable output", []string{"import", "nginx", "-c", nginxCases + "/002-slow-route/nginx.conf", "-o", filepath.Join(t.TempDir(), "no", "such", "dir.yaml")}, exitFail, "cannot write"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runNginx(t, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, want %d; stderr: %s", code, tt.code, stderr)
			}
		})
	}
}
