// Package internal_test checks rules that hold for every package of the
// project.
package internal_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every package says what its one job is, in a package doc comment.
func TestEveryPackageHasADocComment(t *testing.T) {
	roots := []string{".", "../cmd"}
	for _, root := range roots {
		filepath.WalkDir(root, func(dir string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() || strings.Contains(dir, "testdata") {
				return nil
			}
			pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi os.FileInfo) bool {
				return !strings.HasSuffix(fi.Name(), "_test.go")
			}, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Errorf("%s: %v", dir, err)
				return nil
			}
			for name, p := range pkgs {
				documented := false
				for _, f := range p.Files {
					documented = documented || (f.Doc != nil && strings.HasPrefix(f.Doc.Text(), "Package "+name+" ") || f.Doc != nil && strings.HasPrefix(f.Doc.Text(), "Command "))
				}
				if !documented {
					t.Errorf("package %s (%s) has no doc comment starting \"Package %s\"", name, dir, name)
				}
			}
			return nil
		})
	}
}
