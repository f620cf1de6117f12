package server

import (
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/outcome"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
	"golang.org/x/net/http2"
)

// h2cBackend is an HTTP/2-only (prior knowledge) backend on ip that
// counts the connections it accepted.
func h2cBackend(t testing.TB, ip string, h http.Handler) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	conns := new(atomic.Int32)
	srv := &http.Server{Handler: h, Protocols: h2cOnly(), ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), conns
}

// goawayBackend speaks HTTP/2 with prior knowledge and answers every
// request with GOAWAY, last stream 0: the request was never started.
func goawayBackend(t testing.TB, ip string) string {
	t.Helper()
	return rawBackend(t, ip, func(c net.Conn) {
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c, make([]byte, len(http2.ClientPreface))); err != nil {
			return
		}
		fr := http2.NewFramer(c, c)
		fr.WriteSettings()
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					fr.WriteSettingsAck()
				}
			case *http2.HeadersFrame:
				fr.WriteGoAway(0, http2.ErrCodeNo, []byte("shutting down"))
			}
		}
	})
}

const h2TLSPoolConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: site, default: true, pool: secure } ]
pools:
  - name: secure
    protocol: h2
    hosts: [ { addr: "{{b}}" } ]
    tls: { ca: "{{ca}}", server_name: example.com }
    health: { active: { path: /healthz, interval: 300ms, fast_interval: 100ms, timeout: 250ms, jitter: 1ms, rise: 1 } }
`

// protocol h2: HTTP/2 over TLS chosen by ALPN, for requests and probes;
// the backend's trailers reach an HTTP/1.1 client's chunked answer.
func TestH2PoolOverTLS(t *testing.T) {
	t.Parallel()
	var probes atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			if r.ProtoMajor == 2 {
				probes.Add(1)
			}
			return
		}
		w.Header().Set("Trailer", "X-Checksum")
		io.WriteString(w, r.Proto+" "+r.URL.Path)
		w.Header().Set("X-Checksum", "c0ffee")
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)

	s, url, _ := startSturdy(t, parseConfig(t, h2TLSPoolConfig, map[string]string{"b": strings.TrimPrefix(srv.URL, "https://"), "ca": ca}))
	resp, body := get(t, http.DefaultClient, url+"/x")
	if resp.StatusCode != 200 || body != "HTTP/2.0 /x" {
		t.Fatalf("%d %q; want the backend to see HTTP/2.0", resp.StatusCode, body)
	}
	if v := resp.Trailer.Get("X-Checksum"); v != "c0ffee" {
		t.Errorf("trailer %q, want c0ffee", v)
	}
	h := s.Runtime().Pool("secure").Hosts[0]
	if !testutil.Eventually(3*time.Second, func() bool { return probes.Load() > 0 && h.LastCheck().OK }) {
		t.Errorf("no passing probe over HTTP/2: %+v", h.LastCheck())
	}
}

const h2GoawayConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: site, default: true, pool: svc, retry: { tries: 3 } } ]
pools:
  - name: svc
    protocol: h2c
    hosts: [ { addr: "{{goaway}}" }, { addr: "{{dead}}" }, { addr: "{{good}}" } ]
    health: { passive: { window: 10s, min_requests: 1000 } }
`

// A stream above a GOAWAY's last stream ID was never started: it counts
// as nothing sent, so even a POST is sent again to another host, and the
// host is charged stream_refused, not a failure of a request it handled.
// A refused connection to an h2c host is connect_refused, as for HTTP/1.1.
func TestH2PoolGoawayRetried(t *testing.T) {
	t.Parallel()
	good, _ := h2cBackend(t, "127.1.1.3", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "good "+r.Method+" "+r.Proto)
	}))
	s, url, _ := startSturdy(t, parseConfig(t, h2GoawayConfig, map[string]string{
		"goaway": goawayBackend(t, "127.1.1.1"), "dead": deadAddr(t), "good": good,
	}))
	for _, method := range []string{"GET", "POST", "GET", "POST", "DELETE", "GET"} {
		req, _ := http.NewRequest(method, url+"/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "good "+method+" HTTP/2.0" {
			t.Errorf("%s: %d %q; want the good host's answer", method, resp.StatusCode, b)
		}
	}
	hosts := s.Runtime().Pool("svc").Hosts
	if n := hosts[0].Attempts(outcome.StreamRefused); n == 0 {
		t.Error("the GOAWAY host was never charged stream_refused")
	}
	if n := hosts[1].Attempts(outcome.ConnectRefused); n == 0 {
		t.Error("the dead host was never charged connect_refused")
	}
	for _, c := range []outcome.Class{outcome.EOFBeforeResponse, outcome.Reset, outcome.Status5xx, outcome.BadResponse} {
		if n := hosts[0].Attempts(c); n != 0 {
			t.Errorf("the GOAWAY host was charged %d %s", n, c)
		}
	}
	if n := hosts[2].Attempts(outcome.OK); n != 6 {
		t.Errorf("the good host answered %d, want 6", n)
	}
}

const h2LimitConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: site, default: true, pool: svc } ]
pools:
  - name: svc
    protocol: h2c
    max_conns_per_host: 1
    max_streams_per_conn: 2
    hosts: [ { addr: "{{b}}" } ]
`

// One connection of two streams per host: two slow requests share one
// connection, a third finds the host at its cap and is shed with 503,
// and the host never sees a second connection.
func TestH2PoolBoundedStreams(t *testing.T) {
	t.Parallel()
	var inFlight atomic.Int32
	release := make(chan struct{})
	b, conns := h2cBackend(t, "127.1.1.4", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight.Add(1)
		defer inFlight.Add(-1)
		if r.URL.Path == "/slow" {
			<-release
		}
		io.WriteString(w, "ok")
	}))
	s, url, _ := startSturdy(t, parseConfig(t, h2LimitConfig, map[string]string{"b": b}))
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			resp, body := get(t, http.DefaultClient, url+"/slow")
			if resp.StatusCode != 200 || body != "ok" {
				t.Errorf("slow: %d %q", resp.StatusCode, body)
			}
		})
	}
	if !testutil.Eventually(5*time.Second, func() bool { return inFlight.Load() == 2 }) {
		t.Fatalf("%d requests reached the backend, want 2", inFlight.Load())
	}
	resp, body := get(t, http.DefaultClient, url+"/third")
	if resp.StatusCode != 503 || !strings.Contains(body, "connection limit") {
		t.Errorf("a third request with both streams taken: %d %q; want 503 at the connection limit", resp.StatusCode, body)
	}
	close(release)
	wg.Wait()
	if resp, body := get(t, http.DefaultClient, url+"/after"); resp.StatusCode != 200 || body != "ok" {
		t.Errorf("after the slow ones: %d %q", resp.StatusCode, body)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("the backend saw %d connections, want 1", n)
	}
	if m := s.Runtime().Pool("svc").Hosts[0].Mode(); m != health.Healthy {
		t.Errorf("the host is %s after being full, want healthy: being full is no failure", m)
	}
}
