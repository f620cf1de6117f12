package server

import (
	"bufio"
	"flag"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// frontend, when set, is the front end of every plain listener the tests
// start (startSturdy): TestSuiteOnTheNetHTTPFrontEnd runs this package's
// tests again with -frontend=net/http (plain listeners default to the
// native one), so that every behaviour they check holds on both
// HTTP/1.1 servers.
var frontend = flag.String("frontend", "", "front end of the tests' plain listeners (net/http or native); empty: as configured")

func TestSuiteOnTheNetHTTPFrontEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the package's short tests again: not in -short")
	}
	if *frontend != "" {
		t.Skip("already running on one front end")
	}
	args := []string{"-test.short", "-frontend=" + config.FrontendNetHTTP, "-test.timeout=15m"}
	if testing.Verbose() {
		args = append(args, "-test.v")
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the package's short tests on the net/http front end failed: %v\n%s", err, tail(out, 200))
	}
	t.Logf("the package's short tests pass on the net/http front end:\n%s", tail(out, 3))
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
	if *frontend == config.FrontendNetHTTP {
		t.Skip("about the native front end")
	}
	be := backend(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Got", r.Method+" "+r.URL.Path+" ["+string(b)+"]")
	}))
	cfg := parseConfig(t, `
admin: { listen: "off" }
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

// An extra CRLF after a POST's body (old clients send one) is skipped on
// both front ends, as nginx and net/http's server skip it (RFC 9112 2.2),
// and the request after it is served on the same connection, whether it
// arrives with the POST or later.
func TestExtraCRLFAfterPostIsSkipped(t *testing.T) {
	t.Parallel()
	be := backend(t, "127.1.33.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Got", r.Method+" "+r.URL.Path+" ["+string(b)+"]")
	}))
	for _, fe := range frontEnds() {
		t.Run(fe, func(t *testing.T) {
			cfg := parseConfig(t, `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0", frontend: {{fe}} } ]
routes: [ { name: all, default: true, pool: app } ]
pools: [ { name: app, hosts: [ { addr: "{{be}}" } ] } ]
`, map[string]string{"be": addr(be), "fe": fe})
			_, base, _ := startSturdy(t, cfg)
			post := "POST /form HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi\r\n"
			for i, from := range []string{"127.0.33.1", "127.0.33.2"} {
				c := rawDial(t, from, strings.TrimPrefix(base, "http://"))
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				br := bufio.NewReader(c)
				io.WriteString(c, post)
				if i == 0 {
					io.WriteString(c, "GET /next HTTP/1.1\r\nHost: x\r\n\r\n") // with the POST
				}
				for j, want := range []string{"POST /form [hi]", "GET /next []"} {
					if i == 1 && j == 1 {
						// After the answer: the CRLF was read with the POST.
						io.WriteString(c, "GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
					}
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						t.Fatalf("from %s, response %d: %v", from, j+1, err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 || resp.Header.Get("X-Got") != want {
						t.Errorf("from %s, response %d: %d %q, want 200 %q", from, j+1, resp.StatusCode, resp.Header.Get("X-Got"), want)
					}
				}
			}
		})
	}
}
