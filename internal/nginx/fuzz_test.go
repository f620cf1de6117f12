package nginx

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the parser as the main file and as
// two included files (so that include cycles and globs are reachable), and
// builds the typed view of whatever parses. It must never panic, and the
// tree it returns must respect the nesting limit.
func FuzzParse(f *testing.F) {
	for _, tt := range parseTests {
		f.Add([]byte(tt.src))
	}
	for _, tt := range parseErrorTests {
		f.Add([]byte(tt.src))
	}
	f.Add([]byte("include a.conf;"))
	f.Add([]byte("http { include inc/*.conf; server { listen 443 ssl; location / { proxy_pass http://u/x; } } upstream u { server a:1 max_fails=x fail_timeout=1h30m; } }"))
	files, _ := filepath.Glob("testdata/cases/*/*.conf")
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		fsys := mapFS{"m.conf": string(src), "a.conf": string(src), "inc/x.conf": string(src)}
		cfg, err := Parse("m.conf", src, Options{FS: fsys, MaxFiles: 64})
		if err != nil {
			return
		}
		if d := depth(cfg.Directives); d > DefaultMaxDepth+1 {
			t.Fatalf("tree is %d deep, limit %d", d, DefaultMaxDepth)
		}
		site := NewSite(cfg)
		for _, srv := range site.Servers {
			_ = srv.Label()
			for _, l := range srv.Locations {
				if l.Target != nil && l.Target.Upstream == nil {
					_ = l.Target.HostPort()
				}
			}
		}
		Walk(cfg.Directives, func(d *Directive) bool { _ = d.String(); return true })
	})
}

func depth(list []*Directive) int {
	m := 0
	for _, d := range list {
		m = max(m, 1+depth(d.Children))
	}
	return m
}
