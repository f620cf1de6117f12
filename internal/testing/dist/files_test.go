package dist

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/ops/lint"
)

// repo is the repository root, two levels up from here.
const repo = "../../.."

// Every module linked into sturdy whose license asks for its NOTICE to be
// passed on (Apache-2.0 section 4(d)) is named in NOTICE. The list comes
// from the build, so a new dependency with a NOTICE fails here.
func TestNoticeNamesEveryBundledNotice(t *testing.T) {
	notice, err := os.ReadFile(filepath.Join(repo, "NOTICE"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(notice), "Copyright") || !strings.Contains(string(notice), "The sturdy authors") {
		t.Error("NOTICE lacks the project's copyright line")
	}
	license, err := os.ReadFile(filepath.Join(repo, "LICENSE"))
	if err != nil || !strings.Contains(string(license), "Apache License\n                           Version 2.0, January 2004") ||
		!strings.Contains(string(license), "END OF TERMS AND CONDITIONS") {
		t.Errorf("LICENSE is not the full Apache-2.0 text: %v", err)
	}
	cmd := exec.Command("go", "list", "-deps", "-json=Module", "./cmd/sturdy")
	cmd.Dir = repo
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := map[string]bool{}
	for {
		var p struct {
			Module *struct {
				Path, Dir string
				Main      bool
			}
		}
		if err := dec.Decode(&p); err != nil {
			break
		}
		m := p.Module
		if m == nil || m.Main || seen[m.Path] {
			continue
		}
		seen[m.Path] = true
		if _, err := os.Stat(filepath.Join(m.Dir, "NOTICE")); err == nil && !strings.Contains(string(notice), m.Path) {
			t.Errorf("%s ships a NOTICE file that NOTICE does not reproduce", m.Path)
		}
	}
	if len(seen) == 0 {
		t.Fatal("go list found no dependency")
	}
}

// The configs a release installs pass sturdy check: the packages' default,
// the container image's, and the one in the Kubernetes ConfigMap. The
// first two, which a new user meets before editing anything, without a
// warning either.
func TestShippedConfigsPassCheck(t *testing.T) {
	for _, f := range []string{"contrib/sturdy.yaml", "contrib/docker/sturdy.yaml"} {
		data, err := os.ReadFile(filepath.Join(repo, f))
		if err != nil {
			t.Fatal(err)
		}
		c, err := config.Parse(data, f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		for _, w := range lint.Check(c) {
			t.Errorf("sturdy check warns: %v", w)
		}
	}
	f := "deploy/kubernetes/configmap.yaml"
	data, err := os.ReadFile(filepath.Join(repo, f))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(data, &cm); err != nil || cm.Data["sturdy.yaml"] == "" {
		t.Fatalf("%s: no data.sturdy.yaml: %v", f, err)
	}
	_, err = config.Parse([]byte(cm.Data["sturdy.yaml"]), f+" data.sturdy.yaml")
	var list config.ErrorList
	if errors.As(err, &list) && len(list) == 1 && list[0].Path == "shutdown_delay" {
		// shutdown_delay is written as it will be; until the key exists in
		// internal/config it is the one error allowed here.
		t.Logf("shutdown_delay is not a config key yet: %v", list[0])
		return
	}
	if err != nil {
		t.Errorf("%v", err)
	}
}

// systemd accepts the unit: every key known, every command's binary
// present (a freshly built sturdy stands in for /usr/bin/sturdy), and its
// exposure rating stays below 2.5 ("OK").
func TestSystemdUnitVerifies(t *testing.T) {
	if testing.Short() {
		t.Skip("builds sturdy; skipped with -short")
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (apt-get install systemd); the unit is not verified")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "sturdy")
	build := exec.Command("go", "build", "-o", bin, "./cmd/sturdy")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	unit, err := os.ReadFile(filepath.Join(repo, "contrib/systemd/sturdy.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Type=notify", "User=sturdy", "AmbientCapabilities=CAP_NET_BIND_SERVICE", "ProtectSystem=strict",
		"ProtectHome=yes", "PrivateTmp=yes", "NoNewPrivileges=yes", "ReadWritePaths=/var/lib/sturdy", "LimitNOFILE=1048576",
		"LogsDirectory=sturdy", "RuntimeDirectory=sturdy",
		"ExecStartPre=/usr/bin/sturdy check -q -c /etc/sturdy/sturdy.yaml", "ExecReload=/usr/bin/sturdy reload -c /etc/sturdy/sturdy.yaml"} {
		if !strings.Contains(string(unit), "\n"+want+"\n") {
			t.Errorf("the unit lacks %s", want)
		}
	}
	f := filepath.Join(dir, "sturdy.service")
	os.WriteFile(f, []byte(strings.ReplaceAll(string(unit), "/usr/bin/sturdy", bin)), 0o644)
	out, err := exec.Command(analyze, "verify", "--man=no", f).CombinedOutput()
	if err != nil || len(out) > 0 {
		// Unknown keys are only warnings to systemd; here they fail.
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = exec.Command(analyze, "security", "--offline=yes", "--threshold=25", f).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze security: exposure above 2.5 (25 on its scale of 100): %v\n%s", err, out)
	}
}

// The image's HEALTHCHECK asks /livez of the admin listener the image's
// config sets: a container marked unhealthy is replaced, and /readyz is
// 503 whenever the backends are down, when restarting sturdy mends nothing.
func TestDockerHealthcheckAsksLiveness(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repo, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, part := range strings.Split(strings.ReplaceAll(string(b), "\\\n", " "), "\nHEALTHCHECK ")[1:] {
		n++
		line, _, _ := strings.Cut(part, "\n")
		_, cmd, ok := strings.Cut(line, "CMD ")
		if !ok {
			t.Fatalf("HEALTHCHECK without CMD: %s", line)
		}
		var argv []string
		if err := json.Unmarshal([]byte(cmd), &argv); err != nil {
			t.Fatalf("HEALTHCHECK CMD is not an exec form: %v: %s", err, cmd)
		}
		for _, img := range []struct{ bin, conf string }{{"/usr/bin/sturdy", "contrib/docker/sturdy.yaml"}, {"/usr/bin/sturdy-gateway", "contrib/docker/sturdy-gateway.yaml"}} {
			if len(argv) == 0 || argv[0] != img.bin {
				continue
			}
			cfg, err := config.Load(filepath.Join(repo, img.conf))
			if err != nil {
				t.Fatal(err)
			}
			want := []string{img.bin, "healthcheck", "-q", "-url", "http://" + cfg.Admin.Listen + "/livez"}
			if strings.Join(argv, " ") != strings.Join(want, " ") {
				t.Errorf("HEALTHCHECK CMD %q, want %q", argv, want)
			}
		}
	}
	if n != 2 {
		t.Errorf("%d HEALTHCHECKs; want one per image (sturdy, sturdy-gateway)", n)
	}
}

// The packages' logrotate file is one logrotate accepts, rotates the
// unit's log directory, and has sturdy reopen its files (SIGUSR1) rather
// than copy and truncate them.
func TestLogrotateFile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repo, "contrib/logrotate/sturdy"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"/var/log/sturdy/*.log {", "su sturdy sturdy", "--signal=USR1", "sturdy.service"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the logrotate file lacks %q", want)
		}
	}
	if strings.Contains(string(b), "copytruncate") {
		t.Error("copytruncate loses the lines written between the copy and the truncation")
	}
	nfpm, _ := os.ReadFile(filepath.Join(repo, "packaging/nfpm.yaml"))
	if !strings.Contains(string(nfpm), "src: ./contrib/logrotate/sturdy\n    dst: /etc/logrotate.d/sturdy\n") {
		t.Error("packaging/nfpm.yaml does not install the logrotate file as /etc/logrotate.d/sturdy")
	}
	lr, err := exec.LookPath("logrotate")
	if err != nil {
		t.Skip("logrotate is not installed (apt-get install logrotate); the file's syntax is not checked")
	}
	// A real rotation, in a directory of the test's and as this user
	// (no sturdy user here); the postrotate's systemctl fails quietly.
	dir := t.TempDir()
	logs := filepath.Join(dir, "log")
	os.Mkdir(logs, 0o750)
	os.WriteFile(filepath.Join(logs, "access.log"), []byte("{}\n"), 0o640)
	conf := strings.ReplaceAll(string(b), "/var/log/sturdy", logs)
	conf = strings.ReplaceAll(conf, "sturdy sturdy", "root root")
	f := filepath.Join(dir, "sturdy")
	os.WriteFile(f, []byte(conf), 0o644)
	out, err := exec.Command(lr, "--force", "--verbose", "--state", filepath.Join(dir, "state"), f).CombinedOutput()
	if err != nil || strings.Contains(string(out), "error:") {
		t.Fatalf("logrotate: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(logs, "access.log.1")); err != nil || string(b) != "{}\n" {
		t.Errorf("access.log.1 after the rotation: %q %v\n%s", b, err, out)
	}
	if fi, err := os.Stat(filepath.Join(logs, "access.log")); err != nil || fi.Size() != 0 || fi.Mode().Perm() != 0o640 {
		t.Errorf("a new, empty access.log (0640) after the rotation: %v %v", fi, err)
	}
}
