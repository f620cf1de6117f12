package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

const splitConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  - name: site
    default: true
    backends:
      - { pool: canary, header: { name: X-Canary, exact: always } }
      - { pool: canary, cookie: { name: canary, exact: "yes" } }
      - { pool: stable, weight: 95 }
      - { pool: canary, weight: 5 }
  - name: chain
    path: /chain/
    backends:
      - { pool: stable, weight: 1 }
      - { pool: dead, weight: 1, fallback: spare }
pools:
  - { name: stable, hosts: [ { addr: "{{stable}}" } ] }
  - { name: canary, hosts: [ { addr: "{{canary}}" } ] }
  - { name: dead, hosts: [ { addr: "{{dead}}" } ] }
  - { name: spare, hosts: [ { addr: "{{spare}}" } ] }
`

// A 95/5 canary sends 5% of requests to the canary, spread evenly (not in
// bursts); a header or a cookie sends a request there whatever the
// weights; each pool keeps its own empty-pool chain.
func TestTrafficSplitting(t *testing.T) {
	t.Parallel()
	stable := recordingBackend(t, "127.0.0.1", "stable")
	canary := recordingBackend(t, "127.0.0.2", "canary")
	spare := recordingBackend(t, "127.0.0.3", "spare")
	_, base, _ := startSturdy(t, parseConfig(t, splitConfig, map[string]string{
		"stable": stable.addr(), "canary": canary.addr(), "dead": deadAddr(t), "spare": spare.addr(),
	}))
	c := clientFrom("127.0.0.1")
	const n = 400
	perHundred := map[int]int{}
	for i := range n {
		if _, body := do(t, c, "GET", base+"/", nil); body == "canary" {
			perHundred[i/100]++
		}
	}
	total := 0
	for k := range n / 100 {
		if got := perHundred[k]; got < 3 || got > 7 {
			t.Errorf("requests %d-%d: %d went to the canary, want 5 +- 2", k*100, k*100+99, got)
		}
		total += perHundred[k]
	}
	t.Logf("canary answers per 100 requests: %v", perHundred)
	if total < 18 || total > 22 {
		t.Errorf("%d of %d requests went to the canary, want 20 +- 2", total, n)
	}

	for range 5 {
		if _, body := do(t, c, "GET", base+"/", nil, "X-Canary", "always"); body != "canary" {
			t.Fatalf("X-Canary: always answered by %q, want canary", body)
		}
		if _, body := do(t, c, "GET", base+"/", nil, "Cookie", "a=1; canary=yes"); body != "canary" {
			t.Fatalf("cookie canary=yes answered by %q, want canary", body)
		}
	}
	if _, body := do(t, c, "GET", base+"/", nil, "Cookie", "canary=no", "X-Canary", "sometimes"); body == "" {
		t.Fatal("no answer")
	}

	// Half of /chain/ goes to a pool whose only host is down: its own
	// fallback answers those, never the other backend's pool.
	seen := map[string]int{}
	for range 20 {
		resp, body := do(t, c, "GET", base+"/chain/x", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/chain/: %d %q", resp.StatusCode, body)
		}
		seen[body]++
	}
	if seen["stable"] != 10 || seen["spare"] != 10 {
		t.Errorf("/chain/ answered by %v; want stable 10 and spare 10 (the dead pool's fallback)", seen)
	}
}

const mirrorConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  - name: all
    path: /all/
    pool: primary
    request_id: {}
    rewrite: { prefix: /v2/ }
    mirror: { pool: shadow, max_body: 1KiB }
  - { name: half, path: /half/, pool: primary, mirror: { pool: shadow, share: 50% } }
  - { name: slow, path: /slow/, pool: primary, mirror: { pool: hanging, max_in_flight: 2, timeout: 1m } }
  - { name: dead, path: /dead/, pool: primary, mirror: { pool: dead, timeout: 1s } }
  - { name: site, default: true, pool: primary }
pools:
  - { name: primary, hosts: [ { addr: "{{primary}}" }, { addr: "{{primary2}}" } ] }
  - { name: shadow, hosts: [ { addr: "{{shadow}}" } ] }
  - { name: hanging, hosts: [ { addr: "{{hanging}}" } ] }
  - { name: dead, hosts: [ { addr: "{{dead}}" } ] }
`

// Mirrored copies carry what the primary got (body, rewritten path,
// request id), in the configured share; a slow or dead mirror changes
// nothing for the client or the primary pool, and copies in flight are
// bounded.
func TestMirror(t *testing.T) {
	t.Parallel()
	primary := recordingBackend(t, "127.0.0.1", "primary")
	primary2 := recordingBackend(t, "127.0.0.2", "primary")
	shadow := recordingBackend(t, "127.0.0.3", "shadow")
	hanging := recordingBackend(t, "127.0.0.4", "hanging")
	release := make(chan struct{})
	hanging.hold = release
	t.Cleanup(func() { close(release) })
	s, base, _ := startSturdy(t, parseConfig(t, mirrorConfig, map[string]string{
		"primary": primary.addr(), "primary2": primary2.addr(), "shadow": shadow.addr(),
		"hanging": hanging.addr(), "dead": deadAddr(t),
	}))
	c := clientFrom("127.0.0.1")

	resp, _ := do(t, c, "POST", base+"/all/items?x=1", strings.NewReader("hello"), "Content-Type", "text/plain")
	if resp.StatusCode != 200 {
		t.Fatalf("POST: %d", resp.StatusCode)
	}
	if !testutil.Eventually(5*time.Second, func() bool { return shadow.count() == 1 }) {
		t.Fatalf("the shadow received %d copies, want 1", shadow.count())
	}
	cp, first := shadow.last(t), primary
	if primary2.count() > 0 {
		first = primary2
	}
	orig := first.last(t)
	if cp.Method != "POST" || cp.RequestURI != "/v2/items?x=1" || cp.Body != "hello" || cp.Header.Get("X-Request-Id") == "" ||
		cp.Header.Get("X-Request-Id") != orig.Header.Get("X-Request-Id") || cp.Header.Get("Content-Type") != "text/plain" {
		t.Errorf("the copy: %s %s %q id %q; the original: %s %s %q id %q",
			cp.Method, cp.RequestURI, cp.Body, cp.Header.Get("X-Request-Id"), orig.Method, orig.RequestURI, orig.Body, orig.Header.Get("X-Request-Id"))
	}
	// A body above max_body is not copied; the primary still gets it all.
	big := strings.Repeat("x", 2048)
	do(t, c, "POST", base+"/all/big", strings.NewReader(big))
	rt := s.Runtime().Route("all")
	if n := rt.Stats.Mirror.Skipped.Load(); n != 1 {
		t.Errorf("%d copies skipped, want 1 (the body is above max_body)", n)
	}

	// 50%: exactly half of 10 requests.
	for range 10 {
		do(t, c, "GET", base+"/half/x", nil)
	}
	if !testutil.Eventually(5*time.Second, func() bool { return shadow.count() == 6 }) {
		t.Errorf("the shadow received %d copies of /half/, want 5", shadow.count()-1)
	}

	// A mirror that never answers: the client is answered at once, two
	// copies wait, the rest are dropped. At once means with its copy still
	// waiting: the hanging mirror holds each copy until the test ends and
	// the copy's timeout is a minute, so an answer that waited for its
	// copy would find fewer copies in flight.
	slow := s.Runtime().Route("slow")
	for i := range 5 {
		resp, body := do(t, c, "GET", base+"/slow/x", nil)
		if resp.StatusCode != 200 || body != "primary" {
			t.Fatalf("/slow/: %d %q", resp.StatusCode, body)
		}
		if n, want := slow.Routing.Mirror.InFlight(), min(i+1, 2); n != int64(want) {
			t.Fatalf("/slow/ %d answered with %d copies in flight, want %d: it waited for its copy", i, n, want)
		}
	}
	if !testutil.Eventually(5*time.Second, func() bool { return hanging.count() == 2 }) || slow.Routing.Mirror.InFlight() != 2 {
		t.Errorf("%d copies reached the hanging mirror, %d in flight; want 2 and 2", hanging.count(), slow.Routing.Mirror.InFlight())
	}
	if n := slow.Stats.Mirror.Dropped.Load(); n != 3 {
		t.Errorf("%d copies dropped, want 3 (max_in_flight 2)", n)
	}

	// A dead mirror: the client never notices, the primary pool's hosts
	// stay healthy with no failure counted.
	for range 10 {
		if resp, _ := do(t, c, "GET", base+"/dead/x", nil); resp.StatusCode != 200 {
			t.Fatalf("/dead/: %d", resp.StatusCode)
		}
	}
	dead := s.Runtime().Route("dead")
	if !testutil.Eventually(5*time.Second, func() bool { return dead.Stats.Mirror.Failed.Load() == 10 }) {
		t.Errorf("%d copies failed, want 10", dead.Stats.Mirror.Failed.Load())
	}
	for _, p := range s.Status().Pools {
		if p.Name != "primary" {
			continue
		}
		for _, h := range p.Hosts {
			if h.State != "healthy" || h.WindowFailures != 0 {
				t.Errorf("primary host %s: %s with %d failures; mirroring must not touch it", h.Addr, h.State, h.WindowFailures)
			}
		}
	}
}
