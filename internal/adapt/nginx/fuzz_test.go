package nginx

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// FuzzFormat checks the round trip: whatever parses, Format renders as text
// that parses back to the same directives (names, arguments, blocks, Lua
// code), and rendering that again gives the same bytes.
func FuzzFormat(f *testing.F) {
	for _, tt := range parseTests {
		f.Add([]byte(tt.src))
	}
	f.Add([]byte("a \"x y\" 'q\\\"' \\\\d{1,2} ${v} \"\" \"#\" \"\\\\\";\nb { c_by_lua_block { if x then return '}' end } }\n"))
	files, _ := filepath.Glob("testdata/corpus/*/*.conf")
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		fsys := mapFS{"m.conf": string(src), "a.conf": string(src)}
		cfg, err := Parse("m.conf", src, Options{FS: fsys, MaxFiles: 8})
		if err != nil {
			return
		}
		out := Format(cfg.Directives)
		again, err := Parse("f.conf", out, Options{FS: mapFS{}})
		if err != nil {
			t.Fatalf("Format's output does not parse: %v\n--- input:\n%q\n--- output:\n%s", err, src, out)
		}
		if diff := sameTree(cfg.Directives, again.Directives); diff != "" {
			t.Fatalf("round trip changed the tree: %s\n--- input:\n%q\n--- output:\n%s", diff, src, out)
		}
		if out2 := Format(again.Directives); string(out2) != string(out) {
			t.Fatalf("Format is not stable:\n%s\n---\n%s", out, out2)
		}
	})
}

// sameTree returns "" when a and b hold the same directives, else where
// they first differ.
func sameTree(a, b []*Directive) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d directives, then %d", len(a), len(b))
	}
	for i := range a {
		x, y := a[i], b[i]
		switch {
		case x.Name != y.Name:
			return fmt.Sprintf("name %q became %q", x.Name, y.Name)
		case !slices.Equal(x.Args, y.Args):
			return fmt.Sprintf("%s: args %q became %q", x.Name, x.Args, y.Args)
		case x.IsBlock != y.IsBlock || x.IsLua != y.IsLua || x.Lua != y.Lua:
			return fmt.Sprintf("%s: block or Lua changed", x.Name)
		}
		if d := sameTree(x.Children, y.Children); d != "" {
			return x.Name + " > " + d
		}
	}
	return ""
}
