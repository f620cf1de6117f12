package cache

import (
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestIncident004 replays incident 004 through the cache: three backends,
// one answering 502, a page sent with stale-if-error=86400 and an uptime
// monitor polling it. Stale answers stay within the route's 15-minute cap
// and are all labelled; the health path is never cached, so the monitor
// that uses it sees the errors; the origin error count matches what the
// backends really answered.
func TestIncident004(t *testing.T) {
	e := newEnv(t, nil)
	var bad502 atomic.Int64
	page := respond(200, "home", "Cache-Control", "public, max-age=120, stale-while-revalidate=60, stale-if-error=86400")
	broken := func(w http.ResponseWriter, r *http.Request) {
		bad502.Add(1)
		respond(502, "bad gateway")(w, r)
	}
	b1, b2, b3 := newOrigin(t, e.clock, page), newOrigin(t, e.clock, page), newOrigin(t, e.clock, page)
	// A seeded random pick, as a least-loaded balancer looks from outside:
	// strict round-robin would line up with the cache's own retries.
	var mu sync.Mutex
	rnd := rand.New(rand.NewPCG(4, 4))
	pick := func() int {
		mu.Lock()
		defer mu.Unlock()
		return rnd.IntN(3)
	}
	e.serveWith(pickFetcher(t, pick, b1.srv.URL, b2.srv.URL, b3.srv.URL))

	stale, hiddenAnswers, healthErrors := 0, 0, 0
	poll := func() answer {
		a := e.get("/")
		waitBackground(e.cache) // keep the round-robin order deterministic
		if h := e.get("/healthz"); h.res.Status != StatusBypass || !strings.Contains(h.header.Get("Cache-Status"), "fwd=bypass") {
			t.Fatalf("health path used the cache: %q", h.header.Get("Cache-Status"))
		} else if h.status == 502 {
			healthErrors++
		}
		if a.res.Stale {
			stale++
			if a.header.Get("Age") == "" {
				t.Errorf("stale answer without Age")
			}
		}
		if a.res.Stale && a.res.OriginError {
			hiddenAnswers++
			cs := a.header.Get("Cache-Status")
			if !hasParam(cs, "fwd=stale") || !hasParam(cs, "fwd-status=502") || !hasParam(cs, "detail=stale-if-error") {
				t.Errorf("hidden error not labelled: %q", cs)
			}
		}
		return a
	}

	// The page is cached while all is well; then the deploy half fails.
	e.get("/").want(t, 200, "home", StatusMiss)
	b3.set(broken)

	// Half-broken deploy for 30 minutes, monitor every 30 s: the page always
	// answers, partly thanks to labelled stale copies.
	for range 60 {
		if a := poll(); a.status != 200 {
			t.Fatalf("partial outage: %d %q", a.status, a.header.Get("Cache-Status"))
		}
		e.clock.Advance(30 * time.Second)
	}
	if hiddenAnswers == 0 || healthErrors == 0 {
		t.Fatalf("scenario did not exercise the failure: hidden %d, health errors %d", hiddenAnswers, healthErrors)
	}

	// Every backend breaks. The page is served stale for at most 15 minutes
	// past its freshness, then the monitor sees the 502.
	b1.set(broken)
	b2.set(broken)
	outage := e.clock.Now()
	var lastGood, firstBad time.Time
	for range 40 {
		a := poll()
		if a.status == 200 {
			if !firstBad.IsZero() {
				t.Fatalf("served stale again after the bound")
			}
			lastGood = e.clock.Now()
		} else if firstBad.IsZero() {
			firstBad = e.clock.Now()
			a.wantCacheStatus(t, "sturdy; fwd=stale; fwd-status=502; detail=error-status")
		}
		e.clock.Advance(30 * time.Second)
	}
	if bound := 120*time.Second + DefaultStaleMax; lastGood.Sub(outage) > bound {
		t.Errorf("outage hidden for %v, more than max-age + cap = %v", lastGood.Sub(outage), bound)
	}
	if firstBad.IsZero() || firstBad.Sub(lastGood) > 30*time.Second {
		t.Fatalf("stale never stopped: last good %v, first bad %v", lastGood, firstBad)
	}

	s := e.cache.RouteStats("r")
	if s.OriginErrors != uint64(bad502.Load()) {
		t.Errorf("origin errors counted %d, backends answered 502 %d times", s.OriginErrors, bad502.Load())
	}
	if s.ErrorsHidden != uint64(hiddenAnswers) {
		t.Errorf("errors hidden %d, hidden answers seen %d", s.ErrorsHidden, hiddenAnswers)
	}

	// Masking was announced by events, a handful, not one per request.
	evs := e.eventsSeen()
	if len(evs) == 0 || len(evs) > hiddenAnswers*2 || evs[0].Kind != EventMaskingStarted {
		t.Errorf("%d events for %d hidden errors: %+v", len(evs), hiddenAnswers, evs)
	}
	for i, ev := range evs {
		want := EventMaskingStarted
		if i%2 == 1 {
			want = EventMaskingEnded
		}
		if ev.Kind != want {
			t.Errorf("event %d is %s, want %s", i, ev.Kind, want)
		}
	}
	t.Logf("%d stale answers, %d hidden errors, %d events, %d health-check errors seen; full outage hidden for %v",
		stale, hiddenAnswers, len(evs), healthErrors, lastGood.Sub(outage))
}
