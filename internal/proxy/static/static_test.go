package static

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRootAppendsThePathAliasReplacesThePrefix(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, map[string]string{"img/a.png": "root-img", "a.png": "alias-img"})
	rootH, _ := compile(t, route{path: "/img/", static: "root: " + dir})
	aliasH, _ := compile(t, route{path: "/img/", static: "alias: " + dir})
	if r := get(t, "GET", start(t, rootH, nil)+"/img/a.png"); r.status != 200 || r.body != "root-img" {
		t.Errorf("root: %d %q", r.status, r.body)
	}
	if r := get(t, "GET", start(t, aliasH, nil)+"/img/a.png"); r.status != 200 || r.body != "alias-img" {
		t.Errorf("alias: %d %q", r.status, r.body)
	}
}

func TestIndexFilesAndTheTrailingSlashRedirect(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, map[string]string{"docs/index.htm": "docs index", "index.html": "home", "empty/": ""})
	h, _ := compile(t, route{static: "root: " + dir + ", index: [ index.html, index.htm ]"})
	url := start(t, h, nil)
	if r := get(t, "GET", url+"/"); r.body != "home" || r.header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("/: %d %q %q", r.status, r.body, r.header.Get("Content-Type"))
	}
	if r := get(t, "GET", url+"/docs/"); r.body != "docs index" {
		t.Errorf("/docs/: %d %q", r.status, r.body)
	}
	if r := get(t, "GET", url+"/docs?x=1"); r.status != http.StatusMovedPermanently || r.header.Get("Location") != "/docs/?x=1" {
		t.Errorf("/docs: %d Location %q", r.status, r.header.Get("Location"))
	}
	// A directory without an index and without autoindex does not match;
	// when nothing else does, it is 403, as nginx's "directory index is
	// forbidden"; a directory that is not there is 404.
	if r := get(t, "GET", url+"/empty/"); r.status != 403 {
		t.Errorf("/empty/: %d, want 403", r.status)
	}
	if r := get(t, "GET", url+"/none/"); r.status != 404 {
		t.Errorf("/none/: %d, want 404", r.status)
	}
	spa, _ := compile(t, route{static: "root: " + dir + ", try_files: [ $uri, $uri/, /index.html ]"})
	if r := get(t, "GET", start(t, spa, nil)+"/empty/"); r.status != 200 || r.body != "home" {
		t.Errorf("/empty/ with a fallback file: %d %q, want the fallback", r.status, r.body)
	}
}

func TestTryFilesChains(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, map[string]string{"index.html": "spa shell", "about.html": "about page", "app.js": "js"})
	cases := []struct {
		name   string
		rt     route
		path   string
		status int
		body   string
	}{
		{"file, then the pool: file", route{pool: true, static: "root: " + dir}, "/app.js", 200, "js"},
		{"file, then the pool: pool", route{pool: true, static: "root: " + dir}, "/api/users", 200, poolBody},
		{"single-page app", route{static: "root: " + dir + ", try_files: [ $uri, /index.html ]"}, "/settings/profile", 200, "spa shell"},
		{"template", route{static: "root: " + dir + ", try_files: [ $uri, $uri.html, =410 ]"}, "/about", 200, "about page"},
		{"status at the end", route{static: "root: " + dir + ", try_files: [ $uri, $uri.html, =410 ]"}, "/gone", 410, "410 Gone\n"},
		{"no pool: 404", route{static: "root: " + dir}, "/nothing", 404, "404 Not Found\n"},
		{"only the pool", route{pool: true, static: "root: " + dir + ", try_files: [ \"@pool\" ]"}, "/app.js", 200, poolBody},
	}
	for _, c := range cases {
		h, _ := compile(t, c.rt)
		if r := get(t, "GET", start(t, h, nil)+c.path); r.status != c.status || r.body != c.body {
			t.Errorf("%s: %s got %d %q, want %d %q", c.name, c.path, r.status, r.body, c.status, c.body)
		}
	}
}

func TestMethods(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, map[string]string{"a.txt": "a"})
	alone, _ := compile(t, route{static: "root: " + dir})
	withPool, _ := compile(t, route{pool: true, static: "root: " + dir})
	r := get(t, "POST", start(t, alone, nil)+"/a.txt")
	if r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST without a pool: %d Allow %q", r.status, r.header.Get("Allow"))
	}
	if r := get(t, "DELETE", start(t, withPool, nil)+"/a.txt"); r.body != poolBody {
		t.Errorf("DELETE with a pool goes to it: %d %q", r.status, r.body)
	}
	if r := get(t, "HEAD", start(t, alone, nil)+"/a.txt"); r.status != 200 || r.header.Get("Content-Length") != "1" || r.body != "" {
		t.Errorf("HEAD: %d %q %q", r.status, r.header.Get("Content-Length"), r.body)
	}
}

func TestRangeAndConditionalRequests(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, map[string]string{"data.txt": "0123456789abcdefghij"})
	h, _ := compile(t, route{static: "root: " + dir + ", cache_control: public, expires: 1h"})
	url := start(t, h, nil) + "/data.txt"
	full := get(t, "GET", url)
	etag, lastMod := full.header.Get("ETag"), full.header.Get("Last-Modified")
	if full.status != 200 || !strings.HasPrefix(etag, `"`) || lastMod == "" || full.header.Get("Accept-Ranges") != "bytes" {
		t.Fatalf("full: %d ETag %q Last-Modified %q", full.status, etag, lastMod)
	}
	if cc := full.header.Get("Cache-Control"); cc != "public, max-age=3600" {
		t.Errorf("Cache-Control %q", cc)
	}
	if r := get(t, "GET", url, "Range: bytes=2-5"); r.status != 206 || r.body != "2345" || r.header.Get("Content-Range") != "bytes 2-5/20" {
		t.Errorf("range: %d %q %q", r.status, r.body, r.header.Get("Content-Range"))
	}
	if r := get(t, "GET", url, "Range: bytes=2-5", "If-Range: "+etag); r.status != 206 {
		t.Errorf("If-Range with the ETag: %d", r.status)
	}
	if r := get(t, "GET", url, "Range: bytes=2-5", `If-Range: "old"`); r.status != 200 || len(r.body) != 20 {
		t.Errorf("If-Range with another ETag: %d %q", r.status, r.body)
	}
	if r := get(t, "GET", url, "Range: bytes=50-"); r.status != http.StatusRequestedRangeNotSatisfiable {
		t.Errorf("range past the end: %d", r.status)
	}
	r := get(t, "GET", url, "If-None-Match: "+etag)
	if r.status != 304 || r.body != "" || r.header.Get("Cache-Control") != "public, max-age=3600" || r.header.Get("ETag") != etag {
		t.Errorf("If-None-Match: %d, Cache-Control %q, ETag %q", r.status, r.header.Get("Cache-Control"), r.header.Get("ETag"))
	}
	if r := get(t, "GET", url, "If-Modified-Since: "+lastMod); r.status != 304 {
		t.Errorf("If-Modified-Since: %d", r.status)
	}
	// The file system is read per request: a change is served at once,
	// with a new validator.
	later := time.Now().Add(time.Hour)
	os.WriteFile(filepath.Join(dir, "data.txt"), []byte("changed"), 0o644)
	os.Chtimes(filepath.Join(dir, "data.txt"), later, later)
	if r := get(t, "GET", url, "If-None-Match: "+etag); r.status != 200 || r.body != "changed" || r.header.Get("ETag") == etag {
		t.Errorf("after a change: %d %q ETag %q", r.status, r.body, r.header.Get("ETag"))
	}
}

var typeCases = map[string]string{
	"/a.css":   "text/css; charset=utf-8",
	"/a.mjs":   "text/javascript; charset=utf-8",
	"/a.js":    "application/javascript; charset=utf-8", // nginx's mime.types
	"/a.woff2": "font/woff2",
	"/a.wasm":  "application/wasm",
	"/a.SVG":   "image/svg+xml",
	"/a.webp":  "image/webp",
	"/a.bin7":  "application/octet-stream",
	"/LICENSE": "application/octet-stream",
}

func TestContentTypesFromTheTable(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{}
	for p := range typeCases {
		files[p[1:]] = "<html>sniffing would say text/html</html>"
	}
	tree(t, dir, files)
	h, _ := compile(t, route{static: "root: " + dir})
	url := start(t, h, nil)
	for p, want := range typeCases {
		if got := get(t, "GET", url+p).header.Get("Content-Type"); got != want {
			t.Errorf("%s: %q, want %q", p, got, want)
		}
	}
}

func TestDirectoryListing(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, map[string]string{"files/<script>.txt": "x", "files/b c.txt": "y", "files/.hidden": "z", "files/sub/": ""})
	h, _ := compile(t, route{static: "root: " + dir + ", autoindex: true"})
	r := get(t, "GET", start(t, h, nil)+"/files/")
	if r.status != 200 || !strings.Contains(r.body, `<a href="%3Cscript%3E.txt">&lt;script&gt;.txt</a>`) ||
		!strings.Contains(r.body, `<a href="b%20c.txt">b c.txt</a>`) || !strings.Contains(r.body, `<a href="sub/">sub/</a>`) {
		t.Errorf("listing: %d\n%s", r.status, r.body)
	}
	if strings.Contains(r.body, ".hidden") || strings.Contains(r.body, "<script>") {
		t.Errorf("listing shows a dotfile or an unescaped name:\n%s", r.body)
	}
	off, _ := compile(t, route{static: "root: " + dir})
	if r := get(t, "GET", start(t, off, nil)+"/files/"); r.status != 403 {
		t.Errorf("without autoindex: %d, want nginx's 403", r.status)
	}
}

func TestDotfiles(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, map[string]string{".env": "SECRET=1", ".git/config": "[core]", "a/.htpasswd": "u:p",
		".well-known/acme-challenge/tok": "challenge", "ok.txt": "ok"})
	for policy, want := range map[string]int{"deny": 404, "forbid": 403, "allow": 200} {
		h, _ := compile(t, route{pool: true, static: "root: " + dir + ", dotfiles: " + policy})
		url := start(t, h, nil)
		for _, p := range []string{"/.env", "/.git/config", "/a/.htpasswd"} {
			r := get(t, "GET", url+p)
			if r.status != want || (want != 200 && (strings.Contains(r.body, "SECRET") || r.body == poolBody)) {
				t.Errorf("dotfiles %s: %s got %d %q, want %d and neither the file nor the pool", policy, p, r.status, r.body, want)
			}
		}
		if r := get(t, "GET", url+"/.well-known/acme-challenge/tok"); r.body != "challenge" {
			t.Errorf("dotfiles %s: .well-known: %d %q", policy, r.status, r.body)
		}
	}
	// The operator who routes a dotted prefix to files has decided for it.
	h, _ := compile(t, route{path: "/.well-known/", static: "root: " + dir})
	if r := get(t, "GET", start(t, h, nil)+"/.well-known/acme-challenge/tok"); r.body != "challenge" {
		t.Errorf("routed .well-known: %d %q", r.status, r.body)
	}
}

// Requests that try to climb out of the directory: raw request lines, so
// that no client cleans them first. The secret sits beside the directory.
func TestTraversalNeverLeavesTheDirectory(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "www")
	tree(t, parent, map[string]string{"secret.txt": "TOP SECRET", "www/a/b.txt": "b"})
	for _, mode := range []string{"root", "alias"} {
		h, _ := compile(t, route{path: "/s/", static: mode + ": " + dir})
		url := start(t, h, nil)
		for _, target := range []string{
			"/s/../secret.txt", "/s/a/../../secret.txt", "/s/%2e%2e/secret.txt", "/s/%2E%2E/secret.txt",
			"/s/a/%2e%2e/%2e%2e/secret.txt", "/s/..%2fsecret.txt", "/s/%2e%2e%2fsecret.txt",
			"/s/a/..%2f..%2fsecret.txt", "/s/..%5csecret.txt", "/s/%00/../secret.txt", "/s/.%2e/secret.txt",
			"/s/a%2f..%2f..%2f..%2fsecret.txt",
		} {
			status, body := raw(t, url, target)
			if status == 200 || strings.Contains(body, "TOP SECRET") {
				t.Errorf("%s %s: %d %q", mode, target, status, body)
			}
		}
		if status, body := raw(t, url, "/s/a/b.txt"); mode == "alias" && (status != 200 || body != "b") {
			t.Errorf("%s: the plain file: %d %q", mode, status, body)
		}
	}
}

func TestSymlinksLeavingTheDirectoryAreRefused(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "www")
	tree(t, parent, map[string]string{"outside/secret.txt": "TOP SECRET", "www/inside.txt": "inside"})
	for link, target := range map[string]string{
		"out.txt":     "../outside/secret.txt",
		"abs.txt":     filepath.Join(parent, "outside", "secret.txt"),
		"outdir":      "../outside",
		"in.txt":      "inside.txt",
		"loop.txt":    "loop.txt",
		"www-up/self": "..",
	} {
		p := filepath.Join(dir, link)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	h, _ := compile(t, route{static: "root: " + dir})
	url := start(t, h, nil)
	for _, p := range []string{"/out.txt", "/abs.txt", "/outdir/secret.txt", "/loop.txt", "/www-up/self/../outside/secret.txt"} {
		if r := get(t, "GET", url+p); r.status == 200 || strings.Contains(r.body, "TOP SECRET") {
			t.Errorf("%s: %d %q", p, r.status, r.body)
		}
	}
	if r := get(t, "GET", url+"/in.txt"); r.status != 200 || r.body != "inside" {
		t.Errorf("a symlink inside the directory: %d %q", r.status, r.body)
	}
}

// A FIFO in the directory must not hold the request (opening one for
// reading blocks until a writer comes).
func TestSpecialFilesAreNotOpened(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	h, _ := compile(t, route{static: "root: " + dir})
	if r := get(t, "GET", start(t, h, nil)+"/pipe"); r.status != 404 {
		t.Errorf("FIFO: %d", r.status)
	}
}

func TestPermissionDeniedIs403(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads every file: run as another user to check the 403")
	}
	dir := t.TempDir()
	tree(t, dir, map[string]string{"locked.txt": "x"})
	os.Chmod(filepath.Join(dir, "locked.txt"), 0)
	h, _ := compile(t, route{static: "root: " + dir})
	if r := get(t, "GET", start(t, h, nil)+"/locked.txt"); r.status != 403 {
		t.Errorf("unreadable file: %d", r.status)
	}
}

func TestCompileChecksOnlyTheDirectory(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "later")
	h, warnings := compile(t, route{pool: true, static: "root: " + dir})
	if len(warnings) != 1 || warnings[0].Path != "routes[0].static.root" || !strings.Contains(warnings[0].Msg, "does not exist") {
		t.Fatalf("warnings %v", warnings)
	}
	url := start(t, h, nil)
	if r := get(t, "GET", url+"/a.txt"); r.body != poolBody {
		t.Errorf("before the deploy: %d %q", r.status, r.body)
	}
	tree(t, dir, map[string]string{"a.txt": "deployed"})
	if r := get(t, "GET", url+"/a.txt"); r.body != "deployed" {
		t.Errorf("after the deploy: %d %q", r.status, r.body)
	}
	tree(t, parent, map[string]string{"file": "x"})
	var b strings.Builder
	b.WriteString("listeners: [ { name: web, listen: 127.0.0.1:8080 } ]\nroutes: [ { name: r, default: true, static: { root: " + filepath.Join(parent, "file") + " } } ]\npools: [ { name: app, hosts: [ { addr: 127.0.0.1:9001 } ] } ]\n")
	c, err := configParse(b.String())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Compile(c, 0); err == nil || !strings.Contains(err.Error(), "test.yaml:2: routes[0].static.root:") || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("a file as root: %v", err)
	}
}

// A deploy that switches a "current" symlink to a new release is followed
// on the next request: the directory is opened per request.
func TestSwitchedReleaseSymlinkIsFollowed(t *testing.T) {
	parent := t.TempDir()
	tree(t, parent, map[string]string{"r1/v.txt": "one", "r2/v.txt": "two"})
	current := filepath.Join(parent, "current")
	os.Symlink("r1", current)
	h, _ := compile(t, route{static: "root: " + current})
	url := start(t, h, nil)
	if r := get(t, "GET", url+"/v.txt"); r.body != "one" {
		t.Fatalf("release 1: %q", r.body)
	}
	os.Symlink("r2", current+".new")
	os.Rename(current+".new", current)
	if r := get(t, "GET", url+"/v.txt"); r.body != "two" {
		t.Errorf("release 2: %q", r.body)
	}
}

// Ranges as RFC 9110 section 14 and nginx read them: a suffix of zero
// bytes cannot be satisfied (416, not a 206 with an upside-down
// Content-Range); a unit other than bytes is ignored (the whole file);
// the unit's name is case-insensitive.
func TestRangesNginxAndTheRFCAgreeOn(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, map[string]string{"data.txt": "0123456789abcdefghij"})
	h, _ := compile(t, route{static: "root: " + dir})
	url := start(t, h, nil) + "/data.txt"
	for _, tc := range []struct {
		rng, ifRange string
		status       int
		body, cr     string
	}{
		{rng: "bytes=-0", status: 416, cr: "bytes */20"},
		{rng: "bytes=-00", status: 416, cr: "bytes */20"},
		{rng: "bytes= -0 ", status: 416, cr: "bytes */20"},
		{rng: "bytes=-0,-0", status: 416, cr: "bytes */20"},
		{rng: "bytes=-0,2-5", status: 206, body: "2345", cr: "bytes 2-5/20"},
		{rng: "bytes=-0", ifRange: `"old"`, status: 200, body: "0123456789abcdefghij"},
		{rng: "bytes=-3", status: 206, body: "hij", cr: "bytes 17-19/20"},
		{rng: "items=0-5", status: 200, body: "0123456789abcdefghij"},
		{rng: "none", status: 200, body: "0123456789abcdefghij"},
		{rng: "Bytes=2-5", status: 206, body: "2345", cr: "bytes 2-5/20"},
		{rng: "BYTES=-0", status: 416, cr: "bytes */20"},
	} {
		hdr := []string{"Range: " + tc.rng}
		if tc.ifRange != "" {
			hdr = append(hdr, "If-Range: "+tc.ifRange)
		}
		r := get(t, "GET", url, hdr...)
		if r.status != tc.status || tc.body != "" && r.body != tc.body || r.header.Get("Content-Range") != tc.cr {
			t.Errorf("Range: %s (If-Range %q): %d %q Content-Range %q; want %d %q %q", tc.rng, tc.ifRange, r.status, r.body, r.header.Get("Content-Range"), tc.status, tc.body, tc.cr)
		}
	}
}

// A file asked for as a directory (a trailing slash) is not there, as in
// nginx; the directory redirect and index files are unchanged.
func TestAFileWithATrailingSlashIsNotFound(t *testing.T) {
	dir := t.TempDir()
	tree(t, dir, map[string]string{"files/a.txt": "a", "files/docs/index.html": "docs", "index.html": "spa"})
	for _, tc := range []struct {
		name   string
		rt     route
		status int
		body   string
	}{
		{"root", route{static: "root: " + dir}, 404, ""},
		{"alias", route{path: "/files/", static: "alias: " + filepath.Join(dir, "files")}, 404, ""},
		{"then the pool", route{pool: true, static: "root: " + dir}, 200, poolBody},
		{"then a fallback file", route{static: "root: " + dir + ", try_files: [ $uri, /index.html ]"}, 200, "spa"},
	} {
		url := start(t, mustCompile(t, tc.rt), nil)
		if r := get(t, "GET", url+"/files/a.txt/"); r.status != tc.status || tc.body != "" && r.body != tc.body {
			t.Errorf("%s: /files/a.txt/: %d %q; want %d %q", tc.name, r.status, r.body, tc.status, tc.body)
		}
		if r := get(t, "GET", url+"/files/a.txt"); tc.name != "then a fallback file" && (r.status != 200 || r.body != "a") {
			t.Errorf("%s: /files/a.txt: %d %q", tc.name, r.status, r.body)
		}
		if tc.name == "root" {
			if r := get(t, "GET", url+"/files/docs/"); r.status != 200 || r.body != "docs" {
				t.Errorf("%s: /files/docs/: %d %q", tc.name, r.status, r.body)
			}
		}
	}
}

func mustCompile(t *testing.T, rt route) *Handler {
	t.Helper()
	h, errs := compile(t, rt)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return h
}
