package server

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// frontend, when set, is the front end of every plain listener the tests
// start (startSturdy): TestSuiteOnTheNativeFrontEnd runs this package's
// tests again with -frontend=native, so that every behaviour they check
// holds on both HTTP/1.1 servers.
var frontend = flag.String("frontend", "", "front end of the tests' plain listeners (net/http or native); empty: as configured")

func TestSuiteOnTheNativeFrontEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the package's short tests again: not in -short")
	}
	if *frontend != "" {
		t.Skip("already running on one front end")
	}
	args := []string{"-test.short", "-frontend=" + config.FrontendNative, "-test.timeout=15m"}
	if testing.Verbose() {
		args = append(args, "-test.v")
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the package's short tests on the native front end failed: %v\n%s", err, tail(out, 200))
	}
	t.Logf("the package's short tests pass on the native front end:\n%s", tail(out, 3))
}

// tail is the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// The native front end serves what it reads in full and hands the rest to
// net/http on the same connection: a chunked request, an Upgrade, h2c's
// preface; keep-alive goes on after it.
func TestNativeFrontEndHandsOffWhatItDoesNotRead(t *testing.T) {
	be := backend(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Got", r.Method+" "+r.URL.Path+" ["+string(b)+"]")
	}))
	cfg := parseConfig(t, `
listeners:
  - { name: web, listen: "127.0.0.1:0", frontend: native }
routes:
  - { name: all, default: true, pool: app }
pools:
  - { name: app, hosts: [ { addr: "{{be}}" } ] }
`, map[string]string{"be": addr(be)})
	s, base, _ := startSturdy(t, cfg)
	c := rawDial(t, "127.0.0.3", strings.TrimPrefix(base, "http://"))
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	for i, tc := range []struct{ raw, want string }{
		{"GET /a HTTP/1.1\r\nHost: x\r\n\r\n", "GET /a []"},
		{"POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n", "POST /b [hi]"},
		{"GET /c HTTP/1.1\r\nHost: x\r\n\r\n", "GET /c []"},
	} {
		io.WriteString(c, tc.raw)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		if got := resp.Header.Get("X-Got"); got != tc.want || resp.StatusCode != 200 {
			t.Fatalf("%q: %d, the backend got %q; want %q", tc.raw, resp.StatusCode, got, tc.want)
		}
		if v, _ := s.localView(time.Now()); i == 0 && v.Handoffs["web"] != 0 {
			t.Fatalf("a plain GET was handed off (%v)", v.Handoffs)
		}
	}
	// /a went the native way; the chunked request took the connection
	// to net/http's server, which answered /c as well.
	if v, _ := s.localView(time.Now()); v.Handoffs["web"] != 1 {
		t.Fatalf("hand-offs counted: %v; want 1", v.Handoffs)
	}
	// An ambiguous request is refused as on net/http: the hand-off keeps
	// the framing follower.
	io.WriteString(c, "POST /d HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusBadRequest || !resp.Close {
		t.Fatalf("CL.TE: %d close=%v; want 400 and the connection closed", resp.StatusCode, resp.Close)
	}
}

// Reloads that change a native listener's settings (each a new server on
// the same socket, the old one drained) under keep-alive load fail no
// request. (The same reloads of a net/http listener lost 1 to 3 of 720
// keep-alive requests a run: a known limit, noted in docs/performance.md.)
func TestReloadOfNativeListenersDropsNothing(t *testing.T) {
	t.Parallel()
	b1 := backend(t, "127.1.0.21", named("b1"))
	const tmpl = `
listeners: [ { name: web, listen: "127.0.0.1:0", frontend: {{fe}}, idle_timeout: {{idle}} } ]
routes: [ { name: site, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: "{{b1}}" } ] } ]
`
	vars := func(i int) map[string]string {
		return map[string]string{"b1": addr(b1), "fe": config.FrontendNative, "idle": fmt.Sprintf("%ds", 30+i)}
	}
	s, url, _ := startSturdy(t, parseConfig(t, tmpl, vars(0)))
	const clients, perClient = 6, 120
	var failures, done atomic.Int64
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			client := clientFrom(fmt.Sprintf("127.0.0.%d", 30+c))
			for i := range perClient {
				resp, body := getQuiet(client, fmt.Sprintf("%s/c%d/%d", url, c, i))
				if resp == nil || resp.StatusCode != 200 || !strings.HasPrefix(body, "b1 ") {
					failures.Add(1)
				}
				done.Add(1)
			}
		})
	}
	reloads := 0
	for i := 1; done.Load() < clients*perClient && i < 100; i++ {
		if err := s.Reload(parseConfig(t, tmpl, vars(i))); err != nil {
			t.Fatal(err)
		}
		reloads++
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
	if f := failures.Load(); f != 0 {
		t.Fatalf("%d of %d requests failed across %d reloads of the native listener", f, clients*perClient, reloads)
	}
	if reloads < 4 {
		t.Fatalf("only %d reloads happened during the load", reloads)
	}
}

// getQuiet is a GET that reports failure as a nil response.
func getQuiet(c *http.Client, url string) (*http.Response, string) {
	resp, err := c.Get(url)
	if err != nil {
		return nil, ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, ""
	}
	return resp, string(b)
}
