package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The built sturdy-gateway starts and answers as a command: its help names
// its own commands, --version the stamped version, and run outside a
// cluster says what it is missing and exits 1, as does run on a file
// without a kubernetes section.
func TestGatewayCommandStartsAndAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds sturdy-gateway (client-go takes minutes cold); skipped under -short")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "sturdy-gateway")
	const v = "v0.0.0-gatewaytest"
	build := exec.Command("go", "build", "-o", bin, "-ldflags", "-X github.com/sturdyproxy/sturdy/internal/cli.version="+v, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := func(args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG=", "KUBERNETES_SERVICE_HOST=")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("%s: %v", strings.Join(args, " "), err)
		}
		return cmd.ProcessState.ExitCode(), string(out)
	}
	if code, out := run("--help"); code != 0 || !strings.HasPrefix(out, "usage: sturdy-gateway COMMAND [flags]\n") || !strings.Contains(out, "\n  run ") || strings.Contains(out, "\n  demo ") {
		t.Errorf("--help: exit %d\n%s", code, out)
	}
	if code, out := run("run", "-h"); code != 0 || !strings.HasPrefix(out, "usage: sturdy-gateway run [flags]\n") {
		t.Errorf("run -h: exit %d\n%s", code, out)
	}
	if code, out := run("--version"); code != 0 || !strings.HasPrefix(out, "sturdy-gateway "+v+" ") {
		t.Errorf("--version: exit %d %q; want the stamped %s", code, out, v)
	}
	if code, _ := run("frobnicate"); code != 2 {
		t.Errorf("an unknown command: exit %d, want 2", code)
	}

	kube := filepath.Join(dir, "kube.yaml")
	os.WriteFile(kube, []byte("admin: { listen: 127.0.0.1:0 }\nkubernetes: {}\n"), 0o644)
	if code, out := run("run", "-c", kube); code != 1 || !strings.Contains(out, "no Kubernetes API") {
		t.Errorf("run outside a cluster: exit %d\n%s", code, out)
	}
	file := filepath.Join(dir, "file.yaml")
	os.WriteFile(file, []byte("admin: { listen: \"off\" }\nlisteners: [ { name: web, listen: 127.0.0.1:0 } ]\nroutes: [ { name: a, default: true, pool: web } ]\npools: [ { name: web, hosts: [ { addr: \"127.0.0.1:9\" } ] } ]\n"), 0o644)
	if code, out := run("run", "-c", file); code != 1 || !strings.Contains(out, "no kubernetes section") || strings.Contains(out, "--kubernetes") {
		t.Errorf("run on a file without a kubernetes section: exit %d\n%s", code, out)
	}
}
