package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// kubernetesDeps lists the Kubernetes packages that package pkg links on
// goos, as go build would see them.
func kubernetesDeps(t *testing.T, pkg, goos string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg)
	cmd.Env = append(os.Environ(), "GOOS="+goos)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderrOf(err))
	}
	var kube []string
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "k8s.io/") || strings.HasPrefix(p, "sigs.k8s.io/") {
			kube = append(kube, p)
		}
	}
	return kube
}

func stderrOf(err error) string {
	if e, ok := err.(*exec.ExitError); ok {
		return string(e.Stderr)
	}
	return ""
}

// The sturdy command links no Kubernetes library: client-go's init code
// and type data would double its binary and its resident memory, in file
// mode too. Kubernetes mode is cmd/sturdy-gateway's; an import that pulls
// client-go back into sturdy fails here, with the packages named. The
// same query on sturdy-gateway must find them, or the query is wrong.
func TestSturdyLinksNoKubernetesLibrary(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to list the packages with")
	}
	for _, goos := range []string{"linux", "darwin"} {
		if kube := kubernetesDeps(t, ".", goos); len(kube) > 0 {
			t.Errorf("GOOS=%s: cmd/sturdy links %d Kubernetes packages, among them %s; Kubernetes mode belongs to cmd/sturdy-gateway (go list -deps ./cmd/sturdy shows the way in)", goos, len(kube), strings.Join(kube[:min(len(kube), 5)], ", "))
		}
	}
	if kube := kubernetesDeps(t, "../sturdy-gateway", "linux"); len(kube) == 0 {
		t.Error("cmd/sturdy-gateway links no Kubernetes package either: the query finds nothing")
	}
}
