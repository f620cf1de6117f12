package internal_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/sturdyproxy/sturdy/"

// layers is the way a request takes through the folders of internal/,
// bottom up: a package may import its own folder, and folders of a lower
// layer, never a folder of its own layer or one above. The stages of a
// request's way through the proxy (wire, route, edge, access, cache,
// health) share a layer, so that none of them can reach into another:
// only the proxy puts them together, only compile builds them from
// config, only server runs them.
var layers = [][]string{
	{"outcome", "event"}, // the shared vocabulary, leaves
	{"view"},             // the snapshot operators read, in that vocabulary
	{"config"},
	{"testing"}, // fakes and fixtures; see testingUsers
	{"wire"},
	{"route", "edge", "access", "cache", "health", "ops"},
	{"proxy"},
	{"compile"},
	{"server"},
	{"adapt", "drill", "demo"},
	{"cli"},
	{"cmd"},
}

// testingUsers are the folders whose non-test code may use internal/testing:
// the rehearsal tools run fake backends for real. Every test may use it.
var testingUsers = []string{"testing", "drill", "demo"}

// folder is the top folder of an import path inside the module ("wire" for
// internal/wire/h1), "cmd" for the commands, "" outside the module.
func folder(path string) string {
	rest, ok := strings.CutPrefix(path, module)
	if !ok {
		return ""
	}
	if strings.HasPrefix(rest, "cmd/") {
		return "cmd"
	}
	rest, ok = strings.CutPrefix(rest, "internal/")
	if !ok {
		return ""
	}
	top, _, _ := strings.Cut(rest, "/")
	return top
}

func layerOf(f string) int {
	for i, l := range layers {
		if slices.Contains(l, f) {
			return i
		}
	}
	return -1
}

// importCheck says what is wrong with from (a top folder) importing to, or "".
func importCheck(from, to string, test bool) string {
	if to == "" || to == from {
		return ""
	}
	lf, lt := layerOf(from), layerOf(to)
	switch {
	case lt < 0:
		return "internal/" + to + " is in no layer of layout_test.go: place it"
	case to == "testing" && (test || slices.Contains(testingUsers, from)):
		return ""
	case to == "testing":
		return "only tests and the rehearsal tools (" + strings.Join(testingUsers[1:], ", ") + ") may use internal/testing"
	case test:
		// A test may put together what its package's code may not (a
		// client tested through a compiled proxy), but never pull in
		// the layers that run or drive the proxy from below them.
		if lt >= layerOf("server") && lt > lf {
			return "a test of a lower layer drives internal/" + to
		}
		return ""
	case lt == lf:
		return "internal/" + from + " and internal/" + to + " are stages of one layer: neither may import the other (put what they share in a lower layer)"
	case lt > lf:
		return "the import points up: internal/" + to + " sits above internal/" + from
	}
	return ""
}

// Imports point one way: down the layers, as a request goes from listener
// to backend. A new arrow back up fails here with the file and the import.
func TestImportsPointDownTheLayers(t *testing.T) {
	for _, f := range []string{"cmd"} {
		if layerOf(f) < 0 {
			t.Fatal("cmd is in no layer")
		}
	}
	n := 0
	for _, root := range []string{".", "../cmd"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") {
				return nil
			}
			abs, err := filepath.Abs(path)
			if err != nil {
				return err
			}
			rel, _ := strings.CutPrefix(filepath.ToSlash(abs), repoRoot(t)+"/")
			from := folder(module + filepath.Dir(rel))
			if from == "" {
				return nil // internal/ itself: this test
			}
			file, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				t.Errorf("%s: %v", path, err)
				return nil
			}
			for _, imp := range file.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				n++
				if why := importCheck(from, folder(p), strings.HasSuffix(path, "_test.go")); why != "" {
					t.Errorf("%s imports %s: %s", rel, strings.TrimPrefix(p, module), why)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if n < 500 {
		t.Fatalf("saw only %d imports; is the walk wrong?", n)
	}
}

// Every top folder of internal/ has its place in the layers.
func TestEveryFolderHasALayer(t *testing.T) {
	entries, err := filepath.Glob("*")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.Contains(e, ".") && layerOf(e) < 0 {
			t.Errorf("internal/%s is in no layer of layout_test.go: say where a request meets it", e)
		}
	}
}

// The rule itself refuses what it must: planted imports back up.
func TestLayerRuleRefusesUpwardImports(t *testing.T) {
	for _, c := range []struct {
		from, to string
		test, ok bool
	}{
		{"proxy", "health", false, true},
		{"health", "proxy", false, false},
		{"wire", "proxy", false, false},
		{"route", "compile", false, false},
		{"cache", "server", false, false},
		{"config", "health", false, false},
		{"config", "event", false, true},
		{"health", "access", false, false},
		{"server", "adapt", false, false},
		{"compile", "cli", false, false},
		{"proxy", "testing", false, false},
		{"proxy", "testing", true, true},
		{"demo", "testing", false, true},
		{"wire", "proxy", true, true},
		{"health", "server", true, false},
		{"cli", "adapt", false, true},
		{"cmd", "cli", false, true},
	} {
		why := importCheck(c.from, c.to, c.test)
		if (why == "") != c.ok {
			t.Errorf("%s → %s (test %v): got %q, want allowed=%v", c.from, c.to, c.test, why, c.ok)
		}
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.ToSlash(abs)
}
