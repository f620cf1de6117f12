package translate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// FuzzTranslate checks that whatever nginx config parses, the translation
// either refuses it or produces a config that passes config.Parse (apart
// from certificate files, which do not exist here).
func FuzzTranslate(f *testing.F) {
	files, _ := filepath.Glob("../testdata/cases/*/*.conf")
	files2, _ := filepath.Glob("../testdata/cases/*/conf.d/*.conf")
	for _, name := range append(files, files2...) {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("http { upstream u { server a:1 backup; server b:2 weight=2000; } server { listen 1.2.3.4:99999; server_name .x *.y ~z; location = / { proxy_pass http://u; error_page 502 /e; } } }"))
	f.Fuzz(func(t *testing.T, src []byte) {
		cfg, err := nginx.Parse("m.conf", src, nginx.Options{FS: emptyFS{}})
		if err != nil {
			return
		}
		res, err := Translate(nginx.NewSite(cfg), Options{ConfigDir: "/nonexistent", Exists: func(string) bool { return false }})
		if err != nil {
			return
		}
		if _, err := config.Parse(res.YAML, "fuzz.yaml"); err != nil {
			var list config.ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("config.Parse: %v\n%s", err, res.YAML)
			}
			for _, e := range list {
				if !strings.Contains(e.Path, ".tls") {
					t.Fatalf("translation fails config.Parse: %v\n--- nginx:\n%s\n--- sturdy:\n%s", e, src, res.YAML)
				}
			}
		}
	})
}

type emptyFS struct{}

func (emptyFS) ReadFile(name string) ([]byte, error)  { return nil, os.ErrNotExist }
func (emptyFS) Glob(pattern string) ([]string, error) { return nil, nil }
