package server

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/fake"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

// metric returns the value of the sample whose line starts with prefix.
func metric(t *testing.T, body, prefix string) string {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, prefix+" ") {
			return strings.TrimPrefix(line, prefix+" ")
		}
	}
	t.Errorf("no sample %s", prefix)
	return ""
}

func adminGet(t *testing.T, s *Server, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + s.AdminAddr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const metricsConfig = `
admin: { listen: "127.0.0.1:0" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: site, default: true, pool: web } ]
pools:
  - name: web
    hosts: [ { addr: "{{dead}}" }, { addr: "{{live}}" } ]
`

// After a scripted episode (one host dies), /metrics says exactly what
// happened, read from state at scrape time.
func TestMetricsAfterAHostDies(t *testing.T) {
	t.Parallel()
	live, _ := fake.NewBackend("live", "127.1.0.1")
	t.Cleanup(live.Close)
	dead := deadAddr(t)
	s, url, _ := startSturdy(t, parseConfig(t, metricsConfig, map[string]string{"dead": dead, "live": live.Addr}))
	for i := range 20 {
		if resp, _ := get(t, http.DefaultClient, fmt.Sprintf("%s/%d", url, i)); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	_, body := adminGet(t, s, "/metrics")
	for prefix, want := range map[string]string{
		`sturdy_requests_total{code_class="2xx",route="site"}`:                                     "20",
		`sturdy_upstream_attempts_total{host="` + dead + `",outcome="connect_refused",pool="web"}`: "3",
		`sturdy_upstream_attempts_total{host="` + live.Addr + `",outcome="ok",pool="web"}`:         "20",
		`sturdy_host_state{host="` + dead + `",pool="web",state="ejected"}`:                        "1",
		`sturdy_host_state{host="` + live.Addr + `",pool="web",state="healthy"}`:                   "1",
		`sturdy_pool_available_hosts{pool="web"}`:                                                  "1",
		`sturdy_attributed_failures_total{attribution="host"}`:                                     "3",
	} {
		if got := metric(t, body, prefix); got != want {
			t.Errorf("%s = %s, want %s", prefix, got, want)
		}
	}
	if strings.Contains(body, "127.0.0.1\"") && strings.Contains(body, "client=") {
		t.Error("a client address became a label")
	}
	code, js := adminGet(t, s, "/api/status")
	if code != 200 || !strings.Contains(js, `"state":"ejected"`) || !strings.Contains(js, "consecutive connect_refused") {
		t.Errorf("/api/status: %d %s", code, js)
	}
}

// A dead default pool under steady load writes a handful of log lines, not
// one per request (incident 001's 1.5 GB an hour).
func TestDeadPoolLogVolume(t *testing.T) {
	t.Parallel()
	// The aggregator's own ticker never fires here: the test flushes at
	// the end of each of four intervals of 375 requests, so that the
	// bound is on lines per interval however fast the machine is.
	cfg := parseConfig(t, `
admin: { listen: "off" }
log: { aggregate_interval: 1h }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: catchall, default: true, pool: dead } ]
pools: [ { name: dead, hosts: [ { addr: "{{d1}}" }, { addr: "{{d2}}" } ], health: { passive: { max_ejected: 100% } } } ]
`, map[string]string{"d1": deadAddr(t), "d2": deadAddr(t)})
	s, url, logs := startSturdy(t, cfg)
	before := strings.Count(logs.String(), "\n")
	// 1500 requests from 5 clients, in four intervals.
	for range 4 {
		var wg sync.WaitGroup
		for _, ip := range ips("127.0.0.", 5) {
			wg.Go(func() {
				c := fake.Client(ip, 5*time.Second)
				for range 75 {
					if resp, err := c.Get(url + "/"); err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				}
			})
		}
		wg.Wait()
		s.agg.Flush() // the end of an aggregation interval
	}
	out := logs.String()
	lines := strings.Count(out, "\n") - before
	if lines > 30 {
		t.Fatalf("%d log lines for 1500 requests in four intervals:\n%s", lines, out)
	}
	if !strings.Contains(out, "answered by the sorry page") {
		t.Fatalf("no aggregated line about the sorry page:\n%s", out)
	}
}

// Draining a host takes it out for new requests and lets the ones in
// flight finish; the runtime API needs the token and refuses cross-origin
// pages.
func TestRuntimeAPIDrainsAHost(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	arrived := make(chan string, 1) // the backend that counted /slow
	var mu sync.Mutex
	hits := map[string]int{}
	mk := func(name string) string {
		b := backend(t, "127.1.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			hits[name]++
			mu.Unlock()
			if r.URL.Path == "/slow" {
				arrived <- name
				<-release
			}
			io.WriteString(w, name)
		}))
		return addr(b)
	}
	a, b := mk("a"), mk("b")
	cfg := parseConfig(t, `
admin: { listen: "127.0.0.1:0", token: "test-token-0123456789" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: site, default: true, pool: web } ]
pools: [ { name: web, balance: least_conn, hosts: [ { addr: "{{a}}" }, { addr: "{{b}}" } ] } ]
`, map[string]string{"a": a, "b": b})
	s, url, _ := startSturdy(t, cfg)
	done := make(chan string, 1)
	go func() {
		_, body := get(t, http.DefaultClient, url+"/slow")
		done <- body
	}()
	// The hit count read below must include /slow: wait for the backend
	// to have counted it, not for the proxy to have sent it.
	var drained string
	select {
	case drained = <-arrived:
	case body := <-done:
		t.Fatalf("/slow was answered before it reached a backend: %q", body)
	}
	busy := a
	if drained == "b" {
		busy = b
	}
	post := func(path string, hdr ...string) int {
		req, _ := http.NewRequest("POST", "http://"+s.AdminAddr()+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	path := "/api/hosts/web/" + busy + "/drain"
	if code := post(path); code != 401 {
		t.Errorf("no token: %d, want 401", code)
	}
	if code := post(path, "Authorization", "Bearer test-token-0123456789", "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"); code != 403 {
		t.Errorf("cross-origin: %d, want 403", code)
	}
	if code := post(path, "Authorization", "Bearer test-token-0123456789"); code != 200 {
		t.Fatalf("drain: %d", code)
	}
	mu.Lock()
	n := hits[drained]
	mu.Unlock()
	for range 10 {
		if _, body := get(t, http.DefaultClient, url+"/fast"); body == drained {
			t.Fatal("a drained host got a new request")
		}
	}
	close(release)
	if body := <-done; body != drained {
		t.Fatalf("the in-flight request did not finish on the drained host: %q", body)
	}
	mu.Lock()
	if hits[drained] != n {
		t.Errorf("drained host saw %d new requests", hits[drained]-n)
	}
	mu.Unlock()
	if code := post("/api/hosts/web/"+busy+"/ready", "Authorization", "Bearer test-token-0123456789"); code != 200 {
		t.Fatalf("ready: %d", code)
	}
}

// /readyz says 503, with the reason, when a counted route has nothing but
// the sorry page left.
func TestReadyzWhenOnlyTheSorryPageIsLeft(t *testing.T) {
	t.Parallel()
	cfg := parseConfig(t, `
admin: { listen: "127.0.0.1:0" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: site, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: "{{d}}" } ], health: { active: { path: /healthz, interval: 200ms, timeout: 100ms, fall: 1, jitter: 0s } } } ]
`, map[string]string{"d": deadAddr(t)})
	s, _, _ := startSturdy(t, cfg)
	var code int
	var body string
	testutil.Eventually(5*time.Second, func() bool {
		code, body = adminGet(t, s, "/readyz")
		return code != 200
	})
	if code != 503 || !strings.Contains(body, "route site") {
		t.Fatalf("/readyz: %d %q", code, body)
	}
}
