package server

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/testing/fake"
)

const inFlightConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  - { name: site, default: true, pool: web, {{fallback}} timeouts: { response_header: 2s } }
pools:
  - name: web
    hosts: [ { addr: "{{h1}}" }, { addr: "{{h2}}" }, { addr: "{{h3}}" } ]
    health: { passive: { window: 5s, trial_interval: 10s } }
  - name: spare
    hosts: [ { addr: "{{spare}}" } ]
`

// Every host of a pool accepts and never answers. The requests still
// waiting on it when it is found failing are answered then, by the chain
// (the sorry page with Retry-After, or the fallback pool when the request
// can be sent again): none is sent to the failing pool again as its
// trial, to wait the whole timeout once more.
func TestRequestsInFlightAreAnsweredAtDetection(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, fallback string
		want           int // the answer of those in flight at detection
	}{
		{"sorry page", "", 503},
		{"fallback pool", "fallback: { pool: spare },", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			vars := map[string]string{"fallback": tc.fallback}
			for i := 1; i <= 3; i++ {
				b, err := fake.NewBlackhole(fmt.Sprintf("127.1.8.%d", i))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(b.Close)
				vars[fmt.Sprintf("h%d", i)] = b.Addr
			}
			spare, err := fake.NewBackend("spare", "127.1.8.9")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(spare.Close)
			vars["spare"] = spare.Addr
			s, url, _ := startSturdy(t, parseConfig(t, inFlightConfig, vars))
			var mu sync.Mutex
			var detected time.Time
			s.Events().SubscribeWithHistory(func(e event.Event) {
				if e.Type == event.PoolFailing {
					mu.Lock()
					detected = time.Now()
					mu.Unlock()
				}
			})

			// Six clients, a request each every 250ms for 3s: the first
			// ones time out (they are the evidence), the later ones are
			// waiting when the pool is found failing.
			type answer struct {
				sent, done time.Time
				status     int
			}
			var answers []answer
			var cls []*http.Client
			for c := range 6 {
				cls = append(cls, fake.Client(fmt.Sprintf("127.0.8.%d", c+1), 20*time.Second))
			}
			start := time.Now()
			arrivals(12, 250*time.Millisecond, func(j int) {
				var wg sync.WaitGroup
				for _, cl := range cls {
					wg.Go(func() {
						a := answer{sent: time.Now()}
						resp, err := cl.Get(fmt.Sprintf("%s/item/%d", url, j))
						if err == nil {
							io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
							a.status = resp.StatusCode
						}
						a.done = time.Now()
						mu.Lock()
						answers = append(answers, a)
						mu.Unlock()
					})
				}
				wg.Wait()
			})
			mu.Lock()
			defer mu.Unlock()
			if detected.IsZero() {
				t.Fatal("the pool was not found failing")
			}
			// In flight at detection: sent a moment before it (a request
			// that reaches a host as the cut runs may miss it: left alone
			// here), and not so early that its own timeout could end its
			// wait first.
			const timeout, moment = 2 * time.Second, 100 * time.Millisecond
			inFlight, late := 0, 0
			for _, a := range answers {
				if !a.sent.Before(detected.Add(-moment)) || !a.sent.After(detected.Add(-timeout+moment)) {
					continue
				}
				inFlight++
				if a.status != tc.want || a.done.Sub(detected) > 500*time.Millisecond {
					late++
					t.Errorf("in flight at detection (sent %s after the start): %d after %s more, want %d at once",
						a.sent.Sub(start).Round(10*time.Millisecond), a.status, a.done.Sub(detected).Round(10*time.Millisecond), tc.want)
				}
			}
			t.Logf("measured: found failing %s after the start; %d requests in flight then, %d not answered at once", detected.Sub(start).Round(10*time.Millisecond), inFlight, late)
			if inFlight == 0 {
				t.Fatal("no request was in flight at detection: nothing was tested")
			}
		})
	}
}
