package cli

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A build without Kubernetes mode (-tags nokube) says so, and refuses a
// config with a kubernetes section instead of serving only part of it.
func TestNoKubeBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds sturdy with -tags nokube; skipped under -short")
	}
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "sturdy")
	buildSturdy(t, bin, "v0.0.0-nokube", "-tags", "nokube")
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "without Kubernetes mode") {
		t.Fatalf("version: %v: %s", err, out)
	}
	conf := filepath.Join(dir, "k.yaml")
	if err := os.WriteFile(conf, []byte("admin: { listen: \"off\" }\nkubernetes:\n  ports: [ { port: 80, listen: \"127.0.0.1:0\" } ]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(bin, "run", "-c", conf).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitFail || !strings.Contains(string(out), "built without Kubernetes mode") {
		t.Fatalf("run with a kubernetes section: %v, output:\n%s", err, out)
	}
}
