package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every command's help has the same shape: the usage line, the one-line
// summary, the flags with their defaults, and examples. Both ways of
// asking print the same text.
// sturdy-gateway's commands have the shape of sturdy's.
func TestEveryCommandHasTheSameHelpShape(t *testing.T) {
	for _, p := range []*program{sturdy(), gateway(refuseKube)} {
		t.Run(p.name, func(t *testing.T) { testHelpShape(t, p) })
	}
}

func testHelpShape(t *testing.T, p *program) {
	run := func(args ...string) (int, string, string) { return runProgram(p, args...) }
	for _, c := range p.commands {
		t.Run(c.name, func(t *testing.T) {
			code, _, dashH := run(c.name, "-h")
			if code != exitOK {
				t.Fatalf("%s -h: exit %d", c.name, code)
			}
			code, help, _ := run("help", c.name)
			if code != exitOK || help != dashH {
				t.Fatalf("help %s: exit %d; differs from -h:\n%s\n---\n%s", c.name, code, help, dashH)
			}
			paras := strings.Split(help, "\n\n")
			if !strings.HasPrefix(paras[0], "usage: "+p.name+" "+c.name) || strings.Contains(paras[0], "\n") {
				t.Errorf("first line is not the usage line: %q", paras[0])
			}
			if len(paras) < 4 || strings.Contains(paras[1], "\n") || !strings.HasSuffix(paras[1], ".") {
				t.Fatalf("second paragraph is not a one-line summary:\n%s", help)
			}
			flags := section(t, help, "flags:")
			for _, f := range flagList(describe(c)) {
				line := lineWith(flags, "  "+f.synopsis())
				if line == "" {
					t.Errorf("flag %s missing from:\n%s", f.synopsis(), flags)
					continue
				}
				if f.def != "" && !strings.Contains(help, "(default: "+f.def+")") {
					t.Errorf("flag %s: default %q not shown", f.name, f.def)
				}
			}
			if !strings.Contains(flags, "-h, --help") {
				t.Error("no -h, --help line")
			}
			ex := section(t, help, "examples:")
			for _, l := range strings.Split(strings.TrimSpace(ex), "\n") {
				if !strings.Contains(l, p.name+" "+c.name) && !strings.Contains(l, p.name+" --version") {
					t.Errorf("example %q does not run %s %s", l, p.name, c.name)
				}
			}
		})
	}
	if code, _, _ := run("help", "frobnicate"); code != exitUsage {
		t.Errorf("help of an unknown command: exit %d", code)
	}
	code, out, _ := run("--help")
	if code != exitOK || !strings.HasPrefix(out, "usage: "+p.name+" COMMAND [flags]\n") {
		t.Errorf("--help: exit %d\n%s", code, out)
	}
	for _, c := range p.commands {
		if !strings.Contains(out, "\n  "+c.name+" ") && !strings.Contains(out, "\n  "+c.name+", ") {
			t.Errorf("--help does not list %s:\n%s", c.name, out)
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(section(t, out, "examples:")), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), p.name+" ") {
			t.Errorf("--help example %q does not run %s", l, p.name)
		}
	}
}

// section returns the lines after the line head, up to the next blank line.
func section(t *testing.T, text, head string) string {
	t.Helper()
	_, rest, ok := strings.Cut(text, "\n"+head+"\n")
	if !ok {
		t.Fatalf("no %q section in:\n%s", head, text)
	}
	body, _, _ := strings.Cut(rest, "\n\n")
	return body
}

func lineWith(text, prefix string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

func TestVersionFlag(t *testing.T) {
	for _, p := range []*program{sturdy(), gateway(refuseKube)} {
		c1, v1, _ := runProgram(p, "version")
		c2, v2, _ := runProgram(p, "--version")
		if c1 != 0 || c2 != 0 || v1 != v2 || !strings.HasPrefix(v1, p.name+" "+version+" ") {
			t.Errorf("%s version: %d %q; --version: %d %q", p.name, c1, v1, c2, v2)
		}
	}
}

// Without -c, run and check read ./sturdy.yaml, and say so when it is
// missing instead of "cannot read config: open sturdy.yaml".
func TestDefaultConfigIsNamedWhenMissing(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	want := "no config file at ./sturdy.yaml (the default for -c); pass -c FILE"
	for _, cmd := range []string{"check", "validate", "run"} {
		if code, _, stderr := run(cmd); code != exitFail || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d, stderr %q; want %q", cmd, code, stderr, want)
		}
	}
	if _, _, help := run("check", "-h"); !strings.Contains(help, "(default: ./sturdy.yaml)") {
		t.Errorf("help does not name the default:\n%s", help)
	}
	os.WriteFile(filepath.Join(dir, "sturdy.yaml"), []byte(`listeners: [ { name: web, listen: 127.0.0.1:8080 } ]
routes: [ { name: a, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: "127.0.0.1:9001" } ] } ]
`), 0o644)
	if code, stdout, stderr := run("check", "-q"); code != exitOK || !strings.Contains(stdout, "./sturdy.yaml: ok") {
		t.Errorf("check with ./sturdy.yaml present: exit %d %q %q", code, stdout, stderr)
	}
	// A -c that names a missing file keeps the reader's own error.
	if code, _, stderr := run("check", "-c", "gone.yaml"); code != exitFail || !strings.Contains(stderr, "gone.yaml") || strings.Contains(stderr, "the default for -c") {
		t.Errorf("explicit missing file: exit %d %q", code, stderr)
	}
}

// flagToken finds the flags a text names: -x and --long-name words.
var flagToken = regexp.MustCompile(`(?:^|[\s(])(--?[a-z][a-z0-9-]*)`)

// Help names flags the way its flag list spells them: in a command's long
// text and in its examples, every flag is one the command has, written
// with one dash for a letter and two for a word. Only what sturdy runs is
// read: the part of an example before a pipe or redirection.
func TestHelpNamesFlagsAsTheListSpellsThem(t *testing.T) {
	for _, c := range append(sturdy().commands, gateway(refuseKube).commands...) {
		known := map[string]bool{"-h": true, "--help": true}
		if c.name == "version" {
			known["--version"] = true
		}
		for _, f := range flagList(describe(c)) {
			known[f.dashes()] = true
		}
		texts := []string{c.long}
		for _, e := range c.examples {
			if i := strings.IndexAny(e, "|>&#"); i >= 0 {
				e = e[:i]
			}
			texts = append(texts, e)
		}
		for _, text := range texts {
			for _, m := range flagToken.FindAllStringSubmatch(text, -1) {
				if tok := m[1]; !known[tok] {
					t.Errorf("sturdy %s: %q names %s, which is not in its flag list (%v)", c.name, text, tok, known)
				}
			}
		}
	}
}

// check takes the file as -c's value or as its one argument, as the
// import's header tells users to run it; both at once is a usage error.
func TestCheckTakesTheFileAsAnArgument(t *testing.T) {
	f := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(f, []byte("listeners: [ { name: web, listen: 127.0.0.1:8080 } ]\nroutes: [ { name: hi, default: true, respond: { body: hi } } ]\n"), 0o644)
	for _, args := range [][]string{{"check", f}, {"check", f, "-q"}, {"check", "-q", f}, {"validate", f}} {
		if code, out, errs := run(args...); code != exitOK || !strings.Contains(out, f+": ok") {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errs)
		}
	}
	if code, _, errs := run("check", "-c", f, f); code != exitUsage || !strings.Contains(errs, "given twice") {
		t.Errorf("-c and an argument: exit %d, %s", code, errs)
	}
	if code, _, _ := run("check", f, f); code != exitUsage {
		t.Errorf("two arguments: exit %d", code)
	}
}

// -v is --version's short form.
func TestDashVIsTheVersion(t *testing.T) {
	c1, v1, _ := run("-v")
	c2, v2, _ := run("--version")
	if c1 != exitOK || v1 != v2 || !strings.HasPrefix(v1, "sturdy ") {
		t.Errorf("-v: exit %d %q; --version: exit %d %q", c1, v1, c2, v2)
	}
}
