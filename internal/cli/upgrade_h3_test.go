package cli

import (
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"

	"github.com/sturdyproxy/sturdy/internal/testing/testpki"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
	"github.com/sturdyproxy/sturdy/internal/view"
)

const upgradeH3Config = `
admin: { listen: "{{admin}}" }
pid_file: "{{pidfile}}"
shutdown_grace: 5s
listeners:
  - { name: web, listen: "{{web}}", tls: { cert: "{{cert}}", key: "{{key}}" }, http3: {} }
routes: [ { name: site, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: "{{b1}}" } ] } ]
`

// A binary upgrade of a config with http3 hands the UDP socket over with
// the TCP ones (the new process used to bind the port itself and fail),
// under HTTP/3 load; the new process serves HTTP/3 on the same port.
func TestBinaryUpgradeUnderHTTP3Load(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the sturdy binary twice; -short skips it")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "sturdy")
	buildSturdy(t, bin, "v1")
	ca := testpki.NewCA(t, "upgrade h3 CA")
	cert, key := ca.Write(t, dir, "x", testpki.Leaf{DNS: []string{"x"}})
	vars := map[string]string{
		"admin": freeAddr(t), "web": freeAddr(t), "pidfile": filepath.Join(dir, "sturdy.pid"),
		"cert": cert, "key": key, "b1": backendAt(t, "127.1.0.1", "b1"),
	}
	cfg := filepath.Join(dir, "sturdy.yaml")
	writeConfig(t, cfg, upgradeH3Config, vars)
	p := startProcess(t, bin, cfg)
	admin, web := vars["admin"], vars["web"]
	if !testutil.Eventually(10*time.Second, func() bool { st, err := status(admin); return err == nil && st.Version == "v1" }) {
		t.Fatal("v1 never answered")
	}
	tc := &tls.Config{RootCAs: ca.Pool(), ServerName: "x"}
	var sent, failed atomic.Int64
	var after2 atomic.Int64 // answered once v2 served
	var upgraded atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			tr := &http3.Transport{TLSClientConfig: tc.Clone()}
			defer tr.Close()
			client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if c%2 == 1 && i > 0 {
					// A new QUIC connection for every request.
					tr.Close()
					tr = &http3.Transport{TLSClientConfig: tc.Clone()}
					client.Transport = tr
				}
				sent.Add(1)
				resp, err := client.Get("https://" + web + "/")
				if err != nil {
					failed.Add(1)
					t.Logf("request failed: %v", err)
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(body) != "b1" || resp.ProtoMajor != 3 {
					failed.Add(1)
					t.Logf("answer %s %d %q", resp.Proto, resp.StatusCode, body)
				} else if upgraded.Load() {
					after2.Add(1)
				}
				// real: bounds the load's rate against two sturdy
				// processes of their own, on shared cores.
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	if !testutil.Eventually(10*time.Second, func() bool { return sent.Load() >= 20 }) {
		t.Fatalf("the load sent %d requests in 10s", sent.Load())
	}
	buildSturdy(t, bin+".new", "v2")
	if err := os.Rename(bin+".new", bin); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGUSR2)
	var st view.Status
	if !testutil.Eventually(20*time.Second, func() bool {
		var err error
		st, err = status(admin)
		return err == nil && st.Version == "v2"
	}) {
		b, _ := os.ReadFile(p.logs.Name())
		t.Fatalf("v2 never took over:\n%s", b)
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Error("the old process is still running")
	}
	upgraded.Store(true)
	if !testutil.Eventually(5*time.Second, func() bool { return after2.Load() >= 20 }) {
		t.Errorf("only %d HTTP/3 answers after the old process exited", after2.Load())
	}
	close(stop)
	wg.Wait()
	t.Logf("binary upgrade under HTTP/3 load: %d requests, %d failed, %d answered by v2 alone", sent.Load(), failed.Load(), after2.Load())
	if failed.Load() != 0 {
		t.Errorf("%d of %d HTTP/3 requests failed across the upgrade", failed.Load(), sent.Load())
	}
	pid, _ := os.ReadFile(vars["pidfile"])
	t.Cleanup(func() {
		var n int
		for _, c := range pid {
			if c >= '0' && c <= '9' {
				n = n*10 + int(c-'0')
			}
		}
		if n > 0 && n != p.cmd.Process.Pid {
			syscall.Kill(n, syscall.SIGTERM)
		}
	})
}
