package server

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/testing/fake"
)

const hygieneConfig = `
admin: { listen: "off" }
edge: { non_ascii: {{mode}}, deny: [ 127.0.0.66 ], deny_file: "{{denyfile}}" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: search, default: true, pool: node } ]
pools:
  - name: node
    hosts: [ { addr: "{{n1}}" }, { addr: "{{n2}}" } ]
`

// rawStatus sends a raw request line (and headers) and returns the status.
func rawStatus(t *testing.T, from, addr, request string) int {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(request)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _ := c.Read(buf)
	var status int
	fmt.Sscanf(string(buf[:n]), "HTTP/1.1 %d", &status)
	return status
}

// Incident 003 at the edge: raw non-ASCII bytes are re-encoded (or
// refused), never forwarded raw; nothing decided at the edge touches
// backend health; denied clients never reach a backend.
func TestEdgeHygieneAndDenyList(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"reencode", "reject"} {
		t.Run(mode, func(t *testing.T) {
			n1, _ := fake.NewNodeLike("127.1.0.1", "")
			n2, _ := fake.NewNodeLike("127.1.0.2", "")
			t.Cleanup(n1.Close)
			t.Cleanup(n2.Close)
			denyFile := filepath.Join(t.TempDir(), "deny.txt")
			os.WriteFile(denyFile, []byte("# scanners\n198.51.100.0/24\n"), 0o644)
			vars := map[string]string{"n1": n1.Addr, "n2": n2.Addr, "mode": mode, "denyfile": denyFile}
			s, url, _ := startSturdy(t, parseConfig(t, hygieneConfig, vars))
			addr := strings.TrimPrefix(url, "http://")

			want := 200
			if mode == "reject" {
				want = 400
			}
			for i, target := range []string{"/search?q=\xe4\xbd\xa0\xe5\xa5\xbd", "/caf\xc3\xa9", "/s?q=\xff\xfe"} {
				if got, err := fake.RawGet("127.0.0.9", addr, "shop.example", target, 5*time.Second); err != nil || got != want {
					t.Errorf("target %d: %d %v, want %d", i, got, err, want)
				}
			}
			for _, target := range []string{"/a%2Fb", "/bad%zz", "/x%00"} {
				if got, _ := fake.RawGet("127.0.0.9", addr, "shop.example", target, 5*time.Second); got != 400 {
					t.Errorf("%q: %d, want 400", target, got)
				}
			}
			if n1.Dropped.Load()+n2.Dropped.Load() != 0 {
				t.Errorf("a malformed request reached a backend raw")
			}
			// Header values with control characters, and oversize headers,
			// are refused by the server before any route is chosen.
			if got := rawStatus(t, "127.0.0.9", addr, "GET / HTTP/1.1\r\nHost: x\r\nX-Bad: a\x01b\r\n\r\n"); got != 400 {
				t.Errorf("control char in header value: %d", got)
			}
			big := strings.Repeat("a", 70<<10)
			if got := rawStatus(t, "127.0.0.9", addr, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: "+big+"\r\n\r\n"); got != 431 {
				t.Errorf("oversize header: %d", got)
			}
			// Deny list: inline and file, at the edge, no upstream attempt.
			before := n1.Served.Load() + n2.Served.Load()
			for _, ip := range []string{"127.0.0.66"} {
				if got, _ := fake.RawGet(ip, addr, "x", "/", 5*time.Second); got != 403 {
					t.Errorf("denied %s: %d", ip, got)
				}
			}
			if n1.Served.Load()+n2.Served.Load() != before {
				t.Error("a denied request reached a backend")
			}
			// Reload with a changed deny file: now 127.0.0.9 is denied too.
			os.WriteFile(denyFile, []byte("127.0.0.9\n"), 0o644)
			if err := s.Reload(parseConfig(t, hygieneConfig, vars)); err != nil {
				t.Fatal(err)
			}
			if got, _ := fake.RawGet("127.0.0.9", addr, "x", "/", 5*time.Second); got != 403 {
				t.Errorf("after reload: %d, want 403", got)
			}
			for _, p := range s.Runtime().Pools {
				for _, h := range p.Hosts {
					if h.Mode() != health.Healthy || h.Window(time.Now()).Failures != 0 {
						t.Errorf("edge decisions touched host %s: %s", h.Addr, h.Mode())
					}
				}
			}
		})
	}
}
