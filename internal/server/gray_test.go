package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/testing/fake"
)

const grayConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: site, default: true, pool: web } ]
pools:
  - name: web
    hosts: [ { addr: "{{b1}}" }, { addr: "{{b2}}" }, { addr: "{{b3}}" } ]
    health:
      active: { path: /healthz, interval: 300ms, fast_interval: 100ms, timeout: 100ms, jitter: 0s }
      passive: { window: 10s, eject_time: 30s, max_eject_time: 1m {{gray}} }
`

// A host that passes its readiness probe while failing real traffic: the
// probe and the traffic disagree, again and again. After a few such
// disagreements sturdy says so (probe_disagrees, with both sides of the
// evidence) and takes the host out for a while; with the check turned
// off, the host stays in, suspect and restored in turn.
func TestGrayFailureTakesTheHostOut(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("gray_failure=%v", on), func(t *testing.T) {
			vars := map[string]string{"gray": ""}
			if !on {
				vars["gray"] = ", gray_failure: { enabled: false }"
			}
			var bs []*fake.Backend
			for i := 1; i <= 3; i++ {
				b, err := fake.NewBackend(fmt.Sprintf("b%d", i), fmt.Sprintf("127.1.0.%d", i))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(b.Close)
				bs = append(bs, b)
				vars[fmt.Sprintf("b%d", i)] = b.Addr
			}
			bs[2].Set("/item/", fake.Behavior{Status: 503}) // /healthz still passes
			s, url, _ := startSturdy(t, parseConfig(t, grayConfig, vars))
			ev := countEvents(s)
			tl := steady(t, url, ips("127.0.0.", 6), 5*time.Second, 50*time.Millisecond)
			total, failed := tl.total(), tl.failures()
			h := s.Runtime().Pool("web").Hosts[2]
			t.Logf("measured: gray failure (probe passes, traffic 503), gray_failure=%v: %d of %d client requests failed (%.1f%%), %d suspect, %d restored, %d probe_disagrees, host %s",
				on, failed, total, 100*float64(failed)/float64(total), ev.get(event.HostSuspect), ev.get(event.HostRestored), ev.get(event.ProbeDisagrees), h.Mode())
			if !on {
				if ev.get(event.ProbeDisagrees) != 0 || h.Mode() == health.Ejected {
					t.Errorf("gray failure detection is off, yet the host is %s; events:%s", h.Mode(), ev)
				}
				return
			}
			if ev.get(event.ProbeDisagrees) != 1 || h.Mode() != health.Ejected {
				t.Fatalf("host %s, %d probe_disagrees events; events:%s", h.Mode(), ev.get(event.ProbeDisagrees), ev)
			}
			for _, e := range s.Events().Recent(200) {
				if e.Type == event.ProbeDisagrees && (e.Evidence["traffic"] == nil || e.Evidence["probe"] == nil) {
					t.Errorf("probe_disagrees without both sides of the evidence: %v", e.Evidence)
				}
			}
			if float64(failed) > 0.05*float64(total) {
				t.Errorf("%d of %d requests failed", failed, total)
			}
		})
	}
}
