// Package internal_test checks rules that hold for every package of the
// project.
package internal_test

import (
	"bytes"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every package says what its one job is, in a package doc comment.
func TestEveryPackageHasADocComment(t *testing.T) {
	type pkg struct{ name, dir string }
	documented := map[pkg]bool{}
	for _, root := range []string{".", "../cmd"} {
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.Contains(path, "testdata") ||
				!strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Errorf("%s: %v", path, err)
				return nil
			}
			p := pkg{f.Name.Name, filepath.Dir(path)}
			doc := ""
			if f.Doc != nil {
				doc = f.Doc.Text()
			}
			documented[p] = documented[p] || strings.HasPrefix(doc, "Package "+p.name+" ") || strings.HasPrefix(doc, "Command ")
			return nil
		})
	}
	if len(documented) < 20 {
		t.Fatalf("found only %d packages; is the walk wrong?", len(documented))
	}
	for p, ok := range documented {
		if !ok {
			t.Errorf("package %s (%s) has no doc comment starting \"Package %s\"", p.name, p.dir, p.name)
		}
	}
}

// Every Go file is as gofmt writes it: the merges of parallel branches
// left two that were not, which only a reader's gofmt found.
func TestEveryFileIsGofmted(t *testing.T) {
	n := 0
	for _, root := range []string{".", "../cmd", "../bench", "../tools"} {
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.Contains(path, "testdata") {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				t.Error(err)
				return nil
			}
			n++
			if out, err := format.Source(src); err != nil || !bytes.Equal(out, src) {
				t.Errorf("%s is not gofmt'ed (gofmt -w %s)", path, path)
			}
			return nil
		})
	}
	if n < 400 {
		t.Fatalf("read only %d files; is the walk wrong?", n)
	}
}
