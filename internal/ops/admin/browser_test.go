package admin

import (
	"flag"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/testing/scenes"
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
		// Its row: why in Needs attention's words, then as recorded with
		// its latest probe, which failed too, as small print.
		regexp.MustCompile(`data-host="web/10\.0\.0\.12:8080"[^>]*>.*?<td class="why">Taken out of rotation on its traffic: nothing accepts connections on its address \(connection refused\)\. Check [^<]*<span class="evidence">refused 5 connections in a row[^<]* — last probe: GET /healthz: dial tcp 10\.0\.0\.12:8080: connection refused</span></td>`),
		regexp.MustCompile(`peers 0%</span>|peers 0% — last probe: GET /healthz: dial tcp 10\.0\.0\.12:8080: connection refused</span>`),
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
		// Needs attention, worst first: what clients get comes first (the
		// stale copies), then the hosts out, each once, worded for people.
		regexp.MustCompile(`id="verdict" class="verdict critical">1 critical problem: Route catalog answers with stale cached copies<`),
		regexp.MustCompile(`(?s)data-subject="catalog">.*data-subject="10\.0\.0\.12:8080">.*data-subject="10\.0\.1\.23:9000">.*data-subject="10\.0\.1\.22:9000">.*data-subject="clients">`),
		regexp.MustCompile(`<li class="warning" data-level="warning" data-kind="host" data-subject="10\.0\.1\.23:9000"><span class="what">Host 10\.0\.1\.23:9000 is down</span><span class="since"[^>]*>[^<]*</span><span class="detail">Its health check answers 500 instead of 200-399: it answers with server errors \(5xx\)\. Check its logs\.</span>`),
		regexp.MustCompile(`<span class="what">Host 10\.0\.0\.12:8080 is ejected</span><span class="since"[^>]*>[^<]*</span><span class="detail">Taken out of rotation on its traffic: nothing accepts connections on its address \(connection refused\)\.`),
		regexp.MustCompile(`<li class="info" data-level="info" data-kind="host" data-subject="10\.0\.1\.22:9000"><span class="what">Host 10\.0\.1\.22:9000 is drained</span>`),
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
		t.Logf("DOM (%d bytes):\n%.3000s", len(dom), dom[max(strings.Index(dom, `id="problems"`), 0):])
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

var screenshots = flag.String("screenshots", "", "also save a PNG of the status page in each situation of TestStatusPageSituationsInBrowser to DIR/status-SITUATION.png (for docs/img)")

// Issue 36: the page as a person sees it in the three situations that
// must look different. One redundant backend down while every client is
// served is one warning, not a critical problem per pool; every backend
// down is one critical problem per backend, each with its pools and
// routes beneath it, not a dozen symptoms headlined "Not ready"; a
// healthy site is all good. No headline or reason shows Go's error text.
func TestStatusPageSituationsInBrowser(t *testing.T) {
	bin := testutil.Chromium(t)
	problem := regexp.MustCompile(`<li class="(\w+)" data-level="\w+" data-kind="(\w+)" data-subject="([^"]+)"><span class="what">([^<]*)</span>`)
	for _, tc := range []struct {
		scene    string
		headline string
		problems []string // level kind subject: title, worst first
		want     []*regexp.Regexp
	}{
		{scenes.Healthy, `<div id="verdict" class="verdict ok">All good</div>`, nil, []*regexp.Regexp{
			regexp.MustCompile(`<li class="ok"><span class="what">Nothing needs attention</span>`),
		}},
		{scenes.OneHostDown, `<div id="verdict" class="verdict warning">1 warning: Host 127\.0\.0\.1:9102 is down</div>`,
			[]string{"warning host 127.0.0.1:9102: Host 127.0.0.1:9102 is down"}, []*regexp.Regexp{
				regexp.MustCompile(`<span class="detail">Its health check \(GET /healthz\) fails: it accepts connections but does not answer in time\. Check its load`),
				regexp.MustCompile(`<li data-level="warning" data-affects="pool/web"><span class="badge s-warning" data-state="warning">pool web</span> here down; 2 of 3 hosts in rotation</li>`),
				regexp.MustCompile(`<li data-level="warning" data-affects="pool/api"><span class="badge s-warning" data-state="warning">pool api</span> here down; 1 of 2 hosts in rotation</li>`),
				regexp.MustCompile(`<li data-level="ok" data-affects="route/site"><span class="badge s-ok" data-state="ok">route site</span> clients served as usual</li>`),
				// Go's words are the evidence, below the reason.
				regexp.MustCompile(`<span class="evidence">readiness probe failed — request failed: context deadline exceeded`),
			}},
		{scenes.AllDown, `<div id="verdict" class="verdict critical">3 critical problems: Host 127\.0\.0\.1:9101 is down</div>`,
			[]string{"critical host 127.0.0.1:9101: Host 127.0.0.1:9101 is down", "critical host 127.0.0.1:9102: Host 127.0.0.1:9102 is down", "critical host 127.0.0.1:9103: Host 127.0.0.1:9103 is down"}, []*regexp.Regexp{
				regexp.MustCompile(`nothing accepts connections on its address \(connection refused\)\. Check that the backend runs`),
				regexp.MustCompile(`Its health check \(GET /healthz\) answers 503 instead of 200-399`),
				regexp.MustCompile(`<li data-level="critical" data-affects="route/site"><span class="badge s-critical" data-state="critical">route site</span> answers with the sorry page \(503\); /readyz answers 503; 50\.0% of its answers 5xx in the last minute</li>`),
				regexp.MustCompile(`<li data-level="critical" data-affects="route/cached"><span class="badge s-critical" data-state="critical">route cached</span> answers with stale cached copies</li>`),
				regexp.MustCompile(`<li data-level="critical" data-affects="pool/web"><span class="badge s-critical" data-state="critical">pool web</span> here down; no host left of 3</li>`),
			}},
	} {
		t.Run(tc.scene, func(t *testing.T) {
			srv := httptest.NewServer(New(&fakeBackend{scene: tc.scene}, Options{Loopback: true}))
			defer srv.Close()
			dom := testutil.RunChromium(t, bin, "--dump-dom", srv.URL+"/status")
			if !regexp.MustCompile(tc.headline).MatchString(dom) {
				t.Errorf("headline: want %s", tc.headline)
			}
			var got []string
			for _, m := range problem.FindAllStringSubmatch(dom, -1) {
				if m[1] != "ok" {
					got = append(got, m[1]+" "+m[2]+" "+m[3]+": "+m[4])
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.problems, "\n") {
				t.Errorf("Needs attention lists\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.problems, "\n"))
			}
			for _, w := range tc.want {
				if !w.MatchString(dom) {
					t.Errorf("rendered DOM lacks %s", w)
				}
			}
			// Go's error text may be evidence, never a headline or a reason.
			for _, m := range regexp.MustCompile(`<span class="(?:what|detail)">([^<]*)</span>|class="verdict[^"]*">([^<]*)<`).FindAllStringSubmatch(dom, -1) {
				for _, s := range []string{"deadline exceeded", "connection refused: ", "dial tcp", "EOF", "Not ready"} {
					if strings.Contains(m[1]+m[2], s) {
						t.Errorf("%q shows %q", m[1]+m[2], s)
					}
				}
			}
			if t.Failed() {
				i := strings.Index(dom, `id="problems"`)
				t.Logf("DOM from Needs attention:\n%.5000s", dom[max(i, 0):])
			}
			if *screenshots != "" {
				abs, err := filepath.Abs(filepath.Join(*screenshots, "status-"+tc.scene+".png"))
				if err != nil {
					t.Fatal(err)
				}
				testutil.RunChromium(t, bin, "--window-size=1200,900", "--screenshot="+abs, srv.URL+"/status")
				if fi, err := os.Stat(abs); err != nil || fi.Size() == 0 {
					t.Fatalf("no screenshot at %s: %v", abs, err)
				}
				t.Logf("screenshot saved to %s", abs)
			}
		})
	}
}
