package proxy

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// A pool whose every host fails everything, for several clients, is known
// to be failing: the sorry page answers at once, with Retry-After, while
// one trial request per host goes through every trial_interval; the first
// trial that succeeds brings the pool back.
func TestAFailingPoolAnswersFromTheChainWithTrials(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &script{}
		for range 1000 {
			up.steps = append(up.steps, slow)
		}
		f := newFixture(t, 3, up, func(pc *health.PoolConfig, _ *Route) { pc.Passive.TrialInterval = 5 * time.Second })
		send := func(i int) int {
			req := httptest.NewRequest("GET", fmt.Sprintf("http://example.com/x/%d", i), nil)
			req.RemoteAddr = fmt.Sprintf("192.0.2.%d:5000", 1+i%5)
			w := httptest.NewRecorder()
			f.h.ServeHTTP(w, req)
			return w.Code
		}
		for i := range 80 { // 8s of requests that all time out
			send(i)
			time.Sleep(100 * time.Millisecond)
			if i%10 == 9 {
				f.settle()
			}
		}
		if !f.pool.Failing() || f.evs.count(event.PoolFailing) != 1 {
			t.Fatalf("failing=%v, %d pool_failing events", f.pool.Failing(), f.evs.count(event.PoolFailing))
		}
		// Ten requests over one second: none waits on a host except the
		// trials (one per host, each 5s).
		before := len(up.hosts())
		sorry := 0
		for i := range 10 {
			if send(i) == 503 {
				sorry++
			}
			time.Sleep(100 * time.Millisecond)
		}
		trials := len(up.hosts()) - before
		if sorry != 10 || trials > 3 {
			t.Fatalf("%d sorry pages of 10, %d attempts (at most one trial per host)", sorry, trials)
		}
		// The hosts come back: a trial finds out.
		up.mu.Lock()
		up.steps = up.steps[:len(up.attempts)]
		up.mu.Unlock()
		time.Sleep(5 * time.Second)
		if code := send(0); code != 200 || f.pool.Failing() || f.evs.count(event.PoolRecovered) != 1 {
			t.Fatalf("after the hosts recovered: %d, failing=%v", code, f.pool.Failing())
		}
		if code := send(1); code != 200 {
			t.Fatalf("the next request: %d", code)
		}
	})
}

// The status names the step of the chain that answers: the pool while it
// has hosts, the fallback pool or the sorry page once it has none.
func TestServingNamesTheStepOfTheChainThatAnswers(t *testing.T) {
	for _, withFallback := range []bool{false, true} {
		f := newFixture(t, 2, &script{}, func(_ *health.PoolConfig, r *Route) {
			if withFallback {
				r.Fallback = fallbackPool()
			}
		})
		if m, since := f.rt.Serving(); m != view.ServingNormal || !since.IsZero() {
			t.Errorf("fallback=%v, hosts in rotation: %s since %v", withFallback, m, since)
		}
		drainAll(f.pool)
		f.settle()
		want := view.ServingSorry
		if withFallback {
			want = view.ServingFallback
		}
		if m, since := f.rt.Serving(); m != want || since.IsZero() {
			t.Errorf("fallback=%v, no host: %s since %v; want %s with a time", withFallback, m, since, want)
		}
		req := httptest.NewRequest("GET", "http://example.com/", nil)
		req.RemoteAddr = "192.0.2.7:5000"
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, req)
		if got := w.Code == 503; got == withFallback {
			t.Errorf("fallback=%v: the request was answered %d", withFallback, w.Code)
		}
	}
}
