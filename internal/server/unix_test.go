package server

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

// A pool host can be a unix socket, with the whole health model: requests
// and readiness probes go over the socket, and a socket that stops
// answering takes the host out.
func TestUnixSocketUpstream(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "app.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			return
		}
		io.WriteString(w, "app over a socket "+r.URL.Path)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	s, url, _ := startSturdy(t, parseConfig(t, `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: site, default: true, pool: app } ]
pools:
  - name: app
    hosts: [ { addr: "unix:{{sock}}" } ]
    health: { active: { path: /healthz, interval: 200ms, timeout: 100ms, fall: 1, jitter: 0s } }
`, map[string]string{"sock": path}))
	if resp, body := get(t, http.DefaultClient, url+"/orders"); resp.StatusCode != 200 || body != "app over a socket /orders" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	h := s.Runtime().Pool("app").Hosts[0]
	if !testutil.Eventually(3*time.Second, func() bool { return h.LastCheck().OK }) {
		t.Fatalf("no passing probe over the socket: %+v", h.LastCheck())
	}
	srv.Close()
	if !testutil.Eventually(3*time.Second, func() bool { return h.Mode() == health.Down }) {
		t.Fatalf("host %s after its socket closed; last check %+v", h.Mode(), h.LastCheck())
	}
	if resp, _ := get(t, http.DefaultClient, url+"/orders"); resp.StatusCode != 503 {
		t.Errorf("with the socket gone: %d, want the sorry page", resp.StatusCode)
	}
	if st := s.Status(); st.Pools[0].Hosts[0].Addr != "unix:"+path {
		t.Errorf("status shows the host as %q", st.Pools[0].Hosts[0].Addr)
	}
}
