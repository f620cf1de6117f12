package cache

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Stale serving: bounded, labelled, counted, announced.

func TestStaleWhileRevalidateOneBackgroundFetch(t *testing.T) {
	e := newEnv(t, respond(200, "v1", "Cache-Control", "max-age=10, stale-while-revalidate=60", "ETag", `"1"`))
	e.get("/s")

	release := make(chan struct{})
	e.origin.set(func(w http.ResponseWriter, r *http.Request) {
		<-release
		w.Header().Set("Cache-Control", "max-age=10, stale-while-revalidate=60")
		w.WriteHeader(http.StatusNotModified)
	})
	e.clock.Advance(13 * time.Second)
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := e.get("/s")
			a.want(t, 200, "v1", StatusStale)
			a.wantCacheStatus(t, "sturdy; hit; ttl=-3; detail=stale-while-revalidate")
		}()
	}
	wg.Wait() // every stale answer came back while the revalidation is held
	close(release)
	waitBackground(e.cache)

	if n := e.origin.hits.Load(); n != 2 {
		t.Errorf("origin hits = %d, want 2 (one fill, one background revalidation)", n)
	}
	a := e.get("/s")
	a.want(t, 200, "v1", StatusHit)
	a.wantCacheStatus(t, "sturdy; hit; ttl=10")
}

func TestStaleWhileRevalidateCappedByPolicy(t *testing.T) {
	e := newEnv(t, respond(200, "v1", "Cache-Control", "max-age=10, stale-while-revalidate=3600"))
	e.policy.StaleWhileRevalidateMax = time.Minute
	e.get("/s")
	e.clock.Advance(10*time.Second + time.Minute + time.Second)
	// Past the cap: revalidated in the foreground.
	e.get("/s").want(t, 200, "v1", StatusMiss)
}

// TestStaleIfErrorBound: within the bound a failing origin is hidden by a
// labelled stale answer; past it the client gets the origin's error.
func TestStaleIfErrorBound(t *testing.T) {
	e := newEnv(t, respond(200, "good", "Cache-Control", "max-age=60, stale-if-error=300"))
	e.get("/p")
	e.origin.set(respond(502, "bad gateway"))

	e.clock.Advance(100 * time.Second)
	a := e.get("/p")
	a.want(t, 200, "good", StatusStale)
	a.wantCacheStatus(t, "sturdy; fwd=stale; fwd-status=502; ttl=-40; detail=stale-if-error")
	if a.header.Get("Age") != "100" || !a.res.OriginError || a.res.OriginStatus != 502 {
		t.Errorf("Age %q, Result %+v", a.header.Get("Age"), a.res)
	}

	e.clock.Advance(260 * time.Second) // 360s old: 300s stale, still inside
	e.get("/p").want(t, 200, "good", StatusStale)
	e.clock.Advance(time.Second) // 301s stale: past the bound
	a = e.get("/p")
	a.want(t, 502, "bad gateway", StatusMiss)
	a.wantCacheStatus(t, "sturdy; fwd=stale; fwd-status=502; detail=error-status")
	if !a.res.OriginError || a.res.Stale {
		t.Errorf("Result %+v", a.res)
	}
}

func TestStaleIfErrorOnFetchError(t *testing.T) {
	e := newEnv(t, respond(200, "good", "Cache-Control", "max-age=60, stale-if-error=300"))
	e.get("/p")
	e.origin.srv.Close() // connection refused from now on

	e.clock.Advance(61 * time.Second)
	a := e.get("/p")
	a.want(t, 200, "good", StatusStale)
	a.wantCacheStatus(t, "sturdy; fwd=stale; ttl=-1; detail=stale-if-error")
	if a.res.OriginErr == nil || !a.res.Answered() {
		t.Errorf("Result %+v", a.res)
	}
	e.clock.Advance(300 * time.Second)
	a = e.get("/p")
	if a.status != 502 || !strings.HasPrefix(a.body, "proxy: ") || a.res.Answered() {
		t.Errorf("past the bound: %d %q, Result %+v", a.status, a.body, a.res)
	}
}

func TestStaleForbidden(t *testing.T) {
	for _, cc := range []string{
		"max-age=10, must-revalidate, stale-if-error=300",
		"max-age=10, proxy-revalidate, stale-if-error=300",
		"max-age=10, no-cache, stale-if-error=300",
		"max-age=10", // no grant at all
	} {
		t.Run(cc, func(t *testing.T) {
			e := newEnv(t, respond(200, "good", "Cache-Control", cc, "ETag", `"1"`))
			e.get("/p")
			e.origin.set(respond(503, "down"))
			e.clock.Advance(11 * time.Second)
			a := e.get("/p")
			a.want(t, 503, "down", StatusMiss)
			if !a.res.OriginError || e.cache.RouteStats("r").ErrorsHidden != 0 {
				t.Errorf("Result %+v", a.res)
			}
		})
	}
}

// TestStaleIfErrorCapped is incident 004's header: stale-if-error=86400 is
// cut to the route's cap (default 15 minutes).
func TestStaleIfErrorCapped(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit time.Duration
		want  time.Duration
	}{
		{"default cap", 0, 15 * time.Minute},
		{"route cap", 5 * time.Minute, 5 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, respond(200, "good", "Cache-Control", "public, max-age=120, stale-while-revalidate=60, stale-if-error=86400"))
			e.policy.StaleIfErrorMax = tc.limit
			e.get("/")
			e.origin.set(respond(502, "bad"))
			e.clock.Advance(120*time.Second + tc.want)
			e.get("/").want(t, 200, "good", StatusStale)
			e.clock.Advance(time.Second)
			e.get("/").want(t, 502, "bad", StatusMiss)
		})
	}
}

// TestOriginErrorsCountedWhileHidden: each failed fetch counts, hidden or
// not, and the hidden ones are counted apart.
func TestOriginErrorsCountedWhileHidden(t *testing.T) {
	e := newEnv(t, respond(200, "good", "Cache-Control", "max-age=60, stale-if-error=600"))
	e.get("/p")
	e.origin.set(respond(500, "oops"))
	e.clock.Advance(61 * time.Second)
	for range 5 {
		e.get("/p").want(t, 200, "good", StatusStale)
		e.clock.Advance(10 * time.Second)
	}
	e.get("/healthz").want(t, 500, "oops", StatusBypass) // seen by the client, still counted
	e.clock.Advance(10 * time.Minute)
	e.get("/p").want(t, 500, "oops", StatusMiss)

	s := e.cache.RouteStats("r")
	if s.OriginRequests != 8 || s.OriginErrors != 7 || s.ErrorsHidden != 5 || s.Stale != 5 ||
		s.Misses != 2 || s.Bypasses != 1 || s.Stored != 1 {
		t.Errorf("stats %+v", s)
	}
}

// TestMaskingEvents: one Started at the first hidden error, one Ended when
// the origin answers well after a quiet period; a second episode ends by
// the sweep when no traffic comes.
func TestMaskingEvents(t *testing.T) {
	e := newEnv(t, respond(200, "good", "Cache-Control", "max-age=60, stale-if-error=900"),
		func(o *Options) { o.MaskingQuiet = time.Minute })
	e.get("/p")
	e.origin.set(respond(502, "bad"))
	e.clock.Advance(61 * time.Second)
	for range 4 {
		e.get("/p").want(t, 200, "good", StatusStale)
		e.clock.Advance(5 * time.Second)
	}
	evs := e.eventsSeen()
	if len(evs) != 1 || evs[0].Kind != EventMaskingStarted || evs[0].Route != "r" ||
		evs[0].Evidence != "GET /p: origin status 502" {
		t.Fatalf("events after the failures: %+v", evs)
	}
	if s := e.cache.RouteStats("r"); !s.Masking || !s.MaskingSince.Equal(evs[0].At) {
		t.Errorf("stats %+v", s)
	}

	// The origin recovers; an answer before the quiet period ends nothing.
	e.origin.set(respond(200, "good", "Cache-Control", "max-age=1, stale-if-error=900"))
	e.get("/p").want(t, 200, "good", StatusMiss)
	if n := len(e.eventsSeen()); n != 1 {
		t.Fatalf("ended too early: %+v", e.eventsSeen())
	}
	e.clock.Advance(time.Minute)
	e.get("/p")
	e.get("/p")
	evs = e.eventsSeen()
	if len(evs) != 2 {
		t.Fatalf("events: %+v", evs)
	}
	end := evs[1]
	if end.Kind != EventMaskingEnded || end.StaleAnswers != 4 || end.OriginErrors != 4 ||
		end.Duration != 80*time.Second || end.Evidence != "origin answered 200" {
		t.Errorf("ended event %+v", end)
	}

	// Second episode, no traffic afterwards: the sweep ends it.
	e.origin.set(respond(503, "bad"))
	e.clock.Advance(2 * time.Second)
	e.get("/p").want(t, 200, "good", StatusStale)
	e.cache.sweep()
	e.clock.Advance(time.Minute)
	e.cache.sweep()
	e.cache.sweep()
	evs = e.eventsSeen()
	if len(evs) != 4 || evs[2].Kind != EventMaskingStarted || evs[3].Kind != EventMaskingEnded ||
		evs[3].Evidence != "no stale answer for 1m0s" {
		t.Errorf("events: %+v", evs)
	}
}

func TestServeStaleForEmptyPool(t *testing.T) {
	e := newEnv(t, respond(200, "good", "Cache-Control", "max-age=60", "ETag", `"1"`))
	e.get("/p")
	e.get("/healthz")
	empty := func(path string, p *Policy) (bool, *http.Response) {
		rec := &recorder{header: http.Header{}}
		req, _ := http.NewRequest(http.MethodGet, "http://"+e.front.Listener.Addr().String()+path, nil)
		req.Host = e.front.Listener.Addr().String()
		resp := e.cache.ServeStale(req, p, "pool-empty")
		if resp == nil {
			return false, nil
		}
		send(rec, req, resp)
		if rec.body.String() != "good" {
			t.Errorf("%s: body %q", path, rec.body.String())
		}
		return true, &http.Response{StatusCode: rec.status, Header: rec.header}
	}
	// Fresh: a plain hit.
	if ok, resp := empty("/p", e.policy); !ok || resp.Header.Get("Cache-Status") != "sturdy; hit; ttl=60; detail=pool-empty" {
		t.Errorf("fresh: %v %v", ok, resp.Header)
	}
	// Stale without a stale-if-error grant: allowed when disconnected, up to the cap.
	e.clock.Advance(60*time.Second + 15*time.Minute)
	ok, resp := empty("/p", e.policy)
	if !ok || resp.Header.Get("Cache-Status") != "sturdy; fwd=stale; ttl=-900; detail=pool-empty" {
		t.Errorf("stale: %v %v", ok, resp.Header)
	}
	if evs := e.eventsSeen(); len(evs) != 1 || evs[0].Evidence != "GET /p: pool-empty" {
		t.Errorf("events %+v", evs)
	}
	e.clock.Advance(time.Second)
	if ok, _ := empty("/p", e.policy); ok {
		t.Error("served past the cap")
	}
	if ok, _ := empty("/healthz", e.policy); ok {
		t.Error("served a health path")
	}
	if ok, _ := empty("/nothing", e.policy); ok {
		t.Error("served something for nothing stored")
	}
	if s := e.cache.RouteStats("r"); s.Stale != 1 || s.ErrorsHidden != 1 {
		t.Errorf("stats %+v", s)
	}
}

// recorder is a minimal ResponseWriter for calls that bypass the frontend.
type recorder struct {
	header http.Header
	status int
	body   strings.Builder
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(200)
	return r.body.Write(b)
}

func TestCloseStopsBackground(t *testing.T) {
	e := newEnv(t, respond(200, "v1", "Cache-Control", "max-age=1, stale-while-revalidate=60"))
	e.get("/c")
	started := make(chan struct{})
	e.origin.set(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done() // hangs until the cache gives up
	})
	e.clock.Advance(2 * time.Second)
	e.get("/c").want(t, 200, "v1", StatusStale)
	<-started
	e.cache.Close() // returns only once the background fetch has ended
	if s := e.cache.RouteStats("r"); s.OriginErrors != 0 {
		t.Errorf("closing counted as an origin error: %+v", s)
	}
	e.clock.Advance(time.Second)
	e.get("/c").want(t, 200, "v1", StatusStale) // still serves, no new background work
}

// TestBackgroundTimeoutFallsBackToForeground: a background revalidation
// that hangs is cut by BackgroundTimeout, counted as an origin error, and
// the next request revalidates in the foreground, where stale-if-error
// rules (and its accounting) apply instead of stale-while-revalidate.
func TestBackgroundTimeoutFallsBackToForeground(t *testing.T) {
	e := newEnv(t, respond(200, "v1", "Cache-Control", "max-age=1, stale-while-revalidate=600, stale-if-error=600"),
		func(o *Options) { o.BackgroundTimeout = 20 * time.Millisecond })
	e.get("/t")
	e.origin.set(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	e.clock.Advance(2 * time.Second)
	e.get("/t").want(t, 200, "v1", StatusStale)
	waitBackground(e.cache)
	if s := e.cache.RouteStats("r"); s.OriginErrors != 1 {
		t.Fatalf("stats %+v", s)
	}
	e.origin.set(respond(503, "down"))
	a := e.get("/t")
	a.want(t, 200, "v1", StatusStale)
	a.wantCacheStatus(t, "sturdy; fwd=stale; fwd-status=503; ttl=-1; detail=stale-if-error")
	if s := e.cache.RouteStats("r"); s.OriginErrors != 2 || s.ErrorsHidden != 1 {
		t.Errorf("stats %+v", s)
	}
}
