package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// Issue 20: the status page said "All good" while a route answered 50%
// 5xx, its backends' own 503s (the same request fails on every host, so
// no host is at fault and none is ejected). Here a real sturdy serves a
// route at 50% 5xx next to a healthy one, and headless Chromium renders
// the page: the failing route is a critical problem named in the
// headline, the healthy one is OK.
func TestStatusPageShowsFailingRouteInBrowser(t *testing.T) {
	t.Parallel()
	bin := testutil.Chromium(t)
	// /bad/fail answers 503 on every host of its pool; everything else 200.
	flaky := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/fail") {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "ok")
	})
	f1, f2 := backend(t, "127.0.0.1", flaky), backend(t, "127.0.0.1", flaky)
	g1 := backend(t, "127.0.0.1", named("g1"))
	cfg := parseConfig(t, `
admin: { listen: "127.0.0.1:0" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  - { name: bad, path: /bad/, pool: flaky }
  - { name: good, default: true, pool: fine }
pools:
  - { name: flaky, hosts: [ { addr: "{{f1}}" }, { addr: "{{f2}}" } ] }
  - { name: fine, hosts: [ { addr: "{{g1}}" } ] }
`, map[string]string{"f1": addr(f1), "f2": addr(f2), "g1": addr(g1)})
	s, base, _ := startSturdy(t, cfg)

	// 40 answers on each route from four clients; half of bad's are 503.
	for i := range 40 {
		c := clientFrom(fmt.Sprintf("127.0.20.%d", 1+i%4))
		path := "/bad/ok"
		if i%2 == 1 {
			path = "/bad/fail"
		}
		if resp, _ := get(t, c, base+path); resp.StatusCode != map[bool]int{true: 503, false: 200}[i%2 == 1] {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
		if resp, _ := get(t, c, base+"/page"); resp.StatusCode != 200 {
			t.Fatalf("/page: %d", resp.StatusCode)
		}
	}

	// The snapshot judges the routes first; the page only shows it.
	resp, err := http.Get("http://" + s.AdminAddr() + "/api/status")
	if err != nil {
		t.Fatal(err)
	}
	var st view.Status
	json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	routes := map[string]view.Route{}
	for _, r := range st.Routes {
		routes[r.Name] = r
	}
	if r := routes["bad"]; r.Verdict.Level != view.LevelCritical || r.Recent.ErrorRatio != 0.5 ||
		!strings.Contains(r.Verdict.Reason, "50.0% of answers were 5xx in the last") || !strings.Contains(r.Verdict.Reason, "(20 of 40)") {
		t.Errorf("route bad: recent %+v, verdict %+v", r.Recent, r.Verdict)
	}
	if r := routes["good"]; r.Verdict.Level != view.LevelOK || r.Recent.Requests["2xx"] != 40 {
		t.Errorf("route good: recent %+v, verdict %+v", r.Recent, r.Verdict)
	}
	for _, p := range st.Pools {
		for _, h := range p.Hosts {
			if h.State != view.Healthy || h.Verdict.Level != view.LevelOK {
				t.Errorf("host %s/%s: %s, verdict %+v: a failure every host shares is no host's", p.Name, h.Addr, h.State, h.Verdict)
			}
		}
	}

	dom := testutil.RunChromium(t, bin, "--dump-dom", "http://"+s.AdminAddr()+"/status")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`id="verdict" class="verdict critical">1 critical problem: Route bad is failing its clients<`),
		regexp.MustCompile(`<li class="critical" data-level="critical" data-kind="route" data-subject="bad"><span class="what">Route bad is failing its clients</span><span class="detail">Its clients got 50\.0% 5xx answers in the last (?:minute|\d+s)\.</span>.*?<span class="evidence">50\.0% of answers were 5xx in the last [\d.]+s \(20 of 40\)[^<]*</span>`),
		regexp.MustCompile(`data-route="bad" data-verdict="critical">.*?<span class="badge s-critical" data-state="critical">50\.0% 5xx</span>`),
		regexp.MustCompile(`data-route="good" data-verdict="ok">.*?<span class="badge s-ok" data-state="ok">0\.0% 5xx</span>`),
	} {
		if !want.MatchString(dom) {
			t.Errorf("rendered DOM lacks %s", want)
		}
	}
	if strings.Contains(dom, "All good") {
		t.Error("the page says All good")
	}
	if t.Failed() {
		t.Logf("DOM (%d bytes):\n%.4000s", len(dom), dom)
	}
}
