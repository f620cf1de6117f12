package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The man page renders without a roff warning, and names every command
// and every flag that the commands define.
func TestManPageRenders(t *testing.T) {
	code, page, stderr := run("man")
	if code != exitOK || !strings.HasPrefix(page, ".TH STURDY 1") {
		t.Fatalf("man: exit %d %s\n%.200s", code, stderr, page)
	}
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Skip("groff is not installed (apt-get install groff-base); the man page is not rendered")
	}
	f := filepath.Join(t.TempDir(), "sturdy.1")
	os.WriteFile(f, []byte(page), 0o644)
	cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-rLL=100n", f)
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8")
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil || errb.Len() > 0 {
		t.Fatalf("groff: %v\n%s", err, errb.String())
	}
	// Strip overstrike (bold, underline) to read the text.
	text := stripOverstrike(string(out))
	for _, c := range sturdy().commands {
		if !strings.Contains(text, sturdy().usageLine(c)) {
			t.Errorf("no %q in the rendered page", sturdy().usageLine(c))
		}
		for _, fl := range flagList(describe(c)) {
			if !strings.Contains(text, fl.synopsis()) {
				t.Errorf("%s: flag %q not in the rendered page", c.name, fl.synopsis())
			}
		}
	}
	if man, err := exec.LookPath("man"); err == nil {
		cmd := exec.Command(man, "-l", f)
		cmd.Env = append(os.Environ(), "MANPAGER=cat", "PAGER=cat", "MANWIDTH=100")
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(stripOverstrike(string(out)), "sturdy check [flags]") {
			t.Errorf("man -l: %v\n%.500s", err, out)
		}
	}
}

func stripOverstrike(s string) string {
	var b strings.Builder
	r := []rune(s)
	for i := 0; i < len(r); i++ {
		if i+1 < len(r) && r[i+1] == '\b' {
			i++ // drop the character and the backspace; the next one stays
			continue
		}
		b.WriteRune(r[i])
	}
	return b.String()
}
