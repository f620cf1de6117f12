package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/outcome"
	"github.com/sturdyproxy/sturdy/internal/testing/fake"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

const inFlightConfig = `
admin: { listen: "off" }
log: { access: { enabled: true, path: "{{log}}" } }
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
// trial, to wait the whole timeout once more. Which answers came from the
// cut, and not from a request's own timeout, is the proxy's own record:
// each access log line's outcome and answer, not how soon it came.
func TestRequestsInFlightAreAnsweredAtDetection(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, fallback string
		want           int    // the answer of those in flight at detection
		answer         string // and the access log's name for how it was given
	}{
		{"sorry page", "", 503, "sorry"},
		{"fallback pool", "fallback: { pool: spare },", 200, "fallback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			logPath := filepath.Join(t.TempDir(), "access.log")
			vars := map[string]string{"fallback": tc.fallback, "log": logPath}
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
			var cls []*http.Client
			for c := range 6 {
				cls = append(cls, fake.Client(fmt.Sprintf("127.0.8.%d", c+1), 20*time.Second))
			}
			start := time.Now()
			const sent = 12 * 6
			arrivals(12, 250*time.Millisecond, func(j int) {
				var wg sync.WaitGroup
				for _, cl := range cls {
					wg.Go(func() {
						resp, err := cl.Get(fmt.Sprintf("%s/item/%d", url, j))
						if err == nil {
							io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
						}
					})
				}
				wg.Wait()
			})
			mu.Lock()
			defer mu.Unlock()
			if detected.IsZero() {
				t.Fatal("the pool was not found failing")
			}
			var recs []accessRecord
			testutil.Eventually(10*time.Second, func() bool { // the log's buffer is flushed each second
				recs = readAccessLog(t, logPath)
				return len(recs) >= sent
			})
			if len(recs) != sent {
				t.Fatalf("%d access log lines for %d requests", len(recs), sent)
			}
			// In flight at detection, as the proxy saw it: arrived a
			// moment before it (a request that reaches a host as the cut
			// runs may miss it: left alone here), and not so early that
			// its own timeout could race the cut.
			const timeout, moment, margin = 2 * time.Second, 100 * time.Millisecond, 500 * time.Millisecond
			inFlight, notCut := 0, 0
			for _, r := range recs {
				if !r.Time.Before(detected.Add(-moment)) || !r.Time.After(detected.Add(-timeout+margin)) {
					continue
				}
				inFlight++
				if r.Status != tc.want || r.Answer != tc.answer || r.Outcome == outcome.ResponseTimeout.String() {
					notCut++
					t.Errorf("in flight at detection (arrived %s after the start): %d, answer %q after outcome %q; want %d, answer %q, not a timeout",
						r.Time.Sub(start).Round(10*time.Millisecond), r.Status, r.Answer, r.Outcome, tc.want, tc.answer)
				}
			}
			t.Logf("measured: found failing %s after the start; %d requests in flight then, %d not answered by the cut", detected.Sub(start).Round(10*time.Millisecond), inFlight, notCut)
			if inFlight == 0 {
				t.Fatal("no request was in flight at detection: nothing was tested")
			}
		})
	}
}

// accessRecord is what a test reads back of an access log line.
type accessRecord struct {
	Time    time.Time `json:"time"`
	Path    string    `json:"path"`
	Status  int       `json:"status"`
	Answer  string    `json:"answer"`
	Outcome string    `json:"outcome"`
}

func readAccessLog(t *testing.T, path string) []accessRecord {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var recs []accessRecord
	for line := range bytes.Lines(b) {
		var r accessRecord
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("access log line %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}
