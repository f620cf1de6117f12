package nginx_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/adapt/nginx/nginxtest"
)

// corpusMain returns the main file of a corpus directory: main.conf when
// the site files need an http block around them, else nginx.conf.
func corpusMain(dir string) string {
	if _, err := os.Stat(filepath.Join(dir, "main.conf")); err == nil {
		return filepath.Join(dir, "main.conf")
	}
	return filepath.Join(dir, "nginx.conf")
}

func corpusDirs(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob("testdata/corpus/*")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range dirs {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			out = append(out, d)
		}
	}
	if len(out) < 25 {
		t.Fatalf("the corpus has %d configurations; it should have at least 25", len(out))
	}
	return out
}

// TestCorpusParses parses every configuration of the corpus: our own
// configurations, each following the deployment pattern a public project
// documents (testdata/corpus/SOURCES.md). None may fail, and none may need
// a note about an unreadable include.
func TestCorpusParses(t *testing.T) {
	for _, dir := range corpusDirs(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			cfg, err := nginx.ParseFile(corpusMain(dir), nginx.Options{})
			if err != nil {
				t.Fatalf("our parser rejects it: %v", err)
			}
			for _, n := range cfg.Notes {
				if !strings.Contains(n.Msg, "matched no files") {
					t.Errorf("note: %s", n)
				}
			}
			if len(nginx.NewSite(cfg).Servers) == 0 {
				t.Error("no server block found")
			}
		})
	}
}

// TestCorpusAgainstNginx runs Debian's nginx -t on every corpus
// configuration, rewritten to run inside a temp dir (nginxtest.Rewrite).
// Every one nginx accepts must parse with ours (TestCorpusParses checks that
// all do); the ones nginx rejects on this machine must be exactly those in
// testdata/corpus/NGINX-REJECTS, with the reason written there, so that no
// config silently drops out of the harness.
func TestCorpusAgainstNginx(t *testing.T) {
	bin := nginxtest.Binary()
	if bin == "" {
		t.Skip(nginxtest.SkipMessage)
	}
	want := readRejects(t, "testdata/corpus/NGINX-REJECTS")
	got := map[string]string{}
	for _, dir := range corpusDirs(t) {
		name := filepath.Base(dir)
		cfg, err := nginx.ParseFile(corpusMain(dir), nginx.Options{})
		if err != nil {
			t.Errorf("%s: our parser rejects it: %v", name, err)
			continue
		}
		if err := checkWithNginx(t, bin, cfg); err != nil {
			got[name] = err.Error()
		}
	}
	var names []string
	for n := range got {
		names = append(names, n)
	}
	for n := range want {
		if _, ok := got[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		g, w := got[n], want[n]
		switch {
		case w == "":
			t.Errorf("%s: nginx rejects it (%s); fix the rewrite or list it in NGINX-REJECTS with the reason", n, g)
		case g == "":
			t.Errorf("%s: listed in NGINX-REJECTS (%s) but nginx accepts it now; remove it from the list", n, w)
		case !strings.Contains(g, w):
			t.Errorf("%s: nginx rejects it for %q, NGINX-REJECTS says %q", n, g, w)
		}
	}
}

func checkWithNginx(t *testing.T, bin string, cfg *nginx.Config) error {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cert, key, err := nginxtest.WriteCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]int{}
	next := 20000
	text, err := nginxtest.Rewrite(cfg, nginxtest.Plan{
		Dir: dir, Cert: cert, Key: key, User: nginxtest.User(),
		// nginx -t does not bind, so any port will do; one per key keeps
		// the listen sockets as distinct as in the original.
		Port: func(k string) int {
			if p, ok := ports[k]; ok {
				return p
			}
			next++
			ports[k] = next
			return next
		},
		Backend: func(string) string { return "127.0.0.1:9" },
	})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(file, text, 0o644); err != nil {
		t.Fatal(err)
	}
	return nginxtest.Check(context.Background(), bin, dir, file)
}

// readRejects reads "name: reason" lines (# comments).
func readRejects(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, reason, _ := strings.Cut(line, ":")
		out[strings.TrimSpace(name)] = strings.TrimSpace(reason)
	}
	return out
}

// lexCases are snippets (inside a location) on the edge of nginx's
// grammar. For each, our parser and nginx -t must agree on accepting it.
var lexCases = []string{
	`if ($uri = '/y') { return 403; }`,
	`if ($request_method = "POST") { return 405; }`,
	`if ($http_user_agent ~* "^curl")) { return 403; }`,
	`return 200 a};`,
	`return 200 "a"};`,
	`return 200 "a"#b;`,
	`return 200 a#b;`,
	`return 200 a"b;`,
	`return 200 a\;b;`,
	`return 200 'it''s';`,
	`set $x ${uri}x;`,
	`set $x "${uri}";`,
	`add_header X "a;b" always;`,
	`add_header X 'a{b}' always;`,
	"add_header X \"multi\nline\";",
	`return 200 "\"quoted\"";`,
	`return 200 ;;`,
	`location ~ ^/a{2}$ { }`,
	`location ~ "^/a{2}$" { }`,
	`return 200 {`,
}

func TestLexerAgreesWithNginx(t *testing.T) {
	bin := nginxtest.Binary()
	if bin == "" {
		t.Skip(nginxtest.SkipMessage)
	}
	for _, snippet := range lexCases {
		src := "events {}\nhttp {\n server {\n  listen 127.0.0.1:1;\n  location / {\n" + snippet + "\n  }\n }\n}\n"
		_, oursErr := nginx.Parse("m.conf", []byte(src), nginx.Options{})
		dir := t.TempDir()
		head := "pid " + dir + "/nginx.pid;\nerror_log " + dir + "/error.log;\n"
		tmp := "client_body_temp_path " + dir + "/b; proxy_temp_path " + dir + "/p; fastcgi_temp_path " + dir + "/f; uwsgi_temp_path " + dir + "/u; scgi_temp_path " + dir + "/s; access_log off;\n"
		file := filepath.Join(dir, "nginx.conf")
		if err := os.WriteFile(file, []byte(head+strings.Replace(src, "http {\n", "http {\n"+tmp, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		nginxErr := nginxtest.Check(context.Background(), bin, dir, file)
		// What nginx accepts we must accept; what we accept nginx's lexer
		// must accept (its semantic errors, like "invalid number of
		// arguments", are not ours to find; it may also stop at one before
		// reaching a lexical error we report).
		switch {
		case nginxErr == nil && oursErr != nil:
			t.Errorf("%q: nginx accepts it, we do not: %v", snippet, oursErr)
		case oursErr == nil && nginxErr != nil && isLexical(nginxErr.Error()):
			t.Errorf("%q: nginx's lexer rejects it (%v), we accept it", snippet, nginxErr)
		}
	}
}

// isLexical reports whether an nginx error comes from ngx_conf_read_token.
func isLexical(msg string) bool {
	return strings.HasPrefix(msg, "unexpected") || strings.Contains(msg, "unexpected end of file")
}
