package health

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// With one host in rotation (a pool of one, or a pool of two whose other
// host is out for its own fault), a scanner refused by the WAF there
// while the visitors are served there is the scanner's: there is no
// second host to compare, and the scanner was never named (simulator
// seeds 118, 167, 168, 260, 300, 443). The guard beside it: a lone host
// failing a share of everyone's requests names no client.
func TestAScannerOnTheOneHostLeftIsTheScanners(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hosts int
		// down is the host failing everyone's requests, or -1.
		down int
	}{
		{"pool of one", 1, -1},
		{"peer out for its own fault", 2, 1},
	} {
		for seed := range uint64(20) {
			t.Run(fmt.Sprintf("%s/seed %d", tc.name, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 34))
				m, p, rec := setup(t, tc.hosts, "{}", nil)
				p.attr = demoAttributing
				site, other := route(m, "site", 0), route(m, "other", 1)
				clients := visitors(4, site, other)
				for _, c := range clients {
					c.fails = func(h *Host) bool { return h.Index() == tc.down }
				}
				// The host is out first; the scanner comes after.
				scanner := &simClient{key: scannerKey, every: 100 * time.Millisecond, from: 5 * time.Second, route: site, fails: func(*Host) bool { return true }}
				clients = append(clients, scanner)
				simRun(rng, m, p, demoAttributing, []testRoute{site, other}, clients, 25*time.Second)

				if !m.Attributed(scannerKey) {
					t.Errorf("the scanner is not attributed; events: %v", rec.types())
				}
				for _, c := range clients {
					if c != scanner && m.Attributed(c.key) {
						t.Errorf("visitor %s attributed", c.key)
					}
				}
				if tc.down >= 0 && p.Hosts[tc.down].Mode().InRotation() {
					t.Errorf("the failing host is still in rotation: %s", p.Hosts[tc.down].Mode())
				}
			})
		}
	}
}

// A lone host that fails a share of every client's requests is the
// host's problem, not each client's: none is attributed, however few
// hosts there are to compare.
func TestALoneHostFailingEveryoneNamesNoClient(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 35))
			m, p, rec := setup(t, 1, "{}", nil)
			p.attr = demoAttributing
			site, other := route(m, "site", 0), route(m, "other", 1)
			clients := visitors(4, site, other)
			frng := rand.New(rand.NewPCG(seed, 36))
			for _, c := range clients {
				c.every = 500 * time.Millisecond
				c.fails = func(*Host) bool { return frng.Float64() < 0.6 }
			}
			simRun(rng, m, p, demoAttributing, []testRoute{site, other}, clients, 25*time.Second)
			for _, c := range clients {
				if m.Attributed(c.key) {
					t.Errorf("client %s attributed for its host's failures; events: %v", c.key, rec.types())
				}
			}
		})
	}
}
