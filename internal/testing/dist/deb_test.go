package dist

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// testVersion is what the test release is stamped with: a describe-style
// version, so that its translation to a package version is tested too.
const (
	testVersion    = "v0.9.1-2-gabcdef0"
	testPkgVersion = "0.9.1+2.gabcdef0-1"
)

// buildRelease runs scripts/release.sh for this machine's linux
// architecture and returns the directory it wrote. It leaves out
// sturdy-gateway (GATEWAY=0): compiling client-go under the release's
// flags takes minutes, and cmd/sturdy-gateway's own test checks its
// tarball in the Kubernetes job.
func buildRelease(t *testing.T, packages string) string {
	t.Helper()
	out := t.TempDir()
	cmd := exec.Command("bash", "scripts/release.sh")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "SNAPSHOT=1", "VERSION="+testVersion, "PLATFORMS=linux/"+runtime.GOARCH, "PACKAGES="+packages, "GATEWAY=0", "OUT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/release.sh: %v\n%s", err, b)
	}
	return out
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// The release holds a tarball and a .deb whose checksums verify, the
// tarball has what an install by hand needs, and the .deb installs with
// dpkg: sturdy version and sturdy check work on the installed config, the
// sturdy user exists, files have their modes, systemd accepts the unit.
// Purging it leaves the machine as it was.
func TestDebInstallsAndPurges(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a release and installs it; skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("installing a .deb needs root; run as root (CI does)")
	}
	for _, tool := range []string{"dpkg", "dpkg-deb", "sha256sum", "getent"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: not a Debian-like machine, the .deb is not tested", tool)
		}
	}
	if err := exec.Command("dpkg", "-s", "sturdy").Run(); err == nil {
		t.Skip("a sturdy package is installed on this machine; the test would replace it")
	}
	if _, err := user.Lookup("sturdy"); err == nil {
		t.Skip("a sturdy user exists on this machine; purging the test package would remove it")
	}

	dist := buildRelease(t, "deb rpm")
	checkRPM(t, dist)
	sums := filepath.Join(dist, "SHA256SUMS")
	cmd := exec.Command("sha256sum", "-c", sums)
	cmd.Dir = dist
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sha256sum -c: %v\n%s", err, out)
	}
	tarball := filepath.Join(dist, fmt.Sprintf("sturdy_%s_linux_%s.tar.gz", strings.TrimPrefix(testVersion, "v"), runtime.GOARCH))
	listing := run(t, "tar", "-tzf", tarball)
	top := strings.TrimSuffix(filepath.Base(tarball), ".tar.gz") + "/"
	for _, f := range []string{"sturdy", "LICENSE", "NOTICE", "THIRD_PARTY_LICENSES", "README.md", "sturdy.yaml", "systemd/sturdy.service",
		"sturdy.1.gz", "completions/sturdy.bash", "completions/_sturdy", "completions/sturdy.fish"} {
		if !strings.Contains(listing, top+f+"\n") {
			t.Errorf("the tarball lacks %s:\n%s", f, listing)
		}
	}
	if licenses := run(t, "tar", "-xzOf", tarball, top+"THIRD_PARTY_LICENSES"); strings.Contains(licenses, "k8s.io/") {
		t.Error("sturdy's THIRD_PARTY_LICENSES names Kubernetes modules: the binary links no Kubernetes library")
	}
	deb := filepath.Join(dist, fmt.Sprintf("sturdy_%s_%s.deb", testPkgVersion, runtime.GOARCH))
	if v := strings.TrimSpace(run(t, "dpkg-deb", "-f", deb, "Version")); v != testPkgVersion {
		t.Errorf("package version %q, want %q", v, testPkgVersion)
	}

	// Registered before the install, so that a failure half-way still
	// purges what got in.
	t.Cleanup(func() {
		if out, err := exec.Command("dpkg", "--purge", "sturdy").CombinedOutput(); err != nil {
			t.Errorf("dpkg --purge: %v\n%s", err, out)
		}
	})
	run(t, "dpkg", "-i", deb)

	if out := run(t, "/usr/bin/sturdy", "version"); !strings.HasPrefix(out, "sturdy "+testVersion) {
		t.Errorf("sturdy version: %q; want the stamped %s", out, testVersion)
	}
	if out := run(t, "/usr/bin/sturdy", "check", "-c", "/etc/sturdy/sturdy.yaml"); !strings.Contains(out, "/etc/sturdy/sturdy.yaml: ok") {
		t.Errorf("sturdy check: %q", out)
	}
	// The user: a system account that cannot log in, at home in the state directory.
	u, err := user.Lookup("sturdy")
	if err != nil {
		t.Fatalf("no sturdy user after install: %v", err)
	}
	passwd := strings.Split(strings.TrimSpace(run(t, "getent", "passwd", "sturdy")), ":")
	if len(passwd) != 7 || passwd[5] != "/var/lib/sturdy" || !strings.HasSuffix(passwd[6], "nologin") {
		t.Errorf("passwd entry %q", passwd)
	}
	if uid := atoi(u.Uid); uid == 0 || uid >= 1000 {
		t.Errorf("uid %d: not a system account", uid)
	}
	g, err := user.LookupGroup("sturdy")
	if err != nil {
		t.Fatalf("no sturdy group: %v", err)
	}
	for _, tc := range []struct {
		path     string
		mode     os.FileMode
		uid, gid string
	}{
		{"/usr/bin/sturdy", 0o755, "0", "0"},
		{"/usr/lib/systemd/system/sturdy.service", 0o644, "0", "0"},
		{"/etc/sturdy", os.ModeDir | 0o755, "0", "0"},
		{"/etc/sturdy/sturdy.yaml", 0o640, "0", g.Gid},
		{"/var/lib/sturdy", os.ModeDir | 0o750, u.Uid, g.Gid},
		{"/usr/share/man/man1/sturdy.1.gz", 0o644, "0", "0"},
		{"/usr/share/bash-completion/completions/sturdy", 0o644, "0", "0"},
		{"/usr/share/doc/sturdy/LICENSE", 0o644, "0", "0"},
		{"/usr/share/doc/sturdy/NOTICE", 0o644, "0", "0"},
		{"/etc/logrotate.d/sturdy", 0o644, "0", "0"},
	} {
		fi, err := os.Stat(tc.path)
		if err != nil {
			t.Errorf("%s: %v", tc.path, err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode() != tc.mode || fmt.Sprint(st.Uid) != tc.uid || fmt.Sprint(st.Gid) != tc.gid {
			t.Errorf("%s: %v %d:%d; want %v %s:%s", tc.path, fi.Mode(), st.Uid, st.Gid, tc.mode, tc.uid, tc.gid)
		}
	}
	if conf := run(t, "dpkg-query", "-W", "-f=${Conffiles}", "sturdy"); !strings.Contains(conf, "/etc/sturdy/sturdy.yaml") || !strings.Contains(conf, "/etc/logrotate.d/sturdy") {
		t.Errorf("the config is not a conffile (an upgrade would overwrite edits): %q", conf)
	}
	// The installed unit, as it is, with the man page its Documentation= names.
	if analyze, err := exec.LookPath("systemd-analyze"); err == nil {
		if out, err := exec.Command(analyze, "verify", "/usr/lib/systemd/system/sturdy.service").CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("systemd-analyze verify of the installed unit: %v\n%s", err, out)
		}
	} else {
		t.Log("systemd-analyze is not installed; the installed unit is not verified")
	}
	if out, err := exec.Command("bash", "-n", "/usr/share/bash-completion/completions/sturdy").CombinedOutput(); err != nil {
		t.Errorf("the installed bash completion: %v\n%s", err, out)
	}

	// Purge now, and check that nothing is left behind.
	run(t, "dpkg", "--purge", "sturdy")
	for _, p := range []string{"/usr/bin/sturdy", "/etc/sturdy", "/var/lib/sturdy", "/usr/lib/systemd/system/sturdy.service", "/usr/share/doc/sturdy", "/etc/logrotate.d/sturdy"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s is left after dpkg --purge", p)
		}
	}
	if _, err := user.Lookup("sturdy"); err == nil {
		t.Error("the sturdy user is left after dpkg --purge")
	}
	if _, err := user.LookupGroup("sturdy"); err == nil {
		t.Error("the sturdy group is left after dpkg --purge")
	}
}

// checkRPM reads the .rpm with rpm itself (there is no rpm-based system
// here to install it on): its metadata, files and modes, its config file,
// and its scripts.
func checkRPM(t *testing.T, dist string) {
	t.Helper()
	rpms, _ := filepath.Glob(filepath.Join(dist, "*.rpm"))
	if len(rpms) != 1 {
		t.Fatalf("%d .rpm files in the release", len(rpms))
	}
	if _, err := exec.LookPath("rpm"); err != nil {
		t.Log("rpm is not installed (apt-get install rpm); the .rpm is not read")
		return
	}
	rpm := rpms[0]
	want := "sturdy " + strings.TrimSuffix(testPkgVersion, "-1") + " 1 Apache-2.0\n"
	if got := run(t, "rpm", "-qp", "--qf", "%{NAME} %{VERSION} %{RELEASE} %{LICENSE}\\n", rpm); got != want {
		t.Errorf("rpm metadata %q, want %q", got, want)
	}
	if got := run(t, "rpm", "-qp", "--configfiles", rpm); got != "/etc/logrotate.d/sturdy\n/etc/sturdy/sturdy.yaml\n" {
		t.Errorf("rpm config files %q", got)
	}
	dump := run(t, "rpm", "-qp", "--dump", rpm)
	for _, f := range []string{"/usr/bin/sturdy 0100755", "/usr/lib/systemd/system/sturdy.service 0100644", "/etc/sturdy/sturdy.yaml 0100644",
		"/var/lib/sturdy 040750", "/usr/share/zsh/site-functions/_sturdy 0100644", "/usr/share/man/man1/sturdy.1.gz 0100644"} {
		name, mode, _ := strings.Cut(f, " ")
		found := false
		for _, l := range strings.Split(dump, "\n") {
			fields := strings.Fields(l)
			if len(fields) > 5 && fields[0] == name && fields[4] == mode {
				found = true
			}
		}
		if !found {
			t.Errorf("rpm lacks %s with mode %s", name, mode)
		}
	}
	if scripts := run(t, "rpm", "-qp", "--scripts", rpm); !strings.Contains(scripts, "useradd --system") || !strings.Contains(scripts, "preuninstall scriptlet") {
		t.Errorf("rpm scripts lack the user creation or the pre-uninstall stop:\n%s", scripts)
	}
}

func atoi(s string) int {
	n := 0
	fmt.Sscan(s, &n)
	return n
}
