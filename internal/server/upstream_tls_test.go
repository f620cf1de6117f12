package server

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/outcome"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

const tlsPoolConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: site, default: true, pool: secure } ]
pools:
  - name: secure
    hosts: [ { addr: "{{b}}" } ]
    tls: { ca: "{{ca}}", server_name: "{{name}}" }
    health: { active: { path: /healthz, interval: 2s, fast_interval: 200ms, timeout: 1s, jitter: 0s } }
`

// HTTPS backends: certificates are verified against the configured CA and
// name; a mismatch is a tls_error (nothing was sent), never a 502 with the
// request half-sent.
func TestHTTPSBackend(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("secure " + r.URL.Path + " tls=" + map[bool]string{true: "yes", false: "no"}[r.TLS != nil]))
	}))
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)
	b := strings.TrimPrefix(srv.URL, "https://")

	_, url, _ := startSturdy(t, parseConfig(t, tlsPoolConfig, map[string]string{"b": b, "ca": ca, "name": "example.com"}))
	resp, body := get(t, http.DefaultClient, url+"/x")
	if resp.StatusCode != 200 || body != "secure /x tls=yes" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}

	s, url, _ := startSturdy(t, parseConfig(t, tlsPoolConfig, map[string]string{"b": b, "ca": ca, "name": "wrong.example"}))
	resp, body = get(t, http.DefaultClient, url+"/x")
	if resp.StatusCode != 503 {
		t.Fatalf("certificate name mismatch: %d %q, want the sorry page", resp.StatusCode, body)
	}
	h := s.Runtime().Pool("secure").Hosts[0]
	testutil.Eventually(3*time.Second, func() bool { return h.Attempts(outcome.TLSError) > 0 && !h.LastCheck().Time.IsZero() })
	if h.Attempts(outcome.TLSError) == 0 {
		t.Fatal("no tls_error counted")
	}
	if c := h.LastCheck(); c.OK || !strings.Contains(c.Detail, "certificate") {
		t.Errorf("probe over TLS with the wrong name: %+v", c)
	}
}
