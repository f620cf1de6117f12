package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/outcome"
	"github.com/sturdyproxy/sturdy/internal/testing/testpki"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
	"google.golang.org/grpc"
	testpb "google.golang.org/grpc/interop/grpc_testing"
)

// refusedConfig has a pool of every kind sturdy speaks to (HTTP/1.1, h2c,
// HTTP/2 over TLS, gRPC) and a resource of every kind a compile creates
// or carries over: a cached route, local and Redis-backed rate-limit
// zones, an active health check, a TLS listener's certificate and the
// access log file.
const refusedConfig = `
admin: { listen: "off" }
log: { access: { enabled: true, path: "{{log}}" } }
shared_limits: { redis: "{{redis}}", timeout: 1s }
rate_limit_zones:
  - { name: local, rate: 100000r/s }
  - { name: shared, rate: 100000r/s, shared: true }
listeners:
  - { name: web, listen: "127.0.0.1:0", h2c: true }
  - { name: secure, listen: "127.0.0.1:0", tls: { cert: "{{cert}}", key: "{{key}}" } }
routes:
  - name: h1
    hosts: [h1.test]
    pool: h1
    cache: { enabled: true }
    rate_limit: [ { zone: local, burst: 1000, nodelay: true }, { zone: shared, burst: 1000, nodelay: true } ]
  - { name: h2c, hosts: [h2c.test], pool: h2c }
  - { name: h2tls, hosts: [h2tls.test], pool: h2tls }
  - { name: grpc, default: true, pool: grpc }
pools:
  - name: h1
    hosts: [ { addr: "{{h1}}" } ]
    health: { active: { path: /healthz, interval: 100ms, fast_interval: 100ms, timeout: 90ms, jitter: 1ms, rise: 1, fall: 5 } }
  - { name: h2c, protocol: h2c, hosts: [ { addr: "{{h2c}}" } ] }
  - { name: h2tls, protocol: h2, hosts: [ { addr: "{{h2tls}}" } ], tls: { ca: "{{ca}}", server_name: example.com } }
  - { name: grpc, protocol: h2c, hosts: [ { addr: "{{grpc}}" } ] }
`

// A refused reload changes nothing of the running process: for every step
// of a reload that can refuse, the reload is refused, and then every pool
// of the running config answers every request (0 failures, none charged
// to a host), and the running config's shared resources (rate-limit
// tables and their Redis client, health monitor, cache, access log,
// certificates, sockets) go on as before.
func TestRefusedReloadChangesNothing(t *testing.T) {
	redis := startRedisServer(t)
	dir := t.TempDir()
	f := newRefusedFixture(t, dir, redis)

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { taken.Close() })
	takenUDP, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { takenUDP.Close() })
	garbage := filepath.Join(dir, "garbage.pem")
	os.WriteFile(garbage, []byte("not a certificate\n"), 0o600)
	key := f.key
	freeUDP := freeUDPAddr(t)

	unbindable := func(c *config.Config) {
		c.Listeners = append(c.Listeners, config.Listener{Name: "taken", Listen: taken.Addr().String()})
	}
	cases := []struct {
		name   string
		change func(c *config.Config)
		want   string // in the reload's error
	}{
		{"a listener cannot bind", unbindable, "cannot listen"},
		{"an HTTP/3 port cannot bind", func(c *config.Config) {
			l := c.Listeners[1]
			l.Name, l.Listen, l.HTTP3 = "h3", "127.0.0.1:0", &config.HTTP3{Listen: takenUDP.LocalAddr().String()}
			c.Listeners = append(c.Listeners, l)
		}, "cannot listen for HTTP/3"},
		{"a listener with HTTP/3 binds, a later one cannot", func(c *config.Config) {
			l := c.Listeners[1]
			l.Name, l.Listen, l.HTTP3 = "h3", "127.0.0.1:0", &config.HTTP3{Listen: freeUDP}
			c.Listeners = append(c.Listeners, l)
			unbindable(c)
		}, "cannot listen"},
		{"a certificate cannot load", func(c *config.Config) {
			c.Listeners[1].TLS.Cert = garbage
		}, "listeners[1].tls"},
		{"a certificate file is missing", func(c *config.Config) {
			c.Listeners[1].TLS.Cert, c.Listeners[1].TLS.Key = filepath.Join(dir, "missing.pem"), key
		}, "listeners[1].tls"},
		{"an upstream CA bundle cannot load", func(c *config.Config) {
			c.Pools[2].TLS.CA = garbage
		}, "pools[2].tls"},
		{"a new pool's hosts over TLS, then a listener cannot bind", func(c *config.Config) {
			p := c.Pools[2]
			p.Name, p.MaxConnsPerHost = "h2tls2", 3
			c.Pools = append(c.Pools, p)
			unbindable(c)
		}, "cannot listen"},
		{"changed upstream timeouts (new clients), then a listener cannot bind", func(c *config.Config) {
			for i := range c.Routes {
				c.Routes[i].Timeouts.ResponseHeader = config.Duration(7 * time.Second)
			}
			unbindable(c)
		}, "cannot listen"},
		{"the deny list cannot be read", func(c *config.Config) {
			c.Edge.DenyFile = filepath.Join(dir, "missing.deny")
		}, "edge.deny_file"},
		{"an htpasswd file cannot be read", func(c *config.Config) {
			c.Routes[0].BasicAuth = &config.BasicAuth{Htpasswd: filepath.Join(dir, "missing.htpasswd")}
		}, "basic_auth"},
		{"the shared limits move to a Redis that is down, then a listener cannot bind", func(c *config.Config) {
			c.SharedLimits.Redis = deadAddr(t)
			unbindable(c)
		}, "cannot listen"},
		{"a pool host name does not resolve, then a listener cannot bind", func(c *config.Config) {
			c.Pools[0].Hosts = append(c.Pools[0].Hosts, config.Host{Addr: "nowhere.invalid:80"})
			unbindable(c)
		}, "cannot listen"},
	}
	f.check(t, "before any reload")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := f.s.Runtime()
			next := f.config(t)
			tc.change(next)
			err := f.s.Reload(next)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("reload error = %v, want one with %q", err, tc.want)
			}
			// Checked at once: a leaked socket is closed by its finalizer
			// some time later.
			if pc, err := net.ListenPacket("udp", freeUDP); err != nil {
				t.Errorf("the refused reload left udp %s bound: %v", freeUDP, err)
			} else {
				pc.Close()
			}
			if f.s.Runtime() != before {
				t.Fatal("the refused reload replaced the running runtime")
			}
			f.check(t, "after the refused reload")
		})
	}
	// The sockets a refused reload bound are released: a reload that
	// binds the same HTTP/3 port now succeeds, and everything still works.
	next := f.config(t)
	l := next.Listeners[1]
	l.Name, l.Listen, l.HTTP3 = "h3", "127.0.0.1:0", &config.HTTP3{Listen: freeUDP}
	next.Listeners = append(next.Listeners, l)
	if err := f.s.Reload(next); err != nil {
		t.Fatalf("a reload on the port a refused reload had bound: %v", err)
	}
	f.check(t, "after a reload that applied")
}

// refusedFixture is a running sturdy with a pool of each kind and what the
// test watches of its shared resources.
type refusedFixture struct {
	s                *Server
	yaml             map[string]string
	cert, key, log   string
	roots            *x509.CertPool
	probes           *atomic.Int64
	served           int64 // requests sent through sturdy so far
	grpc             testpb.TestServiceClient
	certSerial       string
	client, tlsCheck *http.Client
}

func newRefusedFixture(t *testing.T, dir, redis string) *refusedFixture {
	f := &refusedFixture{probes: new(atomic.Int64)}
	h1 := backend(t, "127.1.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			f.probes.Add(1)
			return
		}
		w.Header().Set("Cache-Control", "max-age=600")
		io.WriteString(w, "h1 "+r.URL.Path)
	}))
	h2c, _ := h2cBackend(t, "127.1.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "h2c "+r.Proto)
	}))
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "h2tls "+r.Proto)
	}))
	tlsSrv.EnableHTTP2 = true
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	ca := filepath.Join(dir, "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw}), 0o600)
	g, _ := grpcBackend(t, "127.1.0.4", "g")

	pki := testpki.NewCA(t, "refused reload CA")
	f.cert, f.key = pki.Write(t, dir, "listener", testpki.Leaf{DNS: []string{"secure.test"}})
	f.roots = pki.Pool()
	f.log = filepath.Join(dir, "access.log")
	f.yaml = map[string]string{
		"log": f.log, "redis": redis, "cert": f.cert, "key": f.key, "ca": ca,
		"h1": addr(h1), "h2c": h2c, "h2tls": strings.TrimPrefix(tlsSrv.URL, "https://"), "grpc": g,
	}
	s, _, _ := startSturdy(t, f.config(t))
	f.s = s
	f.client = clientFrom("127.3.0.1")
	f.tlsCheck = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: f.roots, ServerName: "secure.test"},
	}}
	f.grpc = testpb.NewTestServiceClient(grpcConn(t, s.Addr("web")))
	if !testutil.Eventually(5*time.Second, func() bool { return s.Runtime().Pool("h1").Hosts[0].LastCheck().OK }) {
		t.Fatal("the h1 pool's active check never passed")
	}
	if !testutil.Eventually(5*time.Second, func() bool { return s.Runtime().Access.Shared.Up() }) {
		t.Fatal("the shared rate-limit store never came up")
	}
	return f
}

func (f *refusedFixture) config(t *testing.T) *config.Config {
	return parseConfig(t, refusedConfig, f.yaml)
}

// check sends requests to every pool and checks every shared resource.
func (f *refusedFixture) check(t *testing.T, when string) {
	t.Helper()
	const n = 20
	web := "http://" + f.s.Addr("web")
	var failures []string
	for i := range n {
		for _, p := range []struct{ host, want string }{
			{"h1.test", "h1 /h1/" + strconv.Itoa(i)},
			{"h2c.test", "h2c HTTP/2.0"},
			{"h2tls.test", "h2tls HTTP/2.0"},
		} {
			path := "/" + strings.TrimSuffix(p.host, ".test") + "/" + strconv.Itoa(i)
			req, _ := http.NewRequest("GET", web+path, nil)
			req.Host = p.host
			resp, err := f.client.Do(req)
			if err != nil {
				failures = append(failures, fmt.Sprintf("%s: %v", p.host, err))
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != p.want {
				failures = append(failures, fmt.Sprintf("%s: %d %q", p.host, resp.StatusCode, b))
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		out, err := f.grpc.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("x")}}, grpc.WaitForReady(true))
		cancel()
		if err != nil || string(out.GetPayload().GetBody()) != "x" {
			failures = append(failures, fmt.Sprintf("grpc: %v", err))
		}
	}
	f.served += 4 * n
	if len(failures) > 0 {
		t.Fatalf("%s: %d of %d requests failed, first: %s", when, len(failures), 4*n, failures[0])
	}
	rt := f.s.Runtime()
	for _, p := range rt.Pools {
		for _, h := range p.Hosts {
			for _, c := range outcome.All() {
				if c != outcome.OK && h.Attempts(c) > 0 {
					t.Errorf("%s: pool %s host %s charged %d %s", when, p.Name, h.Addr, h.Attempts(c), c)
				}
			}
		}
	}
	// The cache still holds what it held: the route's first answer is a hit.
	req, _ := http.NewRequest("GET", web+"/h1/0", nil)
	req.Host = "h1.test"
	if resp, err := f.client.Do(req); err != nil {
		t.Errorf("%s: cached request: %v", when, err)
	} else {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if cs := resp.Header.Get("Cache-Status"); when != "before any reload" && !strings.Contains(cs, "hit") {
			t.Errorf("%s: Cache-Status %q, want a hit", when, cs)
		}
	}
	f.served++
	// The shared zone still decides in Redis, the local one still counts.
	stats, _ := rt.Access.Rate.Stats()
	for _, st := range stats {
		if st.Fallback > 0 {
			t.Errorf("%s: zone %s decided %d requests locally: the Redis client was closed", when, st.Zone, st.Fallback)
		}
	}
	if !rt.Access.Shared.Up() {
		t.Errorf("%s: the shared rate-limit store is down", when)
	}
	// The health monitor still probes.
	p0 := f.probes.Load()
	if !testutil.Eventually(3*time.Second, func() bool { return f.probes.Load() >= p0+2 }) {
		t.Errorf("%s: the active check stopped probing", when)
	}
	// The TLS listener still serves its certificate.
	resp, err := f.tlsCheck.Get("https://" + f.s.Addr("secure") + "/h1/0")
	if err != nil {
		t.Errorf("%s: TLS listener: %v", when, err)
	} else {
		resp.Body.Close()
		serial := resp.TLS.PeerCertificates[0].SerialNumber.String()
		if f.certSerial == "" {
			f.certSerial = serial
		} else if serial != f.certSerial {
			t.Errorf("%s: the TLS listener serves certificate %s, want %s", when, serial, f.certSerial)
		}
	}
	f.tlsCheck.CloseIdleConnections()
	f.served++
	// The access log still has a line for each request.
	if !testutil.Eventually(3*time.Second, func() bool {
		b, _ := os.ReadFile(f.log)
		return int64(bytes.Count(b, []byte("\n"))) >= f.served
	}) {
		b, _ := os.ReadFile(f.log)
		t.Errorf("%s: the access log has %d lines for %d requests", when, bytes.Count(b, []byte("\n")), f.served)
	}
}

// startRedisServer runs Debian's redis-server on a free loopback port
// without persistence until the test ends; it skips the test when the
// binary is missing.
func startRedisServer(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed (apt-get install -y redis-server)")
	}
	a := deadAddr(t)
	_, port, _ := net.SplitHostPort(a)
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if !testutil.Eventually(10*time.Second, func() bool {
		c, err := net.Dial("tcp", a)
		if err != nil {
			return false
		}
		defer c.Close()
		c.Write([]byte("PING\r\n"))
		buf := make([]byte, 7)
		c.SetReadDeadline(time.Now().Add(time.Second))
		n, _ := io.ReadFull(c, buf)
		return string(buf[:n]) == "+PONG\r\n"
	}) {
		t.Fatalf("redis-server on %s did not answer PING", a)
	}
	return a
}

// freeUDPAddr returns a loopback UDP address nothing is bound to.
func freeUDPAddr(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := pc.LocalAddr().String()
	pc.Close()
	return a
}
