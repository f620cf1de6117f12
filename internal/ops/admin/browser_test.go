package admin

import (
	"flag"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

var screenshot = flag.String("screenshot", "", "also save a PNG of the status page during the scripted incident to this file (for docs)")

// Test 6 of the issue: the status page in a real browser. The fake backend
// starts healthy and turns into the incident on its next snapshot, so the
// DOM chromium dumps after its virtual 5 s shows the page updated itself
// (it polls every 2 s) without a reload.
func TestStatusPageInBrowser(t *testing.T) {
	bin := testutil.Chromium(t)
	b := &fakeBackend{}
	srv := httptest.NewServer(New(b, Options{Loopback: true}))
	defer srv.Close()
	dom := testutil.RunChromium(t, bin, "--dump-dom", srv.URL+"/status")

	b.mu.Lock()
	polls := b.step
	b.mu.Unlock()
	if polls < 2 {
		t.Fatalf("the page fetched api/status %d times; want at least 2 (it polls every 2s)", polls)
	}
	for _, want := range []*regexp.Regexp{
		// The dead host, its state and its evidence.
		regexp.MustCompile(`<tr class="row-ejected" data-host="web/10\.0\.0\.12:8080" data-state="ejected"`),
		regexp.MustCompile(`5 of 5 attempts connect_refused in 1\.2s from 4 clients; peers 0%`),
		// Its latest probe, which failed too, in its row and in Needs attention.
		regexp.MustCompile(`<span class="evidence">last probe: GET /healthz: dial tcp 10\.0\.0\.12:8080: connection refused</span>`),
		regexp.MustCompile(`peers 0%; last probe: GET /healthz: dial tcp 10\.0\.0\.12:8080: connection refused</span>`),
		// A healthy and a drained host of the other pool.
		regexp.MustCompile(`data-host="web/10\.0\.0\.11:8080" data-state="healthy"`),
		regexp.MustCompile(`data-host="api/10\.0\.1\.22:9000" data-state="drained"`),
		// The events, newest first, and the attributed client.
		regexp.MustCompile(`(?s)data-event-type="stale_started".*data-event-type="host_ejected".*data-event-type="client_attributed"`),
		regexp.MustCompile(`host 10\.0\.0\.12:8080 ejected: refused 5 connections in a row`),
		regexp.MustCompile(`<tr data-client="203\.0\.113\.7">`),
		// The route answering from stale copies, and the verdict.
		regexp.MustCompile(`(?s)data-route="catalog"[^>]*>.*?data-state="stale"`),
		// The last minute, judged by the server: the site route is fine.
		regexp.MustCompile(`data-route="site" data-verdict="ok">.*?<span class="badge s-ok" data-state="ok">0\.0% 5xx</span>`),
		regexp.MustCompile(`Route catalog answering with stale cached copies`),
		regexp.MustCompile(`id="verdict" class="verdict critical">1 critical problem: api / 10\.0\.1\.23:9000 down<`),
		regexp.MustCompile(`<span class="what">api / 10\.0\.1\.23:9000 down</span><span class="detail">readiness probe failed — GET /healthz: status 500, expected 200-399</span>`),
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
		testutil.RunChromium(t, bin, "--window-size=1440,1900", "--screenshot="+abs, srv.URL+"/status")
		if fi, err := os.Stat(abs); err != nil || fi.Size() == 0 {
			t.Fatalf("no screenshot at %s: %v", abs, err)
		}
		t.Logf("screenshot saved to %s", abs)
	}
}
