package compile

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

var update = flag.Bool("update", false, "rewrite testdata/*.bad.want from the current output")

// Each testdata/NAME.bad.yaml is a config that loads but does not
// compile, paired with NAME.bad.want: every error, FILE:LINE: key.path:
// message, as `sturdy check` prints them.
func TestBadFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.bad.yaml")
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cfg, err := config.Load(f)
			if err != nil {
				t.Fatalf("the config must load (its problems are for the compile step): %v", err)
			}
			_, err = Compile(cfg, nil, Env{})
			if err == nil {
				t.Fatal("compiled; want errors")
			}
			testutil.Golden(t, err.Error()+"\n", strings.TrimSuffix(f, ".yaml")+".want", *update)
		})
	}
}

func parse(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

const twoRoutes = `
listeners: [ { name: web, listen: 127.0.0.1:0 } ]
routes:
  - { name: site, default: true, pool: web }
  - { name: api, path: /api/, pool: web, timeouts: { response_header: 5s } }
pools:
  - { name: web, hosts: [ { addr: 127.0.0.1:9001 }, { addr: 127.0.0.1:9002 } ], health: { passive: { window: 30s } } }
`

// A reload carries host state, route counters, route trackers and warm
// upstream clients over for what the two configs share.
func TestStateIsCarriedOverForWhatTheConfigsShare(t *testing.T) {
	a, err := Compile(parse(t, twoRoutes), nil, Env{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if !a.Pool("web").SetMode("127.0.0.1:9002", health.Drained, time.Now()) {
		t.Fatal("no such host")
	}
	b, err := Compile(parse(t, strings.Replace(twoRoutes, "{ addr: 127.0.0.1:9001 }", "{ addr: 127.0.0.1:9003 }", 1)), a, Env{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if m := b.Pool("web").Host("127.0.0.1:9002").Mode(); m != health.Drained {
		t.Errorf("kept host is %s in the new config, want drained", m)
	}
	if m := b.Pool("web").Host("127.0.0.1:9003").Mode(); m != health.Healthy {
		t.Errorf("new host is %s, want healthy", m)
	}
	for _, name := range []string{"site", "api"} {
		if b.Route(name).Stats != a.Route(name).Stats || b.Route(name).Tracker != a.Route(name).Tracker {
			t.Errorf("route %s: counters or tracker replaced", name)
		}
		if b.Route(name).Upstream != a.Route(name).Upstream {
			t.Errorf("route %s: upstream client replaced though its settings did not change", name)
		}
	}
	if a.Route("site").Upstream == a.Route("api").Upstream {
		t.Error("routes with different timeouts share an upstream client")
	}
}

// A config that fails to compile changes nothing of the runtime it would
// have replaced.
func TestARefusedCompileChangesNothing(t *testing.T) {
	a, err := Compile(parse(t, twoRoutes), nil, Env{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	bad := strings.Replace(twoRoutes, "window: 30s", "window: 5s", 1) +
		"edge: { deny_file: /nonexistent/deny.txt }\n"
	if _, err := Compile(parse(t, bad), a, Env{}); err == nil {
		t.Fatal("compiled with a missing deny file")
	}
	if mode := a.Pool("web").Hosts[0].Mode(); mode != health.Healthy {
		t.Fatalf("host is %s", mode)
	}
	// The kept hosts' windows take a new span only once the new config
	// serves (health.Monitor adopts it), never at compile.
	if got := a.Pool("web").Hosts[0].Window(time.Now()); got.Requests != 0 {
		t.Fatalf("window touched: %+v", got)
	}
}

func TestSorryPageFromFileAndItsContentType(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "sorry.html")
	os.WriteFile(page, []byte("  <h1>Back soon</h1>\n"), 0o644)
	cfg := parse(t, strings.Replace(twoRoutes, "{ name: site, default: true, pool: web }",
		"{ name: site, default: true, pool: web, sorry: { body_file: "+page+", retry_after: 90s } }", 1))
	rt, err := Compile(cfg, nil, Env{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	s := rt.Route("site").Sorry
	if string(s.Body) != "  <h1>Back soon</h1>\n" || s.ContentType != "text/html; charset=utf-8" || s.RetryAfter != "90" || s.Status != 503 {
		t.Errorf("sorry page %+v", s)
	}
	if d := rt.Route("api").Sorry; d.ContentType != "text/plain; charset=utf-8" || !strings.Contains(string(d.Body), `route "api"`) {
		t.Errorf("default sorry page %+v", d)
	}
}

// The runtime's hash covers the files the config names: a changed deny
// list or sorry page is a new hash with the same config bytes.
func TestHashCoversTheFilesTheConfigNames(t *testing.T) {
	dir := t.TempDir()
	deny, sorry, page := filepath.Join(dir, "deny.txt"), filepath.Join(dir, "sorry.html"), filepath.Join(dir, "50x.html")
	os.WriteFile(deny, []byte("192.0.2.1\n"), 0o600)
	os.WriteFile(sorry, []byte("<h1>back soon</h1>"), 0o600)
	os.WriteFile(page, []byte("<h1>oops</h1>"), 0o600)
	cfg := parse(t, `
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
edge: { deny_file: "`+deny+`" }
routes: [ { name: a, default: true, pool: p, sorry: { body_file: "`+sorry+`" }, error_pages: [ { codes: [502], file: "`+page+`" } ] } ]
pools: [ { name: p, hosts: [ { addr: "127.0.0.1:9001" }, { addr: "127.0.0.1:9002" } ] } ]
`)
	hash := func() string {
		rt, err := Compile(cfg, nil, Env{})
		if err != nil {
			t.Fatal(err)
		}
		rt.Close()
		return rt.Hash
	}
	h0 := hash()
	if h0 == "" || h0 == cfg.Hash || hash() != h0 {
		t.Fatalf("hash %q (config %q) is not a stable hash of config and files", h0, cfg.Hash)
	}
	os.WriteFile(deny, []byte("192.0.2.1\n192.0.2.2\n"), 0o600)
	h1 := hash()
	os.WriteFile(sorry, []byte("<h1>back later</h1>"), 0o600)
	h2 := hash()
	os.WriteFile(page, []byte("<h1>oops, again</h1>"), 0o600)
	h3 := hash()
	if h1 == h0 || h2 == h1 || h3 == h2 {
		t.Fatalf("hashes %s %s %s %s: a changed deny list, sorry page or error page did not change it", h0, h1, h2, h3)
	}
}
