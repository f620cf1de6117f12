package cache

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Serve returns the response to send; the store fills from the body as the
// caller reads it. These tests call Serve directly, against a loopback
// origin, to see the response before anything is written.

// serveDirect calls Serve for a GET (or method) of path, as the proxy would.
func (e *env) serveDirect(fetch Fetch, method, path string, hdr ...string) (*http.Request, *http.Response, Result) {
	e.t.Helper()
	// The front server's host, so that both reach the same keys.
	r := httptest.NewRequest(method, "http://"+e.front.Listener.Addr().String()+path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	resp, res := e.cache.Serve(r, e.policy, fetch)
	return r, resp, res
}

// TestAnnouncedTrailersPassThroughUnstored: a response announcing trailers
// is returned as the origin's own, so its trailers arrive after the body;
// it is not stored, and says why.
func TestAnnouncedTrailersPassThroughUnstored(t *testing.T) {
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=60")
		w.Header().Set("Trailer", "X-Sum")
		io.WriteString(w, "summed")
		w.Header().Set("X-Sum", "42")
	})
	fetch := fetcher(t, e.origin.srv.URL)
	for range 2 {
		_, resp, res := e.serveDirect(fetch, http.MethodGet, "/t")
		if res.Status != StatusMiss || resp.Header.Get("Cache-Status") != "sturdy; fwd=uri-miss; fwd-status=200; detail=trailers" {
			t.Fatalf("%s %q", res.Status, resp.Header.Get("Cache-Status"))
		}
		if _, ok := resp.Trailer["X-Sum"]; !ok {
			t.Errorf("trailer not announced: %v", resp.Trailer)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(body) != "summed" || resp.Trailer.Get("X-Sum") != "42" {
			t.Errorf("body %q %v, trailer %v", body, err, resp.Trailer)
		}
	}
	if s := e.cache.RouteStats("r"); s.Stored != 0 || s.Misses != 2 {
		t.Errorf("stats %+v", s)
	}
}

// TestUnannouncedTrailersNotStored: trailers the header did not announce
// show only at the body's end; the response is then not stored.
func TestUnannouncedTrailersNotStored(t *testing.T) {
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=60")
		io.WriteString(w, "late")
		w.(http.Flusher).Flush()
		w.Header().Set(http.TrailerPrefix+"X-Late", "1")
	})
	fetch := fetcher(t, e.origin.srv.URL)
	_, resp, _ := e.serveDirect(fetch, http.MethodGet, "/u")
	io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Trailer.Get("X-Late") != "1" || resp.Body.(*tee).stored {
		t.Errorf("trailer %v, stored %v", resp.Trailer, resp.Body.(*tee).stored)
	}
	_, resp, res := e.serveDirect(fetch, http.MethodGet, "/u")
	resp.Body.Close()
	if res.Status != StatusMiss || e.origin.hits.Load() != 2 {
		t.Errorf("second answer %s, origin hits %d", res.Status, e.origin.hits.Load())
	}
}

// TestBodyClosedEarlyStoresNothing: a client that leaves mid-body stores
// nothing, is not an origin error, and releases the requests collapsed
// onto it at once; they fetch for themselves.
func TestBodyClosedEarlyStoresNothing(t *testing.T) {
	e := newEnv(t, respond(200, strings.Repeat("b", 100<<10), "Cache-Control", "max-age=60"))
	fetch := fetcher(t, e.origin.srv.URL)
	_, resp, _ := e.serveDirect(fetch, http.MethodGet, "/early")
	buf := make([]byte, 1000)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	follower := make(chan answer, 1)
	go func() { follower <- e.get("/early") }()
	waitFollowers(t, e.cache, e.key("/early"), 1)
	resp.Body.Close()
	a := <-follower
	a.want(t, 200, strings.Repeat("b", 100<<10), StatusMiss)
	if !a.res.Collapsed || !a.res.Stored {
		t.Errorf("follower: %+v", a.res)
	}
	if s := e.cache.RouteStats("r"); s.Stored != 1 || s.OriginErrors != 0 || s.OriginRequests != 2 {
		t.Errorf("stats %+v", s)
	}
}

// TestFollowersWaitForTheBody: collapsed requests wait until the leader's
// body has been read to its end and stored, then answer from the store.
func TestFollowersWaitForTheBody(t *testing.T) {
	e := newEnv(t, respond(200, "whole", "Cache-Control", "max-age=60"))
	fetch := fetcher(t, e.origin.srv.URL)
	_, resp, _ := e.serveDirect(fetch, http.MethodGet, "/w")
	follower := make(chan answer, 1)
	go func() { follower <- e.get("/w") }()
	waitFollowers(t, e.cache, e.key("/w"), 1)
	select {
	case a := <-follower:
		t.Fatalf("follower answered before the leader's body ended: %+v", a)
	default:
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "whole" {
		t.Fatalf("leader body %q", b)
	}
	a := <-follower // released by the body's end, before Close
	resp.Body.Close()
	a.want(t, 200, "whole", StatusMiss)
	a.wantCacheStatus(t, "sturdy; fwd=uri-miss; fwd-status=200; ttl=60; collapsed")
	if n := e.origin.hits.Load(); n != 1 {
		t.Errorf("origin hits %d", n)
	}
}

// markedBody is what a proxy's Fetch may wrap a body in, to find it again.
type markedBody struct{ io.ReadCloser }

// TestOriginBodyUnwraps: every answer that came from asking the origin
// leads, through Unwrap, to the body Fetch returned; answers from the store
// alone lead nowhere.
func TestOriginBodyUnwraps(t *testing.T) {
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=10")
		w.Header().Set("ETag", `"1"`)
		if r.Header.Get("If-None-Match") == `"1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		io.WriteString(w, "one")
	})
	inner := fetcher(t, e.origin.srv.URL)
	var last *markedBody
	fetch := func(r *http.Request) (*http.Response, error) {
		resp, err := inner(r)
		if err == nil {
			last = &markedBody{resp.Body}
			resp.Body = last
		}
		return resp, err
	}
	find := func(b io.ReadCloser) *markedBody {
		for b != nil {
			if m, ok := b.(*markedBody); ok {
				return m
			}
			u, ok := b.(interface{ Unwrap() io.ReadCloser })
			if !ok {
				return nil
			}
			b = u.Unwrap()
		}
		return nil
	}
	for _, step := range []struct {
		name, method string
		hdr          []string
		advance      time.Duration
		origin       bool
	}{
		{"miss", http.MethodGet, nil, 0, true},
		{"hit", http.MethodGet, nil, 0, false},
		{"revalidated", http.MethodGet, nil, 11 * time.Second, true},
		{"304 to the client's conditional, from the store", http.MethodGet, []string{"If-None-Match", `"1"`}, 0, false},
		{"HEAD revalidated", http.MethodHead, nil, 11 * time.Second, true},
		{"bypass", http.MethodPost, nil, 0, true},
	} {
		e.clock.Advance(step.advance)
		last = nil
		_, resp, res := e.serveDirect(fetch, step.method, "/o", step.hdr...)
		io.ReadAll(resp.Body)
		resp.Body.Close()
		got := find(resp.Body)
		if step.origin && (got == nil || got != last) || !step.origin && got != nil {
			t.Errorf("%s (%s): Unwrap found %v, fetch returned %v", step.name, res.Status, got != nil, last != nil)
		}
	}
}

// TestHeadRevalidationStoresTheGet: a HEAD for a stale copy asks for the
// whole GET, which the cache reads itself and stores; the client gets the
// header only.
func TestHeadRevalidationStoresTheGet(t *testing.T) {
	e := newEnv(t, respond(200, "v1", "Cache-Control", "max-age=10"))
	e.get("/h")
	e.origin.set(respond(200, "v2-longer", "Cache-Control", "max-age=10"))
	e.clock.Advance(11 * time.Second)
	a := e.do(http.MethodHead, "/h")
	a.want(t, 200, "", StatusMiss)
	if !a.res.Stored || a.header.Get("Content-Length") != "9" || e.origin.lastRequest().Method != http.MethodGet {
		t.Errorf("Result %+v, Content-Length %q, origin saw %s", a.res, a.header.Get("Content-Length"), e.origin.lastRequest().Method)
	}
	e.get("/h").want(t, 200, "v2-longer", StatusHit)
}

// TestClientConditionalOnMissStores: on a miss the cache asks for the full
// response, stores it, and answers the client's matching conditional with
// a 304 itself.
func TestClientConditionalOnMissStores(t *testing.T) {
	e := newEnv(t, respond(200, "page", "Cache-Control", "max-age=60", "ETag", `"p"`, "Content-Type", "text/plain"))
	a := e.get("/c", "If-None-Match", `"p"`)
	a.want(t, http.StatusNotModified, "", StatusMiss)
	a.wantCacheStatus(t, "sturdy; fwd=uri-miss; fwd-status=200; stored")
	if !a.res.Stored || a.header.Get("Content-Type") != "" || a.header.Get("ETag") != `"p"` {
		t.Errorf("Result %+v, header %v", a.res, a.header)
	}
	if got := e.origin.lastRequest().Header.Get("If-None-Match"); got != "" {
		t.Errorf("the client's conditional reached the origin: %q", got)
	}
	e.get("/c").want(t, 200, "page", StatusHit)
}

// TestStoredAnswerIsACopy: the header of an answer from the store can be
// changed by the caller without reaching the store, and the stored
// response's own Cache-Status and Age are not kept.
func TestStoredAnswerIsACopy(t *testing.T) {
	e := newEnv(t, respond(200, "x", "Cache-Control", "max-age=60", "Cache-Status", "edge; hit"))
	e.get("/copy")
	_, resp, res := e.serveDirect(fetcher(t, e.origin.srv.URL), http.MethodGet, "/copy")
	if res.Status != StatusHit || resp.StatusCode != 200 || resp.ContentLength != 1 {
		t.Fatalf("%s %d %d", res.Status, resp.StatusCode, resp.ContentLength)
	}
	resp.Header["Cache-Control"][0] = "changed"
	resp.Header.Set("X-Added", "1")
	resp.Body.Close()
	a := e.get("/copy")
	if a.header.Get("Cache-Control") != "max-age=60" || a.header.Get("X-Added") != "" {
		t.Errorf("the store was changed through an answer: %v", a.header)
	}
	a.wantCacheStatus(t, "edge; hit, sturdy; hit; ttl=60")
}

// TestHeadAfterMismatched304StoresNothing: a HEAD whose revalidation got a
// 304 about another representation is sent again as a HEAD; its empty body
// must not become the stored page.
func TestHeadAfterMismatched304StoresNothing(t *testing.T) {
	e := newEnv(t, respond(200, "old", "Cache-Control", "max-age=10", "ETag", `"old"`))
	e.get("/m")
	e.origin.set(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") != "" {
			w.Header().Set("ETag", `"other"`)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		respond(200, "new", "Cache-Control", "max-age=10", "ETag", `"new"`)(w, r)
	})
	e.clock.Advance(11 * time.Second)
	a := e.do(http.MethodHead, "/m")
	a.want(t, 200, "", StatusMiss)
	if m := e.origin.lastRequest().Method; m != http.MethodHead || a.res.Stored {
		t.Errorf("origin saw %s, Result %+v", m, a.res)
	}
	e.get("/m").want(t, 200, "new", StatusMiss)
	e.get("/m").want(t, 200, "new", StatusHit)
}

func TestStatusLine(t *testing.T) {
	for _, code := range []int{200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501, 302, 418} {
		if got, want := statusLine(code), fmt.Sprintf("%d %s", code, http.StatusText(code)); got != want {
			t.Errorf("statusLine(%d) = %q, want %q", code, got, want)
		}
	}
}
