package translate

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/config"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// translateCase translates ../testdata/cases/DIR/nginx.conf with that
// directory's parent as the working directory, so that certificate paths
// in the output resolve when the output is checked.
func translateCase(t *testing.T, dir string) *Result {
	t.Helper()
	t.Chdir("../testdata/cases")
	cfg, err := nginx.ParseFile(dir+"/nginx.conf", nginx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Translate(nginx.NewSite(cfg), Options{})
	if err != nil {
		var ne *NothingError
		if errors.As(err, &ne) {
			// Nothing to translate: the golden file keeps what was said.
			return &Result{YAML: []byte("# sturdy import nginx refuses this config:\n# " + strings.ReplaceAll(err.Error(), "\n", "\n# ") + "\n"), Blocks: ne.Blocks}
		}
		t.Fatalf("Translate: %v", err)
	}
	return res
}

// TestGolden compares every case's translation with testdata/DIR.yaml and
// checks that it passes config.Parse, which is what `sturdy check` runs.
func TestGolden(t *testing.T) {
	dirs, _ := filepath.Glob("../testdata/cases/*")
	if len(dirs) == 0 {
		t.Fatal("no cases")
	}
	goldenDir, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		dir := filepath.Base(d)
		t.Run(dir, func(t *testing.T) {
			res := translateCase(t, dir)
			if _, err := config.Parse(res.YAML, dir+".yaml"); err != nil && !bytes.HasPrefix(res.YAML, []byte("# sturdy import nginx refuses")) {
				t.Fatalf("the translation does not pass config.Parse:\n%v\n%s", err, res.YAML)
			}
			path := filepath.Join(goldenDir, dir+".yaml")
			if *update {
				if err := os.WriteFile(path, res.YAML, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(res.YAML, want) {
				t.Errorf("%s differs (run go test -update to accept); got:\n%s", path, res.YAML)
			}
		})
	}
}

func TestNotTranslatedListsEverything(t *testing.T) {
	res := translateCase(t, "k8s-ingress")
	want := map[string]string{
		"nginx.conf:51": "Lua",
	}
	// A regex location and a proxy_pass with a URI part translate now.
	for _, y := range []string{`path: {regex: '^/v[0-9]+/users/(\d{1,6})/avatar$', case_insensitive: true}`, "match:\n      path: {starts_with: /v1/search}", "rewrite: {prefix: /search}"} {
		if !strings.Contains(string(res.YAML), y) {
			t.Errorf("the YAML lacks %q", y)
		}
	}
	got := map[string]string{}
	for _, it := range res.NotTranslated {
		got[strings.TrimPrefix(it.File, "k8s-ingress/")+":"+strconv.Itoa(it.Line)] = it.Reason
	}
	for pos, reason := range want {
		if !strings.Contains(got[pos], reason) {
			t.Errorf("%s: reason %q, want one mentioning %q", pos, got[pos], reason)
		}
	}
	var grafana *Block
	for i, b := range res.Blocks {
		if b.File == "k8s-ingress/conf.d/monitoring-grafana.conf" && b.Location == "/" {
			grafana = &res.Blocks[i]
		}
	}
	if grafana == nil || grafana.Status != Refused {
		t.Fatalf("the allow-listed grafana location must be refused, not opened: %+v", grafana)
	}
	if !bytes.Contains(res.YAML, []byte("names: [cafe.example.com]")) {
		t.Error("the cafe server's own certificate is not served for its name")
	}
	if !bytes.Contains(res.YAML, []byte("REFUSED: access rules sturdy cannot reproduce")) || !bytes.Contains(res.YAML, []byte("addr: '127.0.0.1:0'")) {
		t.Error("the output lacks the refused list or the refusal pool")
	}
}

// TestMappings checks single translations through the whole pipeline.
func TestMappings(t *testing.T) {
	tests := []struct {
		name, conf string
		want       []string // substrings of the YAML
		notWant    []string
	}{
		{
			name: "ip_hash becomes consistent hashing on the client address",
			conf: "upstream u { ip_hash; server 10.0.0.1:8080; server 10.0.0.2:8080 weight=5; }",
			want: []string{"balance: hash", "hash_key: client_ip", "{addr: '10.0.0.2:8080', weight: 5}", "nginx: max_fails=1 fail_timeout=10s (nginx's defaults)"},
		},
		{
			name: "hash on a header",
			conf: "upstream u { hash $http_x_user_id consistent; server 10.0.0.1:80; }",
			want: []string{"hash_key: header:X-User-Id"},
		},
		{
			name: "max_fails=0 turns passive off",
			conf: "upstream u { server 10.0.0.1:80 max_fails=0; server 10.0.0.2:80 max_fails=0; }",
			want: []string{"enabled: false"},
		},
		{
			name: "fail_timeout becomes eject_time",
			conf: "upstream u { server 10.0.0.1:80 max_fails=3 fail_timeout=30s; }",
			want: []string{"eject_time: 30s", "nginx: max_fails=3 fail_timeout=30s; eject_time is nginx's fail_timeout"},
		},
		{
			name: "active check",
			conf: "upstream u { server 10.0.0.1:80; check interval=3000 rise=2 fall=5 timeout=1000 type=http; check_http_send \"HEAD /ready HTTP/1.0\\r\\nHost: app.local\\r\\n\\r\\n\"; check_http_expect_alive http_2xx; }",
			want: []string{"path: /ready", "method: HEAD", "host: app.local", "expect_status: 200-299", "interval: 3s", "timeout: 1s", "fall: 5"},
		},
		{
			name:    "tcp check is not readiness",
			conf:    "upstream u { server 10.0.0.1:80; check interval=3000 type=tcp; }",
			want:    []string{"type=tcp checks only that the port answers"},
			notWant: []string{"active:"},
		},
		{
			name:    "backup and down servers",
			conf:    "upstream u { server 10.0.0.1:80; server 10.0.0.2:80 down; server 10.0.0.3:80 backup; }",
			want:    []string{"10.0.0.2:80 is marked down in nginx", "name: u-backup", "- {addr: '10.0.0.3:80'}", "fallback:\n      pool: u-backup"},
			notWant: []string{"addr: '10.0.0.2:80'"},
		},
		{
			name:    "deny becomes the edge deny list, allow lists a warning",
			conf:    "deny 192.0.2.7; upstream u { server 10.0.0.1:80; }",
			want:    []string{"deny: [192.0.2.7]"},
			notWant: []string{"WARNINGS"},
		},
		{
			name:    "cache with unbounded stale",
			conf:    "proxy_cache_path /tmp/c keys_zone=c:10m; proxy_cache c; proxy_cache_use_stale error timeout http_502; upstream u { server 10.0.0.1:80; }",
			want:    []string{"cache:\n      enabled: true", "max_bytes: 64MiB"},
			notWant: []string{"stale_if_error_max"},
		},
		{
			name: "cache without stale",
			conf: "proxy_cache c; upstream u { server 10.0.0.1:80; }",
			want: []string{"stale_if_error_max: 0s"},
		},
		{
			name: "keepalive per host",
			conf: "upstream u { server 10.0.0.1:80; server 10.0.0.2:80; keepalive 32; }",
			want: []string{"max_idle_conns_per_host: 16"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "http { " + tt.conf + " server { listen 8080; server_name a.example; location / { proxy_pass http://u; } } }"
			cfg, err := nginx.Parse("t.conf", []byte(src), nginx.Options{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := Translate(nginx.NewSite(cfg), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := config.Parse(res.YAML, "t.yaml"); err != nil {
				t.Fatalf("config.Parse: %v\n%s", err, res.YAML)
			}
			for _, w := range tt.want {
				if !bytes.Contains(res.YAML, []byte(w)) {
					t.Errorf("output lacks %q:\n%s", w, res.YAML)
				}
			}
			for _, w := range tt.notWant {
				if bytes.Contains(res.YAML, []byte(w)) {
					t.Errorf("output has %q:\n%s", w, res.YAML)
				}
			}
		})
	}
}

func TestName(t *testing.T) {
	taken := map[string]bool{}
	tests := []struct {
		parts []string
		want  string
	}{
		{[]string{"api.example.com", "v1/users"}, "api.example.com-v1-users"},
		{[]string{"api.example.com", "v1/users"}, "api.example.com-v1-users-2"},
		{[]string{"", ""}, "x"},
		{[]string{"we ird\"{name}"}, "we-ird-name"},
	}
	for _, tt := range tests {
		if got := name(taken, tt.parts...); got != tt.want {
			t.Errorf("name(%q) = %q, want %q", tt.parts, got, tt.want)
		}
	}
}

func TestWrapCommentLongWord(t *testing.T) {
	got := wrapComment([]string{"x " + strings.Repeat("a", 300) + " tail " + strings.Repeat("b", 200)})
	if !strings.Contains(got, strings.Repeat("a", 300)) || !strings.Contains(got, "tail") {
		t.Fatalf("a word longer than the line must stay whole: %q", got)
	}
}

func TestNothingToTranslate(t *testing.T) {
	cfg, err := nginx.Parse("php.conf", []byte("http { server { listen 80; location / { fastcgi_pass 127.0.0.1:9000; } } }"), nginx.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Translate(nginx.NewSite(cfg), Options{})
	if !errors.Is(err, ErrNothingToTranslate) {
		t.Fatalf("error = %v, want ErrNothingToTranslate", err)
	}
	// The error names every block and why: here the server and its FastCGI location.
	if !strings.Contains(err.Error(), "php.conf:1: server at php.conf:1, location /: not translated: nginx passed requests to fastcgi_pass 127.0.0.1:9000 (php.conf:1) (needs FastCGI/uWSGI/SCGI)") {
		t.Errorf("the error does not name the server block and why:\n%v", err)
	}
}
