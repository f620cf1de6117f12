package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/testing/fake"
)

// steady sends GETs from each client ip, one every gap, for d, and tallies
// the answers.
func steady(t *testing.T, url string, clients []string, d, gap time.Duration) *tally {
	t.Helper()
	return &timedSteady(t, url, clients, d, gap, time.Hour).tally
}

func (t *tally) total() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, c := range t.n {
		n += c
	}
	return n
}

const majorityConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: site, default: true, pool: web } ]
pools:
  - name: web
    hosts: [ {{hosts}} ]
`

// Most hosts of a pool fail every request for six seconds, while six
// innocent clients keep browsing. Comparing each failing host with peers
// that fail as badly finds no outlier; a host failing most of its traffic
// for many clients is one anyway (within max_ejected), the healthy hosts
// are tried first while the cap keeps failing ones in rotation, and no
// client is blamed for failures everyone has. The cases vary the pool's
// size, how many fail and how (a crash that resets, a 503).
func TestMajorityFailureLeavesInnocentClientsAlmostUntouched(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		hosts, failed int
		how           fake.Behavior
		ejected       int  // max_ejected 50% of hosts
		long          bool // skipped under -short
	}{
		{"3 of 4 hosts resetting", 4, 3, fake.Behavior{Reset: true}, 2, false},
		{"3 of 5 hosts answering 503", 5, 3, fake.Behavior{Status: 503}, 2, true},
		{"2 of 3 hosts resetting", 3, 2, fake.Behavior{Reset: true}, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.long && testing.Short() {
				t.Skip("a six-second outage; run without -short")
			}
			t.Parallel()
			majority(t, tc.name, tc.hosts, tc.failed, tc.how, tc.ejected)
		})
	}
}

func majority(t *testing.T, name string, n, failing int, how fake.Behavior, ejected int) {
	var bs []*fake.Backend
	hosts := ""
	for i := 1; i <= n; i++ {
		b, err := fake.NewBackend(fmt.Sprintf("b%d", i), fmt.Sprintf("127.1.%d.%d", n, i))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		bs = append(bs, b)
		if i > 1 {
			hosts += ", "
		}
		hosts += fmt.Sprintf("{ addr: %q }", b.Addr)
	}
	s, url, _ := startSturdy(t, parseConfig(t, majorityConfig, map[string]string{"hosts": hosts}))
	ev := countEvents(s)
	clients := ips(fmt.Sprintf("127.0.%d.", n), 6)
	// Normal traffic first: successes from before the outage must not make
	// anyone look like the cause of the failures during it.
	if warm := steady(t, url, clients, time.Second, 150*time.Millisecond); warm.failures() != 0 {
		t.Fatalf("before the outage: %v", warm.n)
	}
	for _, b := range bs[:failing] {
		b.Set("", how)
	}
	tl := steady(t, url, clients, 6*time.Second, 150*time.Millisecond)
	for _, b := range bs[:failing] {
		b.Set("", fake.Behavior{})
	}
	total, failed := tl.total(), tl.failures()
	t.Logf("measured: %s for 6s: %d of %d client requests failed (%.1f%%), %d ejected, %d suspect, %d clients attributed; answers %v",
		name, failed, total, 100*float64(failed)/float64(total), ev.get(event.HostEjected), ev.get(event.HostSuspect), ev.get(event.ClientAttributed), tl.n)
	if n := ev.get(event.ClientAttributed); n != 0 {
		t.Errorf("%d innocent clients attributed during a failure everyone has; events:%s", n, ev)
	}
	if ev.get(event.HostEjected) != ejected {
		t.Errorf("%d ejections, want %d (max_ejected 50%% of %d); events:%s", ev.get(event.HostEjected), ejected, n, ev)
	}
	if float64(failed) > 0.05*float64(total) {
		t.Errorf("%d of %d requests failed; with healthy hosts tried first, at most a few per cent may", failed, total)
	}
	p := s.Runtime().Pool("web")
	for _, h := range p.Hosts[failing:] {
		if m := h.Mode(); m != health.Healthy {
			t.Errorf("the healthy host %s is %s", h.Addr, m)
		}
	}
	for _, h := range p.Hosts[:failing] {
		if m := h.Mode(); m != health.Ejected && m != health.Suspect {
			t.Errorf("failing host %s is %s", h.Addr, m)
		}
	}
}
