package access

import (
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// What a route's controls cost per request, in the proxy's call:
//
//	go test -run '^$' -bench Admit -benchmem ./internal/access
//
// none: a route without controls (a nil Policy: the proxy's nil check).
// rate: one client_ip rate limit. local: allow list, methods, rate limit,
// conn limit and basic auth with a cached credential (everything but
// forward auth, which is a network round trip).
func BenchmarkAdmit(b *testing.B) {
	dir := b.TempDir()
	os.WriteFile(filepath.Join(dir, "htpasswd"), []byte("alice:$2y$05$6KfVJl2.i/7wZw8Ey8a59Oy8H2RU4aPVlb2pMcT5j3dpbwkEFKYp.\n"), 0o600)
	cfg, err := config.Parse([]byte(yamlBase+`
rate_limit_zones: [ { name: z, rate: 1000r/s }, { name: z2, rate: 1000r/s } ]
conn_limit_zones: [ { name: c } ]
routes:
  - { name: none, default: true, pool: web }
  - { name: rate, path: /rate/, pool: web, rate_limit: [ { zone: z, burst: 100, nodelay: true } ] }
  - name: local
    path: /local/
    pool: web
    access: [ { allow: 10.0.0.0/8 }, { deny: all } ]
    methods: [GET, POST]
    rate_limit: [ { zone: z2, burst: 100, nodelay: true } ]
    conn_limit: [ { zone: c, max: 100 } ]
    basic_auth: { htpasswd: `+dir+`/htpasswd }
`), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	c, err := Compile(cfg, Options{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	cl := Client{IP: netip.MustParseAddr("10.1.2.3"), Key: "10.1.2.3", Proto: "http"}
	for i, name := range []string{"none", "rate", "local"} {
		// The clock outlives each run: a sub-benchmark may run several
		// times on the same buckets.
		now := time.Now()
		b.Run(name, func(b *testing.B) {
			p := c.Route(i)
			r, _ := http.NewRequest("GET", "http://example.com/"+name+"/x", nil)
			r.SetBasicAuth("alice", "wonder land")
			w := &recorder{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				if p == nil {
					continue
				}
				now = now.Add(time.Millisecond) // one request per slot: always passes
				adm, _, ok := p.Admit(w, r, cl, now)
				if !ok {
					b.Fatalf("refused: %d", w.status)
				}
				adm.Done()
			}
		})
	}
}
