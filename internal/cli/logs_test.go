package cli

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

const jsonLogConfig = `
admin: { listen: "{{admin}}" }
log: { format: json }
shared_limits: { redis: "{{redis}}" }
rate_limit_zones: [ { name: shared, rate: 1000r/s, shared: true } ]
listeners: [ { name: web, listen: "{{web}}" } ]
routes: [ { name: site, default: true, pool: web, rate_limit: [ { zone: shared, burst: 100, nodelay: true } ] } ]
pools: [ { name: web, hosts: [ { addr: "{{b1}}" } ] } ]
`

// With log.format json every line sturdy writes is a JSON record, the
// lines of the libraries it links included: go-redis's about a Redis that
// is down among them.
func TestJSONLogHasOnlyJSONLines(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the sturdy binary; -short skips it")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "sturdy")
	buildSturdy(t, bin, "v-json")
	admin, web := freeAddr(t), freeAddr(t)
	cfg := filepath.Join(dir, "sturdy.yaml")
	writeConfig(t, cfg, jsonLogConfig, map[string]string{"admin": admin, "web": web, "redis": freeAddr(t), "b1": backendAt(t, "127.1.0.1", "b1")})
	p := startProcess(t, bin, cfg)
	if !testutil.Eventually(10*time.Second, func() bool { _, err := status(admin); return err == nil }) {
		t.Fatal("sturdy did not start")
	}
	for range 5 {
		resp, err := http.Get("http://" + web + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	var lines []string
	if !testutil.Eventually(5*time.Second, func() bool {
		b, _ := os.ReadFile(p.logs.Name())
		lines = strings.Split(strings.TrimSpace(string(b)), "\n")
		return strings.Contains(string(b), "go-redis")
	}) {
		t.Fatalf("no line of go-redis in the log:\n%s", strings.Join(lines, "\n"))
	}
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Errorf("not a JSON record: %q", l)
		}
	}
}
