package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

const jsonLogConfig = `
admin: { listen: "{{admin}}" }
pid_file: "{{pidfile}}"
log: { format: json, access: { enabled: true, path: "{{access}}" } }
shared_limits: { redis: "{{redis}}" }
rate_limit_zones: [ { name: shared, rate: 1000r/s, shared: true } ]
listeners: [ { name: web, listen: "{{web}}" } ]
routes: [ { name: site, default: true, pool: web, rate_limit: [ { zone: shared, burst: 100, nodelay: true } ] } ]
pools: [ { name: web, hosts: [ { addr: "{{b1}}" } ] } ]
`

// With log.format json every line sturdy writes is a JSON record, the
// lines of the libraries it links included: go-redis's about a Redis that
// is down among them. After logrotate renamed the access log, sturdy
// reopen (SIGUSR1) makes sturdy write to a new file at the path.
func TestLogsAreJSONAndReopen(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the sturdy binary; -short skips it")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "sturdy")
	buildSturdy(t, bin, "v-json")
	admin, web := freeAddr(t), freeAddr(t)
	cfg := filepath.Join(dir, "sturdy.yaml")
	access := filepath.Join(dir, "access.log")
	writeConfig(t, cfg, jsonLogConfig, map[string]string{
		"admin": admin, "web": web, "redis": freeAddr(t), "b1": backendAt(t, "127.1.0.1", "b1"),
		"pidfile": filepath.Join(dir, "sturdy.pid"), "access": access,
	})
	p := startProcess(t, bin, cfg)
	if !testutil.Eventually(10*time.Second, func() bool { _, err := status(admin); return err == nil }) {
		t.Fatal("sturdy did not start")
	}
	for range 5 {
		resp, err := http.Get("http://" + web + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	var lines []string
	if !testutil.Eventually(5*time.Second, func() bool {
		b, _ := os.ReadFile(p.logs.Name())
		lines = strings.Split(strings.TrimSpace(string(b)), "\n")
		return strings.Contains(string(b), "go-redis")
	}) {
		t.Fatalf("no line of go-redis in the log:\n%s", strings.Join(lines, "\n"))
	}
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Errorf("not a JSON record: %q", l)
		}
	}

	if !testutil.Eventually(5*time.Second, func() bool { b, _ := os.ReadFile(access); return strings.Count(string(b), "\n") >= 5 }) {
		t.Fatal("the access log lacks the 5 requests")
	}
	if err := os.Rename(access, access+".1"); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	if code := sturdy().cmdReopen(context.Background(), []string{"-c", cfg}, &out, &errb); code != 0 {
		t.Fatalf("sturdy reopen: exit %d: %s%s", code, out.String(), errb.String())
	}
	get := func() {
		resp, err := http.Get("http://" + web + "/after")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if !testutil.Eventually(5*time.Second, func() bool { get(); b, _ := os.ReadFile(access); return strings.Contains(string(b), "/after") }) {
		t.Fatal("no new access log at the path after sturdy reopen")
	}
	if b, _ := os.ReadFile(access + ".1"); strings.Contains(string(b), "/after") {
		// Requests before the signal arrived may land there; none after
		// the new file has its first line.
		n := strings.Count(string(b), "/after")
		get()
		if b2, _ := os.ReadFile(access + ".1"); strings.Count(string(b2), "/after") != n {
			t.Error("the rotated file still gets lines after the reopen")
		}
	}
}

// sturdy check fails, naming the key, when a log file or the pid file
// could not be written by this user: a directory that does not exist (the
// package's unit creates /var/log/sturdy and /run/sturdy; a hand-written
// one may not).
func TestCheckReportsUnwritableLogPaths(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sturdy.yaml")
	writeConfig(t, cfg, `
admin: { listen: "off" }
pid_file: "{{dir}}/run/sturdy.pid"
log:
  access: { enabled: true, path: "{{dir}}/log/access.log" }
listeners: [ { name: web, listen: "127.0.0.1:8080" } ]
routes: [ { name: site, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: "127.0.0.1:9001" }, { addr: "127.0.0.1:9002" } ], health: { active: { path: /healthz } } } ]
`, map[string]string{"dir": dir})
	var out, errb strings.Builder
	code := sturdy().cmdCheck(context.Background(), []string{"-q", "-c", cfg}, &out, &errb)
	got := errb.String()
	if code != exitFail {
		t.Fatalf("exit %d, want %d: %s%s", code, exitFail, out.String(), got)
	}
	for _, want := range []string{
		cfg + ":3: pid_file: sturdy cannot write " + dir + "/run/sturdy.pid",
		cfg + ":5: log.access.path: sturdy cannot write " + dir + "/log/access.log",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	os.Mkdir(filepath.Join(dir, "run"), 0o755)
	os.Mkdir(filepath.Join(dir, "log"), 0o755)
	out.Reset()
	errb.Reset()
	if code := sturdy().cmdCheck(context.Background(), []string{"-q", "-c", cfg}, &out, &errb); code != exitOK {
		t.Errorf("with the directories: exit %d: %s", code, errb.String())
	}
}
