package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/testing/fake"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// A failing host, as a person sees it: a real sturdy whose pool has two
// good hosts, one answering 503 to everyone and one where nothing
// listens. Retries keep every client's answer good, so the route is fine;
// the page shows each failing host as ejected, with its cause (the
// evidence that convicted it), the last minute's failed attempts, and the
// headline counts them as warnings instead of saying All good.
func TestStatusPageShowsFailingHostInBrowser(t *testing.T) {
	t.Parallel()
	bin := testutil.Chromium(t)
	var bs []*fake.Backend
	for i := 1; i <= 3; i++ {
		b, err := fake.NewBackend(fmt.Sprintf("b%d", i), fmt.Sprintf("127.1.20.%d", i))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		bs = append(bs, b)
	}
	bad := bs[2]
	bad.Set("", fake.Behavior{Status: 503})
	dead := deadAddr(t)
	s, url, _ := startSturdy(t, parseConfig(t, `
admin: { listen: "127.0.0.1:0" }
attribution: { window: 5s }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: site, default: true, pool: web, retry: { tries: 3, min_retries: 100 } } ]
pools:
  - name: web
    hosts: [ { addr: "{{b1}}" }, { addr: "{{b2}}" }, { addr: "{{bad}}" }, { addr: "{{dead}}" } ]
    health: { passive: { window: 5s, min_requests: 5, eject_time: 1m, max_eject_time: 1m } }
`, map[string]string{"b1": bs[0].Addr, "b2": bs[1].Addr, "bad": bad.Addr, "dead": dead}))
	pool := s.Runtime().Pool("web")
	gone := func() bool { return pool.Hosts[2].Mode() == health.Ejected && pool.Hosts[3].Mode() == health.Ejected }
	tl := &tally{}
	for round := 0; round < 40 && !gone(); round++ {
		r := load(t, url, ips("127.0.21.", 4), 4, 0, func(i int) string { return fmt.Sprintf("/item/%d", i) })
		for st, n := range r.n {
			for range n {
				tl.add(st)
			}
		}
		nextTick(t, s)
	}
	if !gone() {
		t.Fatalf("hosts %s (503) and %s (dead), want both ejected", pool.Hosts[2].Mode(), pool.Hosts[3].Mode())
	}
	if tl.failures() > 0 {
		t.Fatalf("%d client-visible failures (GETs are retried): %v", tl.failures(), tl.n)
	}

	// The snapshot says why; the page must show it.
	resp, err := http.Get("http://" + s.AdminAddr() + "/api/status")
	if err != nil {
		t.Fatal(err)
	}
	var st view.Status
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	hosts := map[string]view.Host{}
	for _, h := range st.Pools[0].Hosts {
		hosts[h.Addr] = h
	}
	for _, a := range []string{bad.Addr, dead} {
		if h := hosts[a]; h.State != view.Ejected || h.Reason == "" || h.Recent.Failures == 0 {
			t.Errorf("host %s: %s, reason %q, evidence %q, recent %+v", a, h.State, h.Reason, h.Evidence, h.Recent)
		}
	}
	if h := hosts[bad.Addr]; !strings.Contains(h.Evidence, "status_5xx") {
		t.Errorf("the 503 host's evidence %q does not name its 503s", h.Evidence)
	}
	if st.Routes[0].Verdict.Level != view.LevelOK {
		t.Errorf("route site: %+v; its clients got only good answers", st.Routes[0].Verdict)
	}

	dom := testutil.RunChromium(t, bin, "--dump-dom", "http://"+s.AdminAddr()+"/status")
	b503, dead := regexp.QuoteMeta(bad.Addr), regexp.QuoteMeta(dead)
	// The 503 host goes out by whichever passive rule sees it first: its
	// failure rate against its peers', or failures in a row from several
	// clients while its peers succeed. Either names its 503s.
	why503 := `(?:failure rate clearly above its peers'|failed requests in a row from several clients while its peers succeed)`
	for _, want := range []*regexp.Regexp{
		// The headline counts both; neither is hidden behind "All good".
		regexp.MustCompile(`id="verdict" class="verdict warning">2 warnings: Host (` + b503 + `|` + dead + `) is ejected<`),
		// Needs attention: each host, why in words, and the evidence.
		regexp.MustCompile(`<span class="what">Host ` + b503 + ` is ejected</span><span class="since"[^>]*>[^<]*</span><span class="detail">Taken out of rotation on its traffic: it answers with server errors \(5xx\)\. Check its logs\.</span>.*?<span class="evidence">` + why503 + ` — [^<]*status_5xx[^<]*</span>`),
		regexp.MustCompile(`<span class="what">Host ` + dead + ` is ejected</span><span class="since"[^>]*>[^<]*</span><span class="detail">Taken out of rotation on its traffic: nothing accepts connections on its address \(connection refused\)\. [^<]*</span>.*?<span class="evidence">connection failures in a row — \d+ consecutive connect_refused</span>`),
		regexp.MustCompile(`<li data-level="ok" data-affects="route/site"><span class="badge s-ok" data-state="ok">route site</span> clients served as usual</li>`),
		// The hosts table: state, cause in Needs attention's words with
		// the recorded reason as small print, the last minute's failures.
		regexp.MustCompile(`data-host="web/` + b503 + `" data-state="ejected"[^>]*>.*?<td class="why">Taken out of rotation on its traffic: it answers with server errors \(5xx\)\. Check its logs\.<span class="evidence">` + why503 + ` — [^<]*status_5xx[^<]*</span></td>(<td[^>]*>[^<]*</td>){3}<td class="num[^"]*"[^>]*>100\.0%</td>`),
		regexp.MustCompile(`data-host="web/` + dead + `" data-state="ejected"[^>]*>.*?<td class="why">Taken out of rotation on its traffic: nothing accepts connections on its address \(connection refused\)\. [^<]*<span class="evidence">connection failures in a row — \d+ consecutive connect_refused</span></td>(<td[^>]*>[^<]*</td>){3}<td class="num[^"]*"[^>]*>100\.0%</td>`),
		regexp.MustCompile(`data-host="web/` + regexp.QuoteMeta(bs[0].Addr) + `" data-state="healthy"[^>]*>.*?<td class="why"></td>(<td[^>]*>[^<]*</td>){3}<td class="num[^"]*"[^>]*>0\.0%</td>`),
		// The route itself is fine: retries hid both hosts from its clients.
		regexp.MustCompile(`data-route="site" data-verdict="ok">.*?<span class="badge s-ok" data-state="ok">0\.0% 5xx</span>`),
	} {
		if !want.MatchString(dom) {
			t.Errorf("rendered DOM lacks %s", want)
		}
	}
	if strings.Contains(dom, "All good") {
		t.Error("the page says All good")
	}
	if t.Failed() {
		t.Logf("DOM (%d bytes):\n%.6000s", len(dom), dom)
	}
}
