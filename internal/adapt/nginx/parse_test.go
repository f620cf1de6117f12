package nginx

import (
	"errors"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// mapFS is an in-memory FS for include tests.
type mapFS map[string]string

func (m mapFS) ReadFile(name string) ([]byte, error) {
	s, ok := m[filepath.ToSlash(name)]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return []byte(s), nil
}

func (m mapFS) Glob(pattern string) ([]string, error) {
	var out []string
	for name := range m {
		ok, err := path.Match(filepath.ToSlash(pattern), name)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// flat renders a tree as "name args@line" entries, children indented by ">".
func flat(list []*Directive, prefix string) []string {
	var out []string
	for _, d := range list {
		s := prefix + d.Name
		for _, a := range d.Args {
			s += " [" + a + "]"
		}
		s += "@" + filepath.Base(d.File) + ":" + strconv.Itoa(d.Line)
		if d.Lua != "" {
			s += " lua=" + strings.TrimSpace(d.Lua)
		}
		out = append(out, s)
		out = append(out, flat(d.Children, prefix+">")...)
	}
	return out
}

var parseTests = []struct {
	name string
	src  string
	want []string
}{
	{
		name: "words, quotes and comments",
		src:  "user nginx; # who\nlog_format main '$remote_addr \"{$request}\"' \"a;b\";\n",
		want: []string{"user [nginx]@m.conf:1", `log_format [main] [$remote_addr "{$request}"] [a;b]@m.conf:2`},
	},
	{
		name: "block lines are the opening line",
		src:  "http {\n  upstream u {\n    server 1.2.3.4;\n\n  }\n}\n",
		want: []string{"http@m.conf:1", ">upstream [u]@m.conf:2", ">>server [1.2.3.4]@m.conf:3"},
	},
	{
		name: "empty quoted map key",
		src:  "map $http_upgrade $c {\n default upgrade;\n ''      close;\n}\n",
		want: []string{"map [$http_upgrade] [$c]@m.conf:1", ">default [upgrade]@m.conf:2", "> [close]@m.conf:3"},
	},
	{
		name: "braced variables stay in the word",
		src:  "set $x ${scheme}://$host${request_uri};\n",
		want: []string{"set [$x] [${scheme}://$host${request_uri}]@m.conf:1"},
	},
	{
		name: "regex backslashes are kept",
		src:  "location ~ \\.php$ { deny all; }\n",
		want: []string{`location [~] [\.php$]@m.conf:1`, ">deny [all]@m.conf:1"},
	},
	{
		name: "quoted regex with braces",
		src:  "location ~* \"^/v[0-9]+/(\\d{1,6})$\" {\n}\n",
		want: []string{`location [~*] [^/v[0-9]+/(\d{1,6})$]@m.conf:1`},
	},
	{
		name: "escapes in quoted strings",
		src:  `return 200 "a\"b\\c\n";`,
		want: []string{"return [200] [a\"b\\c\n]@m.conf:1"},
	},
	{
		name: "hash inside a word is not a comment",
		src:  "add_header X-Tag a#b;\n",
		want: []string{"add_header [X-Tag] [a#b]@m.conf:1"},
	},
	{
		name: "lua block with braces in strings and comments",
		src:  "content_by_lua_block {\n  -- } in a comment\n  ngx.say(\"}\")\n  local s = [==[ } ]==]\n  if x then ngx.exit(1) end\n}\nafter on;\n",
		want: []string{
			"content_by_lua_block@m.conf:1 lua=-- } in a comment\n  ngx.say(\"}\")\n  local s = [==[ } ]==]\n  if x then ngx.exit(1) end",
			"after [on]@m.conf:7",
		},
	},
	{
		name: "if blocks",
		src:  "if ($request_method = POST) { return 405; }\n",
		want: []string{"if [($request_method] [=] [POST)]@m.conf:1", ">return [405]@m.conf:1"},
	},
	{
		name: "a ) right after a quoted string starts the next word",
		src:  "if ($x = 'y') { return 403; }\nif ($a ~* \"^b$\")) { }\n",
		want: []string{"if [($x] [=] [y] [)]@m.conf:1", ">return [403]@m.conf:1", `if [($a] [~*] [^b$] [))]@m.conf:2`},
	},
	{
		name: "a } inside a word is part of the word",
		src:  "return 200 a};\n",
		want: []string{"return [200] [a}]@m.conf:1"},
	},
	{
		name: "an unterminated ${ is left to the directive",
		src:  "set $a ${uri;\nset $b a${;\n",
		want: []string{"set [$a] [${uri]@m.conf:1", "set [$b] [a${]@m.conf:2"},
	},
	{
		name: "quotes inside a word are ordinary bytes",
		src:  "add_header X a\"b'c;\n",
		want: []string{`add_header [X] [a"b'c]@m.conf:1`},
	},
	{
		name: "escaped terminators stay in the word",
		src:  "return 200 a\\;b\\ c;\n",
		want: []string{`return [200] [a\;b\ c]@m.conf:1`},
	},
	{
		name: "multi-line quoted string counts lines",
		src:  "log_format x '\n a\n b';\nnext on;\n",
		want: []string{"log_format [x] [\n a\n b]@m.conf:1", "next [on]@m.conf:4"},
	},
}

func TestParse(t *testing.T) {
	for _, tt := range parseTests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("m.conf", []byte(tt.src), Options{FS: mapFS{}})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got := flat(cfg.Directives, "")
			if !slices.Equal(got, tt.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

var parseErrorTests = []struct {
	name, src, want string
}{
	{"unterminated quote", "a 'b;\n", `m.conf:1: unterminated '-quoted string`},
	{"missing close brace", "http {\n server {\n}\n", "m.conf:4: unexpected end of file; the block opened at line 1 has no closing }"},
	{"stray close brace", "a b;\n}\n", "m.conf:2: unexpected }; there is no open block to close"},
	{"missing semicolon", "http {\n a b\n}\n", `m.conf:3: unexpected } after "a"; is a ; missing?`},
	{"empty statement", "a;;\n", `m.conf:1: unexpected ";"`},
	{"word after quote", `a "b"c;`, `m.conf:1: unexpected 'c' right after a quoted string`},
	{"close brace after quote", `a { b "c"}`, `m.conf:1: unexpected '}' right after a quoted string`},
	{"comment after quote", `a "b"#c`, `m.conf:1: unexpected '#' right after a quoted string`},
	{"eof in directive", "a b", `m.conf:1: unexpected end of file in "a"`},
	{"unterminated lua", "init_by_lua_block { x = '}", "m.conf:1: unterminated Lua string"},
	{"too deep", strings.Repeat("a {\n", 70), "m.conf:65: blocks nested more than 64 deep"},
	{"include arity", "include a b;", "m.conf:1: include takes exactly one file or pattern, got 2"},
}

func TestParseErrors(t *testing.T) {
	for _, tt := range parseErrorTests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("m.conf", []byte(tt.src), Options{FS: mapFS{}})
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("error = %v, want prefix %q", err, tt.want)
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Errorf("error %T is not a *SyntaxError", err)
			}
		})
	}
}

func TestIncludes(t *testing.T) {
	files := mapFS{
		"etc/nginx.conf":          "http {\n include conf.d/*.conf;\n include sites/app;\n include missing.conf;\n include none/*.conf;\n}\n",
		"etc/conf.d/a.conf":       "upstream a { server 10.0.0.1; }\n",
		"etc/conf.d/b.conf":       "upstream b {\n include inner.inc;\n}\n",
		"etc/conf.d/.hidden.conf": "broken {",
		"etc/inner.inc":           "server 10.0.0.2;\n",
		"etc/sites/app":           "server { listen 80; }\n",
	}
	cfg, err := Parse("etc/nginx.conf", []byte(files["etc/nginx.conf"]), Options{FS: files})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"http@nginx.conf:1",
		">upstream [a]@a.conf:1", ">>server [10.0.0.1]@a.conf:1",
		">upstream [b]@b.conf:1", ">>server [10.0.0.2]@inner.inc:1",
		">server@app:1", ">>listen [80]@app:1",
	}
	if got := flat(cfg.Directives, ""); !slices.Equal(got, want) {
		t.Errorf("tree\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantFiles := []string{"etc/nginx.conf", "etc/conf.d/a.conf", "etc/conf.d/b.conf", "etc/inner.inc", "etc/sites/app"}
	if !slices.Equal(cfg.Files, wantFiles) {
		t.Errorf("Files = %v, want %v", cfg.Files, wantFiles)
	}
	var notes []string
	for _, n := range cfg.Notes {
		notes = append(notes, n.String())
	}
	wantNotes := []string{
		"etc/nginx.conf:4: included file etc/missing.conf does not exist; its directives were not checked",
		`etc/nginx.conf:5: include "none/*.conf" matched no files`,
	}
	if !slices.Equal(notes, wantNotes) {
		t.Errorf("Notes = %q, want %q", notes, wantNotes)
	}
}

func TestIncludeLimits(t *testing.T) {
	tests := []struct {
		name     string
		files    mapFS
		maxFiles int
		want     string
	}{
		{"self", mapFS{"m.conf": "include m.conf;"}, 0, "m.conf:1: include cycle: m.conf -> m.conf"},
		{"cycle", mapFS{"m.conf": "include a.conf;", "a.conf": "x;\ninclude b.conf;", "b.conf": "include a.conf;"}, 0, "b.conf:1: include cycle: a.conf -> b.conf -> a.conf"},
		{"glob cycle", mapFS{"m.conf": "include *.inc;", "a.inc": "include *.inc;", "b.inc": ""}, 0, "a.inc:1: include cycle: a.inc -> a.inc"},
		{"depth", chain(20), 0, "f16.conf:1: includes nested more than 16 deep"},
		{"fan-out", fanOut(20), 10, "m.conf:1: more than 10 files included"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("m.conf", []byte(tt.files["m.conf"]), Options{FS: tt.files, MaxFiles: tt.maxFiles})
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("error = %v, want prefix %q", err, tt.want)
			}
		})
	}
}

func chain(n int) mapFS {
	m := mapFS{"m.conf": "include f1.conf;"}
	for i := 1; i <= n; i++ {
		m["f"+strconv.Itoa(i)+".conf"] = "include f" + strconv.Itoa(i+1) + ".conf;"
	}
	return m
}

func fanOut(n int) mapFS {
	m := mapFS{"m.conf": "include f*.conf;"}
	for i := 0; i < n; i++ {
		m["f"+strconv.Itoa(i+10)+".conf"] = "a;"
	}
	return m
}

func TestParseFileErrors(t *testing.T) {
	_, err := ParseFile("testdata/does-not-exist.conf", Options{})
	if err == nil || !strings.Contains(err.Error(), "cannot read nginx config") {
		t.Fatalf("error = %v", err)
	}
	_, err = Parse("m.conf", []byte("include big.conf;"), Options{FS: mapFS{"big.conf": strings.Repeat("#", 100)}, MaxFileSize: 50})
	if err != nil {
		t.Fatalf("an oversized include should be a note, got %v", err)
	}
}
