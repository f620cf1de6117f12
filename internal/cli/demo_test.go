package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/demo"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// demoRun is a `sturdy demo` running in the test.
type demoRun struct {
	t             *testing.T
	listen, admin string
	token         string
	stdout        *testutil.SyncBuffer
}

// startDemo runs `sturdy demo` on free ports, as a user would, and waits
// until it is ready; it stops when the test ends.
func startDemo(t *testing.T) *demoRun {
	t.Helper()
	d := &demoRun{t: t, listen: freeAddr(t), admin: freeAddr(t), stdout: &testutil.SyncBuffer{}}
	backends := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	stderr := &testutil.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	code := -1
	wg.Go(func() {
		code = sturdy().cmdDemo(ctx, []string{"-listen", d.listen, "-admin", d.admin, "-backends", strings.Join(backends, ",")}, d.stdout, stderr)
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if code != exitOK {
			t.Errorf("sturdy demo exited %d\n%s", code, stderr)
		}
	})
	tokenLine := regexp.MustCompile(`(?m)^  T=([0-9a-f]{32})$`)
	if !testutil.Eventually(10*time.Second, func() bool {
		resp, err := http.Get("http://" + d.admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200 && tokenLine.MatchString(d.stdout.String())
	}) {
		t.Fatalf("the demo did not get ready\nstdout:\n%s\nstderr:\n%s", d.stdout, stderr)
	}
	d.token = tokenLine.FindStringSubmatch(d.stdout.String())[1]
	return d
}

// control POSTs a demo control, with the token unless noToken.
func (d *demoRun) control(path string, noToken bool) (int, string) {
	d.t.Helper()
	req, _ := http.NewRequest("POST", "http://"+d.admin+"/api/demo/"+path, nil)
	if !noToken {
		req.Header.Set("Authorization", "Bearer "+d.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (d *demoRun) status() view.Status {
	d.t.Helper()
	resp, err := http.Get("http://" + d.admin + "/api/status")
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	var st view.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		d.t.Fatal(err)
	}
	return st
}

// traffic sends n requests through sturdy from four clients (named in
// X-Forwarded-For, as the demo's visitors do), so that the health model
// sees several clients succeed and fail.
func (d *demoRun) traffic(n int) {
	c := &http.Client{Timeout: 5 * time.Second}
	for i := range n {
		req, _ := http.NewRequest("GET", "http://"+d.listen+[]string{"/", "/api/x", "/page"}[i%3], nil)
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("198.51.100.%d", 21+i%4))
		if resp, err := c.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
}

func hostsNotHealthy(st view.Status) []string {
	var out []string
	for _, p := range st.Pools {
		for _, h := range p.Hosts {
			if h.State != view.Healthy {
				out = append(out, p.Name+"/"+h.Addr+"="+h.State)
			}
		}
	}
	return out
}

// The demo's controls end to end, through the runtime API with the token
// the demo printed: the scanner behind the WAF is attributed and no host
// is harmed; a backend flipped to 503 is taken out of rotation; heal
// brings it back.
func TestDemoControlsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo for about 15 seconds")
	}
	d := startDemo(t)
	out := d.stdout.String()
	for _, want := range []string{"http://" + d.admin + "/status#token=" + d.token, "/api/demo/backends/b2/503", "/api/demo/scanner/start"} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo did not print %q:\n%s", want, out)
		}
	}
	if code, body := d.control("heal", true); code != http.StatusUnauthorized {
		t.Errorf("a control without the token: %d %s", code, body)
	}

	// The scanner: attributed, and no host leaves rotation.
	if code, body := d.control("scanner/start", false); code != 200 {
		t.Fatalf("scanner/start: %d %s", code, body)
	}
	attributed := func() bool {
		for _, c := range d.status().Clients {
			if c.Key == demo.ScannerAddr {
				return true
			}
		}
		return false
	}
	if !testutil.Eventually(20*time.Second, func() bool { d.traffic(12); return attributed() }) {
		t.Fatalf("the scanner was never attributed; clients %+v", d.status().Clients)
	}
	d.traffic(30)
	st := d.status()
	if bad := hostsNotHealthy(st); len(bad) > 0 {
		t.Errorf("the scanner took hosts out of rotation: %v", bad)
	}
	if st.Attributed["client"] == 0 {
		t.Errorf("no failure attributed to the client: %v", st.Attributed)
	}
	d.control("scanner/stop", false)

	// b2 answers 503: it leaves rotation in both pools; b1 and b3 stay.
	var ds demo.State
	resp, err := http.Get("http://" + d.admin + "/api/demo")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&ds)
	resp.Body.Close()
	if len(ds.Backends) != 3 || ds.Backends[0].WAFRefused == 0 {
		t.Fatalf("demo state: %+v", ds)
	}
	b2 := ds.Backends[1].Addr
	if code, body := d.control("backends/b2/503", false); code != 200 {
		t.Fatalf("backends/b2/503: %d %s", code, body)
	}
	out2 := func() bool {
		bad := hostsNotHealthy(d.status())
		return len(bad) == 2 && strings.Contains(strings.Join(bad, " "), "web/"+b2+"=") && strings.Contains(strings.Join(bad, " "), "api/"+b2+"=")
	}
	if !testutil.Eventually(20*time.Second, func() bool { d.traffic(12); return out2() }) {
		t.Fatalf("b2 is still in rotation: %v", hostsNotHealthy(d.status()))
	}
	for _, s := range hostsNotHealthy(d.status()) {
		if !strings.HasSuffix(s, "="+view.Down) && !strings.HasSuffix(s, "="+view.Ejected) {
			t.Errorf("%s: want down or ejected", s)
		}
	}

	// Heal: the probes bring b2 back.
	if code, body := d.control("heal", false); code != 200 {
		t.Fatalf("heal: %d %s", code, body)
	}
	if !testutil.Eventually(20*time.Second, func() bool { return len(hostsNotHealthy(d.status())) == 0 }) {
		t.Errorf("after heal: %v", hostsNotHealthy(d.status()))
	}
}

// The status page in demo mode draws the demo panel: a row per backend
// with a button per mode, the current one pressed, and the scanner's
// controls; the token comes from the printed link's fragment.
func TestDemoPanelInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo and a browser")
	}
	bin := testutil.Chromium(t)
	d := startDemo(t)
	if code, body := d.control("backends/b3/blackhole", false); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	dom := testutil.RunChromium(t, bin, "--dump-dom", "http://"+d.admin+"/status#token="+d.token)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`<section id="demo" class="demo" aria-labelledby="h-demo"( data-ready="1")?>`),
		regexp.MustCompile(`<tr data-backend="b3" data-mode="blackhole">.*?<button type="button" data-action="backends/b3/blackhole" title="accepts connections and never answers" aria-pressed="true"`),
		regexp.MustCompile(`<tr data-backend="b1" data-mode="ok">.*?data-action="backends/b1/503"[^>]*aria-pressed="false"`),
		regexp.MustCompile(`data-scanner="stopped">.*?data-action="scanner/start"`),
		regexp.MustCompile(`<pre id="demo-commands">T=` + d.token),
	} {
		if !want.MatchString(dom) {
			t.Errorf("rendered DOM lacks %s", want)
		}
	}
	if t.Failed() {
		i := strings.Index(dom, `id="demo"`)
		t.Logf("DOM around the panel:\n%.3000s", dom[max(i, 0):])
	}
}

// Issue 36 (item 4): the docs' demo table said a broken %-escape gets 400
// while the demo's got 200 (it was in the query, which is forwarded as
// sent). What each malformed request gets, from the real demo, is what
// docs/observability.md says.
func TestDemoMalformedAnswersAsDocumented(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo")
	}
	d := startDemo(t)
	code, body := d.control("malformed", false)
	if code != 200 {
		t.Fatalf("malformed: %d %s", code, body)
	}
	var res struct{ Results []demo.MalformedResult }
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"raw UTF-8 in the query": 200, "a raw Latin-1 byte in the path": 200, "dot segments climbing out of the path": 200,
		"a broken percent-encoding in the path": 400, "a control byte": 400,
	}
	for _, r := range res.Results {
		if w, ok := want[r.What]; !ok || r.Status != w {
			t.Errorf("%s (%s): %d %s, want %d", r.What, r.Target, r.Status, r.Error, w)
		}
		delete(want, r.What)
	}
	if len(want) > 0 {
		t.Errorf("not sent: %v", want)
	}
	doc, err := os.ReadFile("../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, claim := range []string{"raw UTF-8 and Latin-1 bytes are re-encoded and answered (`200`)", "dot segments resolved (`200`)",
		"a broken `%`-escape in the path (`/report/%zz`) and a control byte get `400`"} {
		if !strings.Contains(string(doc), claim) {
			t.Errorf("docs/observability.md no longer says %q", claim)
		}
	}
}
