package cli

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

// STURDY_CPUPROFILE and STURDY_MUTEXPROFILE make sturdy run write a CPU
// and a lock-contention profile of its whole run, finished when it stops.
func TestRunWritesProfiles(t *testing.T) {
	dir := t.TempDir()
	prof, mutex := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "mutex.pprof")
	t.Setenv(profileEnv, prof)
	t.Setenv(mutexProfileEnv, mutex)
	web, admin := freeAddr(t), freeAddr(t)
	cfg := filepath.Join(dir, "sturdy.yaml")
	os.WriteFile(cfg, []byte(strings.NewReplacer("{{web}}", web, "{{admin}}", admin, "{{b}}", backendAt(t, "127.0.0.1", "b")).Replace(`
admin: { listen: "{{admin}}" }
listeners: [ { name: web, listen: "{{web}}" } ]
routes: [ { name: site, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: "{{b}}" } ] } ]
`)), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var out, errb testutil.SyncBuffer
	go func() { done <- Run(ctx, []string{"run", "-c", cfg}, &out, &errb) }()
	up := testutil.Eventually(10*time.Second, func() bool {
		resp, err := http.Get("http://" + web + "/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	cancel()
	if code := <-done; code != 0 || !up {
		t.Fatalf("answered: %v, exit %d; stderr:\n%s", up, code, errb.String())
	}
	for _, p := range []string{prof, mutex} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		// A finished profile is a gzip stream (pprof's format).
		if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) || len(b) < 64 {
			t.Fatalf("%s is %d bytes, not a finished pprof file: % x", filepath.Base(p), len(b), b[:min(len(b), 8)])
		}
	}
}
