package doctor

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
)

// FuzzCheckConfig runs every config check on whatever parses: no check may
// panic, and the report must render.
func FuzzCheckConfig(f *testing.F) {
	files, _ := filepath.Glob("../testdata/cases/*/*.conf")
	more, _ := filepath.Glob("../testdata/cases/*/conf.d/*.conf")
	for _, name := range append(files, more...) {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		cfg, err := nginx.Parse("m.conf", src, nginx.Options{FS: noFiles{}})
		if err != nil {
			return
		}
		rep := &Report{Findings: checkConfig(nginx.NewSite(cfg))}
		sortFindings(rep.Findings)
		if err := rep.WriteText(io.Discard); err != nil {
			t.Fatal(err)
		}
	})
}

type noFiles struct{}

func (noFiles) ReadFile(string) ([]byte, error) { return nil, os.ErrNotExist }
func (noFiles) Glob(string) ([]string, error)   { return nil, nil }
