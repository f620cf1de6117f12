package dist

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A release is built only from a clean, tagged commit, with the tag as its
// version; anything else needs SNAPSHOT=1. The script is run in a scratch
// repository of its own, where it stops before building anything.
func TestReleaseRefusesAnUntaggedCommit(t *testing.T) {
	dir := t.TempDir()
	script, err := os.ReadFile(filepath.Join(repo, "scripts/release.sh"))
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "scripts"), 0o755)
	os.WriteFile(filepath.Join(dir, "scripts/release.sh"), script, 0o755)
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	release := func(env ...string) (string, bool) {
		cmd := exec.Command("bash", "scripts/release.sh")
		cmd.Dir = dir
		// PLATFORMS names none, so that a release let through stops at
		// once instead of building.
		cmd.Env = append(append(os.Environ(), "PLATFORMS=none/none", "PACKAGES=", "OUT="+t.TempDir()), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err == nil
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-qm", "one")
	if out, ok := release(); ok || !strings.Contains(out, "is not a tagged version") {
		t.Errorf("an untagged commit: ok=%v\n%s", ok, out)
	}
	git("tag", "-a", "v1.2.3", "-m", "v1.2.3")
	if out, _ := release(); !strings.Contains(out, "release: sturdy v1.2.3 (") {
		t.Errorf("the tagged commit is not released as v1.2.3:\n%s", out)
	}
	if out, _ := release("VERSION=v9.9.9"); !strings.Contains(out, "is not the tag v1.2.3") {
		t.Errorf("a VERSION that is not the tag:\n%s", out)
	}
	os.WriteFile(filepath.Join(dir, "scripts/release.sh"), append(script, '\n'), 0o755)
	if out, ok := release(); ok || !strings.Contains(out, "uncommitted changes") {
		t.Errorf("a dirty tree: ok=%v\n%s", ok, out)
	}
	if out, _ := release("SNAPSHOT=1"); !strings.Contains(out, "release: sturdy v1.2.3-dirty") {
		t.Errorf("a snapshot of the dirty tree is not versioned as one:\n%s", out)
	}
}
