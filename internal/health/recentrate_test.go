package health

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/health/balance"
	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// A host that starts resetting most of its requests after serving well
// for a while is judged on its recent buckets as well as its window: it
// need not first outweigh the 30 s window's earlier successes (a host
// resetting 73 % took 12 s, simulator seed 913). A host failing now and
// then, under the failure rate in its recent buckets too, stays in. The
// failures never come three in a row, which would make it suspect at
// once (hostFailed): the rate alone decides.
func TestAHostThatStartsFailingIsJudgedOnItsRecentRate(t *testing.T) {
	for _, tc := range []struct {
		every int // of every this many requests on it, all but the last fail (eject) or only the last fails
		eject bool
	}{{3, true}, {5, false}} {
		rate := 1 / float64(tc.every)
		if tc.eject {
			rate = 1 - rate
		}
		for seed := range uint64(10) {
			t.Run(fmt.Sprintf("rate %.2f/seed %d", rate, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 37))
				n := 0
				m, p, rec := setup(t, 3, "{}", nil)
				p.attr = demoAttributing
				site, other := route(m, "site", 0), route(m, "other", 1)
				set := &Set{Pools: []*Pool{p}, Routes: []*RouteTracker{site.tr, other.tr}, Attributing: demoAttributing}
				const start = 15 * time.Second
				var ejectedAt time.Duration
				for step := range 300 { // 30 s, a request every 100 ms
					now := t0.Add(time.Duration(step) * 100 * time.Millisecond)
					if step%10 == 0 {
						m.Tick(set, now)
						if ejectedAt == 0 && !p.Hosts[0].Mode().InRotation() {
							ejectedAt = now.Sub(t0)
						}
					}
					rt := []testRoute{site, other}[step%2]
					r := req(rt, fmt.Sprintf("198.51.100.%d", 11+step%4))
					var tried balance.Tried
					h := p.Next(rng.Uint64(), &tried, now)
					if h == nil {
						continue
					}
					if h.Index() == 0 && now.Sub(t0) >= start {
						n++
					}
					last := n%tc.every == 0
					if h.Index() == 0 && now.Sub(t0) >= start && last != tc.eject {
						p.Settle(r, []Failure{{Host: h, Class: outcome.Reset}}, false, now)
						continue
					}
					p.Record(h, outcome.OK, r, now)
				}
				switch {
				case tc.eject && (ejectedAt == 0 || ejectedAt-start > 7*time.Second):
					t.Errorf("host failing %.0f %% from %v: out at %v, want within 7 s; events %v", 100*rate, start, ejectedAt, rec.types())
				case !tc.eject && (ejectedAt != 0 || rec.count(event.HostSuspect) != 0):
					t.Errorf("host failing %.0f %%: out at %v (events %v), want kept", 100*rate, ejectedAt, rec.types())
				}
			})
		}
	}
}
