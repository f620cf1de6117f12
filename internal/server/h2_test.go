package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/testpki"
)

const h2cConfig = `
admin: { listen: "off" }
listeners:
  - { name: h2c, listen: "127.0.0.1:0", h2c: true }
  - { name: plain, listen: "127.0.0.1:0" }
  - { name: tls, listen: "127.0.0.1:0", tls: { cert: "{{cert}}", key: "{{key}}" } }
routes: [ { name: all, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: "{{b}}" } ] } ]
`

func h2cClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Protocols: h2cOnly()}}
}

// An h2c listener speaks HTTP/2 with prior knowledge and HTTP/1.1 on the
// same port; a plain listener without h2c does not speak HTTP/2.
func TestH2CListener(t *testing.T) {
	t.Parallel()
	b := backend(t, "127.1.0.1", named("b1"))
	dir := t.TempDir()
	cert, key := testpki.NewCA(t, "h2c CA").Write(t, dir, "x", testpki.Leaf{DNS: []string{"x"}})
	s, _, _ := startSturdy(t, parseConfig(t, h2cConfig, map[string]string{"b": addr(b), "cert": cert, "key": key}))

	resp, body := get(t, h2cClient(), "http://"+s.Addr("h2c")+"/a")
	if resp.ProtoMajor != 2 || body != "b1 GET /a" {
		t.Errorf("h2c: %s %q; want HTTP/2.0 and the backend's answer", resp.Proto, body)
	}
	resp, body = get(t, clientFrom("127.0.0.1"), "http://"+s.Addr("h2c")+"/b")
	if resp.ProtoMajor != 1 || body != "b1 GET /b" {
		t.Errorf("HTTP/1.1 on the h2c listener: %s %q", resp.Proto, body)
	}
	if resp, err := h2cClient().Get("http://" + s.Addr("plain") + "/"); err == nil {
		resp.Body.Close()
		t.Errorf("a listener without h2c answered HTTP/2 with prior knowledge: %s", resp.Proto)
	}
}

// h2spec, HTTP/2's conformance suite, against sturdy's h2c and TLS
// listeners and, for reference, against Go's own HTTP/2 server: sturdy
// passes every case Go's server passes (the ones Go fails are Go's).
func TestH2Spec(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("long: builds and runs h2spec")
	}
	bin := buildH2Spec(t)
	b := backend(t, "127.1.0.1", named("b1"))
	dir := t.TempDir()
	ca := testpki.NewCA(t, "h2spec CA")
	cert, key := ca.Write(t, dir, "x", testpki.Leaf{DNS: []string{"x"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	s, _, _ := startSturdy(t, parseConfig(t, h2cConfig, map[string]string{"b": addr(b), "cert": cert, "key": key}))

	// Go's own server, the same way: h2c with prior knowledge, and TLS.
	goH2C := httptest.NewUnstartedServer(named("go"))
	goH2C.Config.Protocols = h2cProtocols()
	goH2C.Config.ErrorLog = log.New(io.Discard, "", 0)
	goH2C.Start()
	t.Cleanup(goH2C.Close)
	goTLS := httptest.NewUnstartedServer(named("go"))
	goTLS.EnableHTTP2 = true
	goTLS.Config.ErrorLog = log.New(io.Discard, "", 0)
	goTLS.TLS = &tls.Config{Certificates: []tls.Certificate{ca.TLS(t, testpki.Leaf{DNS: []string{"x"}})}}
	goTLS.StartTLS()
	t.Cleanup(goTLS.Close)

	var wg sync.WaitGroup
	results := map[string]h2specResult{}
	var mu sync.Mutex
	for name, target := range map[string]struct {
		addr string
		tls  bool
	}{
		"sturdy h2c": {s.Addr("h2c"), false}, "sturdy tls": {s.Addr("tls"), true},
		"go h2c": {strings.TrimPrefix(goH2C.URL, "http://"), false}, "go tls": {strings.TrimPrefix(goTLS.URL, "https://"), true},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := runH2Spec(t, bin, target.addr, target.tls)
			mu.Lock()
			results[name] = r
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, mode := range []string{"h2c", "tls"} {
		st, ref := results["sturdy "+mode], results["go "+mode]
		t.Logf("h2spec %s: sturdy passed %d of %d (failed %v); Go's server passed %d of %d (failed %v)",
			mode, st.passed, st.total, st.failedIDs(), ref.passed, ref.total, ref.failedIDs())
		if st.total == 0 {
			t.Errorf("h2spec %s ran no test:\n%s", mode, st.out)
			continue
		}
		for id := range st.failed {
			if !ref.failed[id] {
				t.Errorf("h2spec %s: sturdy fails %s, which Go's own server passes:\n%s", mode, id, st.section(id))
			}
		}
	}
}

func buildH2Spec(t *testing.T) string {
	t.Helper()
	mod, err := filepath.Abs("../../tools/h2spec")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "h2spec")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/summerwind/h2spec/cmd/h2spec")
	cmd.Dir = mod
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("h2spec could not be built from tools/h2spec (Go module proxy unreachable?): %v\n%s", err, out)
	}
	return bin
}

type h2specResult struct {
	total, passed int
	failed        map[string]bool // by section and case number, like "6.9.1/2"
	out           string
}

func (r h2specResult) failedIDs() []string {
	var ids []string
	for id := range r.failed {
		ids = append(ids, id)
	}
	slicesSort(ids)
	return ids
}

// section returns the lines of h2spec's failure report about id.
func (r h2specResult) section(id string) string {
	i := strings.Index(r.out, "Failures:")
	if i < 0 {
		return r.out
	}
	return r.out[i:]
}

var (
	h2specSummary = regexp.MustCompile(`(\d+) tests, (\d+) passed, (\d+) skipped, (\d+) failed`)
	h2specSection = regexp.MustCompile(`^\s*(\d+(?:\.\d+)*)\.?\s`)
	h2specCase    = regexp.MustCompile(`^\s*× (\d+):`)
)

func runH2Spec(t *testing.T, bin, addr string, useTLS bool) h2specResult {
	host, port, _ := net.SplitHostPort(addr)
	args := []string{"-h", host, "-p", port, "-o", "5"}
	if useTLS {
		args = append(args, "-t", "-k")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, _ := exec.CommandContext(ctx, bin, args...).CombinedOutput() // exits 1 when a case fails
	r := h2specResult{failed: map[string]bool{}, out: string(out)}
	if m := h2specSummary.FindStringSubmatch(r.out); m != nil {
		r.total, _ = strconv.Atoi(m[1])
		r.passed, _ = strconv.Atoi(m[2])
	}
	// The failure list after "Failures:" names sections, then "× N: ..."
	// cases under them.
	i := strings.Index(r.out, "Failures:")
	if i < 0 {
		return r
	}
	section := ""
	for _, line := range strings.Split(r.out[i:], "\n") {
		if m := h2specCase.FindStringSubmatch(line); m != nil {
			r.failed[fmt.Sprintf("%s/%s", section, m[1])] = true
		} else if m := h2specSection.FindStringSubmatch(line); m != nil {
			section = m[1]
		}
	}
	return r
}

func slicesSort(s []string) { sort.Strings(s) }
