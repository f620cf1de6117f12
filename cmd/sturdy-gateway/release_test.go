package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// scripts/release.sh ships sturdy-gateway in a tarball of its own, with
// the manifests, and the licences of what it links: client-go among them.
// It lives here, in the Kubernetes job, because compiling client-go under
// the release's flags takes minutes; the packages' own test
// (internal/testing/dist) builds the release without it.
func TestReleaseHasTheGatewayTarball(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a release of sturdy-gateway (client-go takes minutes cold); skipped under -short")
	}
	for _, tool := range []string{"bash", "tar", "gzip", "sha256sum", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed; the release script needs it", tool)
		}
	}
	const version = "v0.9.1-2-gabcdef0"
	out := t.TempDir()
	cmd := exec.Command("bash", "scripts/release.sh")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "SNAPSHOT=1", "VERSION="+version, "PLATFORMS=linux/"+runtime.GOARCH, "PACKAGES=", "OUT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/release.sh: %v\n%s", err, b)
	}
	name := "sturdy-gateway_" + strings.TrimPrefix(version, "v") + "_linux_" + runtime.GOARCH
	tarball := filepath.Join(out, name+".tar.gz")
	listing, err := exec.Command("tar", "-tzf", tarball).CombinedOutput()
	if err != nil {
		t.Fatalf("tar -tzf %s: %v\n%s", tarball, err, listing)
	}
	for _, f := range []string{"sturdy-gateway", "LICENSE", "NOTICE", "THIRD_PARTY_LICENSES", "README.md", "kubernetes/deployment.yaml", "kubernetes/rbac.yaml"} {
		if !strings.Contains(string(listing), name+"/"+f+"\n") {
			t.Errorf("the sturdy-gateway tarball lacks %s:\n%s", f, listing)
		}
	}
	licenses, err := exec.Command("tar", "-xzOf", tarball, name+"/THIRD_PARTY_LICENSES").CombinedOutput()
	if err != nil {
		t.Fatalf("tar -xzOf %s: %v\n%s", tarball, err, licenses)
	}
	if !strings.Contains(string(licenses), "k8s.io/client-go ") {
		t.Error("sturdy-gateway's THIRD_PARTY_LICENSES does not name client-go, which it links")
	}
	sums := exec.Command("sha256sum", "-c", "SHA256SUMS")
	sums.Dir = out
	if b, err := sums.CombinedOutput(); err != nil {
		t.Errorf("sha256sum -c: %v\n%s", err, b)
	}
}
