package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/outcome"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

const reloadConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  - { name: site, default: true, pool: web }
  - { name: api, path: {{apipath}}, pool: web }
pools:
  - name: web
    balance: {{balance}}
    hosts: [ { addr: "{{b1}}", weight: {{w}} }, { addr: "{{b2}}" } ]
`

// Reloading while clients send requests fails none of them, and hosts kept
// across the reload keep their runtime state.
func TestReloadUnderLoadDropsNothing(t *testing.T) {
	t.Parallel()
	b1 := backend(t, "127.1.0.1", named("b1"))
	b2 := backend(t, "127.1.0.2", named("b2"))
	vars := func(i int) map[string]string {
		balances := []string{"round_robin", "least_conn", "random_two", "hash"}
		return map[string]string{
			"b1": addr(b1), "b2": addr(b2), "w": fmt.Sprint(1 + i%5),
			"balance": balances[i%len(balances)], "apipath": fmt.Sprintf("/api%d/", i),
		}
	}
	s, url, logs := startSturdy(t, parseConfig(t, reloadConfig, vars(0)))

	const clients, perClient = 8, 150
	var failures atomic.Int64
	done := newProgress()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := clientFrom(fmt.Sprintf("127.0.0.%d", 10+c))
			for i := range perClient {
				resp, err := client.Get(fmt.Sprintf("%s/c%d/%d", url, c, i))
				if err != nil {
					failures.Add(1)
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !strings.HasPrefix(string(body), "b") {
					failures.Add(1)
				}
				done.Add()
			}
		}()
	}
	// A reload after every ten answers, while the load lasts.
	reloads := 0
	for i, n := 1, int64(0); n < clients*perClient && i < 200; i++ {
		if err := s.Reload(parseConfig(t, reloadConfig, vars(i))); err != nil {
			t.Fatal(err)
		}
		reloads++
		n = done.WaitPast(n+9, clients*perClient)
	}
	wg.Wait()
	if f := failures.Load(); f != 0 {
		t.Fatalf("%d of %d requests failed across %d reloads", f, clients*perClient, reloads)
	}
	if reloads < 5 {
		t.Fatalf("only %d reloads happened during the load", reloads)
	}
	// Host state is kept across reloads: the attempt counts add up to every
	// request of the run, not to those since the last reload.
	var attempts uint64
	for _, h := range s.Runtime().Pool("web").Hosts {
		attempts += h.Attempts(outcome.OK)
	}
	if attempts != uint64(clients*perClient) {
		t.Fatalf("hosts count %d successful attempts for %d requests: host state was replaced on reload", attempts, clients*perClient)
	}
	if n := strings.Count(logs.String(), "config reloaded"); n != reloads {
		t.Fatalf("%d reload log lines for %d reloads", n, reloads)
	}
}

func TestReloadWithBadListenerKeepsOldConfig(t *testing.T) {
	t.Parallel()
	b1 := backend(t, "127.1.0.1", named("b1"))
	s, url, _ := startSturdy(t, parseConfig(t, basicConfig, map[string]string{"b1": addr(b1)}))
	taken := strings.TrimPrefix(b1.URL, "http://")
	bad := parseConfig(t, `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" }, { name: other, listen: "`+taken+`" } ]
routes: [ { name: site, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: "`+taken+`" } ] } ]
`, nil)
	if err := s.Reload(bad); err == nil || !strings.Contains(err.Error(), "cannot listen") {
		t.Fatalf("reload error = %v", err)
	}
	if resp, _ := get(t, http.DefaultClient, url+"/"); resp.StatusCode != 200 {
		t.Fatalf("old config stopped serving: %d", resp.StatusCode)
	}
}

func TestGracefulShutdownFinishesInFlight(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	b := backend(t, "127.1.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release // in flight until the test has seen the drain
		io.WriteString(w, "finished")
	}))
	cfg := parseConfig(t, basicConfig, map[string]string{"b1": addr(b)})
	cfg.Admin.Listen = "127.0.0.1:0"
	s, url, _ := startSturdy(t, cfg)
	admin := "http://" + s.AdminAddr()

	type result struct {
		status int
		body   string
		err    error
	}
	res := make(chan result, 1)
	go func() {
		resp, err := http.Get(url + "/slow")
		if err != nil {
			res <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		res <- result{resp.StatusCode, string(b), nil}
	}()
	<-entered
	shutdown := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		shutdown <- s.Shutdown(ctx)
	}()
	// While draining, readiness says so.
	testutil.Eventually(2*time.Second, func() bool { return s.draining.Load() })
	if resp, err := http.Get(admin + "/readyz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != 503 {
			t.Errorf("/readyz during drain: %d", resp.StatusCode)
		}
	}
	select {
	case err := <-shutdown:
		t.Fatalf("shutdown returned (%v) while a request was in flight", err)
	default:
	}
	close(release)
	r := <-res
	if r.err != nil || r.status != 200 || r.body != "finished" {
		t.Fatalf("in-flight request: %+v", r)
	}
	if err := <-shutdown; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if _, err := http.Get(url + "/"); err == nil {
		t.Fatal("listener still accepts after shutdown")
	}
}

// writeCert writes a self-signed certificate for 127.0.0.1 into dir.
func writeCert(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sturdy test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: nil,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	c, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return certFile, keyFile, pool
}

func TestTLSListenerServesHTTP2(t *testing.T) {
	t.Parallel()
	b := backend(t, "127.1.0.1", named("b1"))
	cert, key, roots := writeCert(t, t.TempDir())
	cfg := parseConfig(t, `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0", tls: { cert: "{{cert}}", key: "{{key}}" } } ]
routes: [ { name: site, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: "{{b1}}" } ] } ]
`, map[string]string{"b1": addr(b), "cert": cert, "key": key})
	s, _, _ := startSturdy(t, cfg)
	port := s.Addr("web")[strings.LastIndex(s.Addr("web"), ":"):]
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots, ServerName: "localhost"},
		ForceAttemptHTTP2: true,
	}}
	resp, err := client.Get("https://127.0.0.1" + port + "/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || !strings.HasPrefix(string(body), "b1 GET /x") {
		t.Fatalf("proto %s body %q", resp.Proto, body)
	}
}

// A socket kept under a new name (another listener on the same address)
// serves the new name's routes, not the old name's: the handler routes by
// the listener's name. Found by the Gateway API conformance suite, where
// one Gateway's address goes to the next Gateway.
func TestReloadKeptSocketServesItsNewName(t *testing.T) {
	t.Parallel()
	b1 := backend(t, "127.1.0.1", named("b1"))
	b2 := backend(t, "127.1.0.2", named("b2"))
	const conf = `
admin: { listen: "off" }
listeners: [ { name: {{name}}, listen: "{{addr}}" } ]
routes: [ { name: r, listeners: [{{name}}], pool: p } ]
pools: [ { name: p, hosts: [ { addr: "{{b}}" } ] } ]
`
	at := freeAddr(t)
	s, _, _ := startSturdy(t, parseConfig(t, conf, map[string]string{"name": "old", "addr": at, "b": addr(b1)}))
	if err := s.Reload(parseConfig(t, conf, map[string]string{"name": "new", "addr": at, "b": addr(b2)})); err != nil {
		t.Fatal(err)
	}
	if resp, body := get(t, http.DefaultClient, "http://"+at+"/x"); resp.StatusCode != 200 || !strings.HasPrefix(body, "b2 ") {
		t.Fatalf("after the rename: %d %q; want the new listener's route to b2", resp.StatusCode, body)
	}
}

// A listener the new config renames is retired (its in-flight requests may
// finish) and the new one serves; Shutdown waits for both.
func TestReloadRetiresRenamedListener(t *testing.T) {
	t.Parallel()
	b := backend(t, "127.1.0.1", named("b1"))
	s, url, _ := startSturdy(t, parseConfig(t, basicConfig, map[string]string{"b1": addr(b)}))
	cfg := parseConfig(t, strings.Replace(basicConfig, "name: web, listen", "name: web2, listen", 1), map[string]string{"b1": addr(b)})
	if err := s.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if resp, _ := get(t, http.DefaultClient, "http://"+s.Addr("web2")+"/"); resp.StatusCode != 200 {
		t.Fatalf("new listener: %d", resp.StatusCode)
	}
	gone := testutil.Eventually(5*time.Second, func() bool {
		resp, err := http.Get(url + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err != nil
	})
	if !gone {
		t.Fatal("the renamed listener still serves")
	}
}
