package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// completionScript writes `sturdy completion SHELL` to a file.
func completionScript(t *testing.T, shell string) string {
	t.Helper()
	code, out, stderr := run("completion", shell)
	if code != exitOK || out == "" {
		t.Fatalf("completion %s: exit %d %s", shell, code, stderr)
	}
	f := filepath.Join(t.TempDir(), "sturdy."+shell)
	if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func needShell(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed (apt-get install %s); its completion script is untested", name, name)
	}
	return p
}

func TestCompletionArguments(t *testing.T) {
	if code, _, _ := run("completion"); code != exitUsage {
		t.Errorf("no shell: exit %d", code)
	}
	if code, _, stderr := run("completion", "tcsh"); code != exitUsage || !strings.Contains(stderr, `unknown shell "tcsh"`) {
		t.Errorf("tcsh: exit %d %q", code, stderr)
	}
}

// The bash script parses, and completing real command lines in bash gives
// commands, a command's flags, files after -c and drill scenarios.
func TestBashCompletion(t *testing.T) {
	bash := needShell(t, "bash")
	script := completionScript(t, "bash")
	if out, err := exec.Command(bash, "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "site.yaml"), nil, 0o644)
	complete := func(line string) []string {
		t.Helper()
		// COMP_WORDS as bash splits the line; a trailing space starts a new word.
		words := strings.Fields(line)
		if strings.HasSuffix(line, " ") {
			words = append(words, "")
		}
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "'" + w + "'"
		}
		prog := "source " + script + "; COMP_WORDS=(" + strings.Join(quoted, " ") + "); COMP_CWORD=" +
			strconv.Itoa(len(words)-1) + "; _sturdy; printf '%s\\n' \"${COMPREPLY[@]}\""
		cmd := exec.Command(bash, "--norc", "--noprofile", "-c", prog)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", line, err, out)
		}
		return strings.Fields(string(out))
	}
	for _, tc := range []struct {
		line string
		want []string
		not  []string
	}{
		{"sturdy ch", []string{"check"}, []string{"run"}},
		{"sturdy ", []string{"run", "check", "validate", "drill", "completion", "man", "--version"}, nil},
		{"sturdy check -", []string{"-c", "-q", "--help"}, []string{"--json"}},
		{"sturdy validate -c si", []string{"site.yaml"}, nil},
		{"sturdy drill waf", []string{"waf-scanner", "waf-scanner/reset"}, []string{"slow-route"}},
		{"sturdy drill --", []string{"--against", "--duration", "--json"}, nil},
		{"sturdy doctor ", []string{"nginx"}, nil},
		{"sturdy doctor nginx --error-log si", []string{"site.yaml"}, nil},
		{"sturdy completion ", []string{"bash", "zsh", "fish"}, nil},
	} {
		got := complete(tc.line)
		for _, w := range tc.want {
			if !slices.Contains(got, w) {
				t.Errorf("%q: %q missing from %q", tc.line, w, got)
			}
		}
		for _, w := range tc.not {
			if slices.Contains(got, w) {
				t.Errorf("%q: %q should not be offered: %q", tc.line, w, got)
			}
		}
	}
}

// The zsh script parses and registers _sturdy for sturdy with compinit.
func TestZshCompletion(t *testing.T) {
	zsh := needShell(t, "zsh")
	script := completionScript(t, "zsh")
	if out, err := exec.Command(zsh, "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("zsh -n: %v\n%s", err, out)
	}
	home := t.TempDir()
	cmd := exec.Command(zsh, "-f", "-c", "autoload -U compinit && compinit -u -d "+home+"/zcompdump && source "+script+" && print -r -- $_comps[sturdy]")
	cmd.Env = append(os.Environ(), "HOME="+home)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "_sturdy" {
		t.Fatalf("zsh did not register _sturdy: %v\n%s", err, out)
	}
}

// fish completes real command lines from the script: commands, flags with
// their descriptions, and drill scenarios.
func TestFishCompletion(t *testing.T) {
	fish := needShell(t, "fish")
	script := completionScript(t, "fish")
	if out, err := exec.Command(fish, "--no-execute", script).CombinedOutput(); err != nil {
		t.Fatalf("fish --no-execute: %v\n%s", err, out)
	}
	home := t.TempDir()
	for _, tc := range []struct{ line, want string }{
		{"sturdy ch", "check\tvalidate a config file"},
		{"sturdy check -", "-q\tprint errors only"},
		{"sturdy drill --j", "--json\tprint the results as JSON"},
		{"sturdy drill slow", "slow-route"},
		{"sturdy import ", "nginx"},
	} {
		cmd := exec.Command(fish, "--no-config", "-c", "source "+script+"; complete -C'"+tc.line+"'")
		cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "XDG_DATA_HOME="+home)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%q: %v; want a line starting %q in:\n%s", tc.line, err, tc.want, out)
		}
	}
}
