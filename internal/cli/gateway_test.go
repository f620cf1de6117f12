package cli

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/server"
)

// refuseKube stands in for Kubernetes mode where a test must not reach it.
func refuseKube(path string, _ *slog.Logger, _ []server.Option) (*server.Server, error) {
	return nil, errors.New("kubernetes mode was started for " + path)
}

const (
	fileModeConfig = "admin: { listen: \"off\" }\nlisteners: [ { name: web, listen: 127.0.0.1:0 } ]\nroutes: [ { name: a, default: true, pool: web } ]\npools: [ { name: web, hosts: [ { addr: \"127.0.0.1:9\" } ] } ]\n"
	kubeConfig     = "admin: { listen: \"off\" }\nlog: { level: error }\n\nkubernetes: { ports: [ { port: 80, listen: \"127.0.0.1:0\" } ] }\n"
)

func tempConfig(t *testing.T, text string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "sturdy.yaml")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// sturdy serves a file without a kubernetes section and sturdy-gateway one
// with it: run and check of each refuse the other's file, naming the line
// and the command that serves it, instead of serving part of it.
func TestEachCommandRefusesTheOthersConfig(t *testing.T) {
	kube, file := tempConfig(t, kubeConfig), tempConfig(t, fileModeConfig)
	for _, c := range []struct {
		p          *program
		file, want string
	}{
		{sturdy(), kube, kube + ":4: kubernetes: Kubernetes mode is the sturdy-gateway command: serve this file with sturdy-gateway run"},
		{gateway(refuseKube), file, file + ": kubernetes: no kubernetes section: sturdy-gateway needs one"},
	} {
		for _, cmd := range []string{"run", "check"} {
			code, _, stderr := runProgram(c.p, cmd, "-c", c.file)
			if code != exitFail || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "kubernetes mode was started") {
				t.Errorf("%s %s: exit %d, stderr:\n%s\nwant exit 1 and %q", c.p.name, cmd, code, stderr, c.want)
			}
		}
	}
	if code, stdout, stderr := runProgram(gateway(refuseKube), "check", "-c", kube); code != exitOK || !strings.Contains(stdout, kube+": ok") {
		t.Errorf("sturdy-gateway check of a Kubernetes-mode file: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, stderr := run("check", "-c", file); code != exitOK || !strings.Contains(stdout, file+": ok") {
		t.Errorf("sturdy check of a file-mode file: exit %d\n%s%s", code, stdout, stderr)
	}
}

// sturdy-gateway run hands the file to Kubernetes mode's server, under
// the process lifecycle sturdy run has, and exits 1 when it cannot start.
func TestGatewayRunStartsKubernetesMode(t *testing.T) {
	kube := tempConfig(t, kubeConfig)
	var got string
	p := gateway(func(path string, log *slog.Logger, opts []server.Option) (*server.Server, error) {
		got = path
		return refuseKube(path, log, opts)
	})
	code, _, stderr := runProgram(p, "run", "-c", kube)
	if code != exitFail || got != kube {
		t.Errorf("exit %d, Kubernetes mode started for %q; want exit 1 after it started for %s\n%s", code, got, kube, stderr)
	}
}
