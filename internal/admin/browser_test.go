package admin

import (
	"context"
	"flag"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var screenshot = flag.String("screenshot", "", "also save a PNG of the status page during the scripted incident to this file (for docs)")

// chromium finds a headless-capable Chromium, or skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("status page browser test skipped: no chromium on PATH (Debian: apt-get install -y chromium; .ci/run installs it)")
	return ""
}

// runChromium runs headless Chromium with the flags that keep it quiet and
// offline, plus extra, and returns its standard output.
func runChromium(t *testing.T, bin string, extra ...string) string {
	t.Helper()
	args := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=5000", "--hide-scrollbars",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, extra...)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	return string(out)
}

// Test 6 of the issue: the status page in a real browser. The fake backend
// starts healthy and turns into the incident on its next snapshot, so the
// DOM chromium dumps after its virtual 5 s shows the page updated itself
// (it polls every 2 s) without a reload.
func TestStatusPageInBrowser(t *testing.T) {
	bin := chromium(t)
	b := &fakeBackend{}
	srv := httptest.NewServer(New(b, Options{Loopback: true}))
	defer srv.Close()
	dom := runChromium(t, bin, "--dump-dom", srv.URL+"/status")

	b.mu.Lock()
	polls := b.step
	b.mu.Unlock()
	if polls < 2 {
		t.Fatalf("the page fetched api/status %d times; want at least 2 (it polls every 2s)", polls)
	}
	for _, want := range []*regexp.Regexp{
		// The dead host, its state and its evidence.
		regexp.MustCompile(`<tr class="row-ejected" data-host="web/10\.0\.0\.12:8080" data-state="ejected">`),
		regexp.MustCompile(`5 of 5 attempts connect_refused in 1\.2s from 4 clients; peers 0%`),
		// A healthy and a drained host of the other pool.
		regexp.MustCompile(`data-host="web/10\.0\.0\.11:8080" data-state="healthy"`),
		regexp.MustCompile(`data-host="api/10\.0\.1\.22:9000" data-state="drained"`),
		// The events, newest first, and the attributed client.
		regexp.MustCompile(`(?s)data-event-type="stale_started".*data-event-type="host_ejected".*data-event-type="client_attributed"`),
		regexp.MustCompile(`host 10\.0\.0\.12:8080 ejected: refused 5 connections in a row`),
		regexp.MustCompile(`<tr data-client="203\.0\.113\.7">`),
		// The route answering from stale copies, and the verdict.
		regexp.MustCompile(`(?s)data-route="catalog">.*?data-state="stale"`),
		regexp.MustCompile(`Route catalog answering with stale cached copies`),
		regexp.MustCompile(`id="verdict" class="verdict warning">\d+ warnings?<`),
		// Rates came from deltas between polls.
		regexp.MustCompile(`class="conn">live · every 2 s<`),
	} {
		if !want.MatchString(dom) {
			t.Errorf("rendered DOM lacks %s", want)
		}
	}
	if t.Failed() {
		path := filepath.Join(t.TempDir(), "dom.html")
		os.WriteFile(path, []byte(dom), 0o644)
		t.Logf("DOM (%d bytes):\n%.3000s", len(dom), dom)
	}

	if *screenshot != "" {
		abs, err := filepath.Abs(*screenshot)
		if err != nil {
			t.Fatal(err)
		}
		runChromium(t, bin, "--window-size=1440,1900", "--screenshot="+abs, srv.URL+"/status")
		if fi, err := os.Stat(abs); err != nil || fi.Size() == 0 {
			t.Fatalf("no screenshot at %s: %v", abs, err)
		}
		t.Logf("screenshot saved to %s", abs)
	}
}
