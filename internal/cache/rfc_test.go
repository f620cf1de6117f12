package cache

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// RFC 9111 behaviour through a real loopback origin and frontend.

func TestFreshHitAndMiss(t *testing.T) {
	e := newEnv(t, respond(200, "hello", "Cache-Control", "max-age=60"))
	a := e.get("/a")
	a.want(t, 200, "hello", StatusMiss)
	a.wantCacheStatus(t, "sturdy; fwd=uri-miss; fwd-status=200; stored")
	if !a.res.Stored {
		t.Error("Result.Stored = false")
	}

	e.clock.Advance(18 * time.Second)
	a = e.get("/a")
	a.want(t, 200, "hello", StatusHit)
	a.wantCacheStatus(t, "sturdy; hit; ttl=42")
	if got := a.header.Get("Age"); got != "18" {
		t.Errorf("Age = %q, want 18", got)
	}
	if n := e.origin.hits.Load(); n != 1 {
		t.Errorf("origin hits = %d, want 1", n)
	}

	e.clock.Advance(43 * time.Second)
	e.get("/a").want(t, 200, "hello", StatusMiss)
	if n := e.origin.hits.Load(); n != 2 {
		t.Errorf("origin hits = %d, want 2", n)
	}
}

// notStoredCases are responses (or requests) that must never be stored.
var notStoredCases = []struct {
	name   string
	hdr    []string // response headers
	reqHdr []string
	detail string
}{
	{"response no-store", []string{"Cache-Control", "max-age=60, no-store"}, nil, "no-store"},
	{"request no-store", []string{"Cache-Control", "max-age=60"}, []string{"Cache-Control", "no-store"}, "no-store"},
	{"private", []string{"Cache-Control", "private, max-age=60"}, nil, "private"},
	{"qualified private", []string{"Cache-Control", `max-age=60, private="Set-Cookie"`}, nil, "private"},
	{"set-cookie", []string{"Cache-Control", "public, max-age=60", "Set-Cookie", "s=1"}, nil, "set-cookie"},
	{"vary star", []string{"Cache-Control", "max-age=60", "Vary", "*"}, nil, "vary-star"},
	{"no freshness, no validator", nil, nil, "no-freshness"},
	{"no-cache without validator", []string{"Cache-Control", "no-cache, max-age=60"}, nil, "no-freshness"},
	{"302 without explicit freshness", []string{"Location", "/x", "ETag", `"a"`}, nil, "status"},
}

func TestNotStored(t *testing.T) {
	for _, tc := range notStoredCases {
		t.Run(tc.name, func(t *testing.T) {
			status := 200
			if tc.detail == "status" {
				status = 302
			}
			e := newEnv(t, respond(status, "x", tc.hdr...))
			for range 2 {
				a := e.get("/p", tc.reqHdr...)
				a.want(t, status, "x", StatusMiss)
				a.wantCacheStatus(t, fmt.Sprintf("sturdy; fwd=uri-miss; fwd-status=%d; detail=%s", status, tc.detail))
			}
			if n := e.origin.hits.Load(); n != 2 {
				t.Errorf("origin hits = %d, want 2", n)
			}
		})
	}
}

func TestSMaxAgeOverMaxAgeOverExpires(t *testing.T) {
	clock := newClock()
	for _, tc := range []struct {
		name     string
		hdr      []string
		lifetime time.Duration
	}{
		{"s-maxage wins", []string{"Cache-Control", "max-age=10, s-maxage=100", "Expires", clock.Now().Add(time.Hour).Format(http.TimeFormat)}, 100 * time.Second},
		{"max-age over Expires", []string{"Cache-Control", "max-age=30", "Expires", clock.Now().Add(time.Hour).Format(http.TimeFormat)}, 30 * time.Second},
		{"Expires minus Date", []string{"Expires", clock.Now().Add(50 * time.Second).Format(http.TimeFormat)}, 50 * time.Second},
		{"invalid Expires is expired", []string{"Expires", "0", "ETag", `"e"`}, 0},
		{"heuristic: public + Last-Modified, 10%", []string{"Cache-Control", "public", "Last-Modified", clock.Now().Add(-1000 * time.Second).Format(http.TimeFormat)}, 100 * time.Second},
		{"heuristic capped at a day", []string{"Cache-Control", "public", "Last-Modified", clock.Now().Add(-1000 * 24 * time.Hour).Format(http.TimeFormat)}, 24 * time.Hour},
		{"no heuristic without public", []string{"Last-Modified", clock.Now().Add(-1000 * time.Second).Format(http.TimeFormat)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, respond(200, "x", tc.hdr...))
			e.get("/p").want(t, 200, "x", StatusMiss)
			if tc.lifetime > 0 {
				e.clock.Advance(tc.lifetime - time.Second)
				e.get("/p").want(t, 200, "x", StatusHit)
				e.clock.Advance(time.Second)
			}
			if a := e.get("/p"); a.res.Status == StatusHit {
				t.Errorf("still a hit at its lifetime %v: %q", tc.lifetime, a.header.Get("Cache-Status"))
			}
		})
	}
}

func TestVary(t *testing.T) {
	e := newEnv(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=60")
		w.Header().Set("Vary", "Accept-Encoding, Accept-Language")
		fmt.Fprintf(w, "enc=%s lang=%s", r.Header.Get("Accept-Encoding"), r.Header.Get("Accept-Language"))
	})
	e.get("/v", "Accept-Encoding", "gzip, br").wantCacheStatus(t, "sturdy; fwd=uri-miss; fwd-status=200; stored")
	a := e.get("/v", "Accept-Encoding", "zstd")
	a.want(t, 200, "enc=zstd lang=", StatusMiss)
	a.wantCacheStatus(t, "sturdy; fwd=vary-miss; fwd-status=200; stored")

	// Normalised: case of Accept-Encoding tokens and whitespace do not matter.
	e.get("/v", "Accept-Encoding", "GZIP,br").want(t, 200, "enc=gzip, br lang=", StatusHit)
	e.get("/v", "Accept-Encoding", "zstd").want(t, 200, "enc=zstd lang=", StatusHit)
	// A header named by Vary and present differs from absent.
	e.get("/v", "Accept-Encoding", "zstd", "Accept-Language", "fr").want(t, 200, "enc=zstd lang=fr", StatusMiss)
	if n := e.origin.hits.Load(); n != 3 {
		t.Errorf("origin hits = %d, want 3", n)
	}
}

func TestRevalidateETag(t *testing.T) {
	e := newEnv(t, respond(200, "v1", "Cache-Control", "max-age=10", "ETag", `"v1"`, "X-Gen", "1"))
	e.get("/r").want(t, 200, "v1", StatusMiss)
	e.origin.set(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.Header().Set("Cache-Control", "max-age=20")
			w.Header().Set("X-Gen", "2")
			w.WriteHeader(http.StatusNotModified)
			return
		}
		respond(200, "v2", "ETag", `"v2"`)(w, r)
	})

	e.clock.Advance(11 * time.Second)
	a := e.get("/r")
	a.want(t, 200, "v1", StatusRevalidated)
	a.wantCacheStatus(t, "sturdy; fwd=stale; fwd-status=304; ttl=20")
	if got := e.origin.lastRequest().Header.Get("If-None-Match"); got != `"v1"` {
		t.Errorf("revalidation sent If-None-Match %q", got)
	}
	if a.header.Get("X-Gen") != "2" || a.header.Get("Age") != "0" {
		t.Errorf("304 did not refresh headers: X-Gen=%q Age=%q", a.header.Get("X-Gen"), a.header.Get("Age"))
	}

	// The refreshed entry uses the 304's max-age=20.
	e.clock.Advance(15 * time.Second)
	a = e.get("/r")
	a.want(t, 200, "v1", StatusHit)
	if a.header.Get("X-Gen") != "2" {
		t.Errorf("stored headers not refreshed: X-Gen=%q", a.header.Get("X-Gen"))
	}

	// A client's own conditional that matches gets a 304 from the cache.
	a = e.get("/r", "If-None-Match", `"x", W/"v1"`)
	a.want(t, http.StatusNotModified, "", StatusHit)
	if a.header.Get("ETag") != `"v1"` || a.header.Get("Content-Length") != "" {
		t.Errorf("304 headers: %v", a.header)
	}
	// And a client conditional on a stale entry: revalidated, then 304.
	e.clock.Advance(10 * time.Second)
	a = e.get("/r", "If-None-Match", `"v1"`)
	a.want(t, http.StatusNotModified, "", StatusRevalidated)
	if n := e.origin.hits.Load(); n != 3 {
		t.Errorf("origin hits = %d, want 3", n)
	}
}

func TestRevalidateLastModified(t *testing.T) {
	clock := newClock()
	lm := clock.Now().Add(-time.Hour).Format(http.TimeFormat)
	e := newEnv(t, respond(200, "page", "Cache-Control", "max-age=10", "Last-Modified", lm))
	e.get("/lm").want(t, 200, "page", StatusMiss)
	e.origin.set(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-Modified-Since") == lm {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		respond(200, "new", "Cache-Control", "max-age=10")(w, r)
	})
	e.clock.Advance(11 * time.Second)
	e.get("/lm").want(t, 200, "page", StatusRevalidated)

	// A client's If-Modified-Since at or after Last-Modified gets a 304.
	e.get("/lm", "If-Modified-Since", lm).want(t, http.StatusNotModified, "", StatusHit)

	// A changed resource (200 to the conditional request) replaces the copy.
	e.origin.set(respond(200, "new", "Cache-Control", "max-age=10"))
	e.clock.Advance(11 * time.Second)
	a := e.get("/lm")
	a.want(t, 200, "new", StatusMiss)
	a.wantCacheStatus(t, "sturdy; fwd=stale; fwd-status=200; stored")
	e.get("/lm").want(t, 200, "new", StatusHit)
}

func TestAgeArithmetic(t *testing.T) {
	for _, tc := range []struct {
		name       string
		dateOffset time.Duration // origin's Date relative to the request time
		age        string        // origin's Age header
		delay      time.Duration // response delay (origin advances the clock)
		resident   time.Duration
		wantAge    string
	}{
		// corrected_age_value = 20 + 2 beats apparent_age = 2 - (-5) = 7.
		{"age value plus delay", -5 * time.Second, "20", 2 * time.Second, 10 * time.Second, "32"},
		// apparent_age = 2 + 50 beats corrected_age_value = 0 + 2.
		{"apparent age", -50 * time.Second, "", 2 * time.Second, 10 * time.Second, "62"},
		// A Date in the future gives apparent age 0, not a negative one.
		{"clock skew", time.Hour, "", 0, 7 * time.Second, "7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e *env
			e = newEnv(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Date", e.clock.Now().Add(tc.dateOffset).Format(http.TimeFormat))
				if tc.age != "" {
					w.Header().Set("Age", tc.age)
				}
				e.clock.Advance(tc.delay)
				respond(200, "x", "Cache-Control", "max-age=100")(w, r)
			})
			e.get("/age")
			e.clock.Advance(tc.resident)
			a := e.get("/age")
			a.want(t, 200, "x", StatusHit)
			if got := a.header.Get("Age"); got != tc.wantAge {
				t.Errorf("Age = %s, want %s", got, tc.wantAge)
			}
		})
	}
}

func TestHeadFromStoredGet(t *testing.T) {
	e := newEnv(t, respond(200, "body", "Cache-Control", "max-age=60"))
	// A HEAD with nothing stored goes through as a HEAD and stores nothing.
	a := e.do(http.MethodHead, "/h")
	a.want(t, 200, "", StatusMiss)
	if m := e.origin.lastRequest().Method; m != http.MethodHead {
		t.Errorf("origin saw %s", m)
	}
	e.get("/h").want(t, 200, "body", StatusMiss)
	a = e.do(http.MethodHead, "/h")
	a.want(t, 200, "", StatusHit)
	if a.header.Get("Content-Length") != "4" {
		t.Errorf("HEAD Content-Length = %q", a.header.Get("Content-Length"))
	}
	if n := e.origin.hits.Load(); n != 2 {
		t.Errorf("origin hits = %d, want 2", n)
	}
}

func TestRequestBypass(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy Policy
		path   string
		hdr    []string
		resp   []string
		stored bool
		detail string
	}{
		{"authorization", Policy{}, "/p", []string{"Authorization", "Bearer x"}, []string{"Cache-Control", "public, max-age=60"}, false, "authorization"},
		{"authorization allowed, public", Policy{CacheAuthorized: true}, "/p", []string{"Authorization", "Bearer x"}, []string{"Cache-Control", "public, max-age=60"}, true, ""},
		{"authorization allowed, not public", Policy{CacheAuthorized: true}, "/p", []string{"Authorization", "Bearer x"}, []string{"Cache-Control", "max-age=60"}, false, ""},
		{"cookie", Policy{}, "/p", []string{"Cookie", "s=1"}, []string{"Cache-Control", "max-age=60"}, false, "cookie"},
		{"cookie ignored", Policy{IgnoreCookies: true}, "/p", []string{"Cookie", "s=1"}, []string{"Cache-Control", "max-age=60"}, true, ""},
		{"healthz", Policy{}, "/healthz", nil, []string{"Cache-Control", "max-age=60"}, false, "path"},
		{"readyz with query", Policy{}, "/readyz?full=1", nil, []string{"Cache-Control", "max-age=60"}, false, "path"},
		{"custom bypass path", Policy{BypassPaths: []string{"/live"}}, "/live", nil, []string{"Cache-Control", "max-age=60"}, false, "path"},
		{"custom list replaces default", Policy{BypassPaths: []string{"/live"}}, "/healthz", nil, []string{"Cache-Control", "max-age=60"}, true, ""},
		{"range", Policy{}, "/p", []string{"Range", "bytes=0-1"}, []string{"Cache-Control", "max-age=60"}, false, "range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, respond(200, "x", tc.resp...))
			tc.policy.Route = "r"
			e.policy = &tc.policy
			first := e.get(tc.path, tc.hdr...)
			second := e.get(tc.path, tc.hdr...)
			if tc.detail != "" {
				first.want(t, 200, "x", StatusBypass)
				first.wantCacheStatus(t, "sturdy; fwd=bypass; fwd-status=200; detail="+tc.detail)
			}
			if got := second.res.Status == StatusHit; got != tc.stored {
				t.Errorf("second answer %s (%q), want hit=%v", second.res.Status, second.header.Get("Cache-Status"), tc.stored)
			}
		})
	}
}

func TestUnsafeMethodInvalidates(t *testing.T) {
	e := newEnv(t, respond(200, "x", "Cache-Control", "max-age=60"))
	e.get("/doc")
	e.get("/doc").want(t, 200, "x", StatusHit)
	e.do(http.MethodPost, "/doc").want(t, 200, "x", StatusBypass)
	e.get("/doc").want(t, 200, "x", StatusMiss)
}

func TestVaryInvalidationOrphansVariants(t *testing.T) {
	e := newEnv(t, respond(200, "x", "Cache-Control", "max-age=60", "Vary", "Accept-Language"))
	e.get("/d", "Accept-Language", "en")
	e.get("/d", "Accept-Language", "fr")
	e.do(http.MethodDelete, "/d")
	e.get("/d", "Accept-Language", "en").want(t, 200, "x", StatusMiss)
	// The fr variant belonged to the invalidated marker: not served again.
	e.get("/d", "Accept-Language", "fr").want(t, 200, "x", StatusMiss)
}

func TestClientNoCacheRevalidates(t *testing.T) {
	e := newEnv(t, respond(200, "x", "Cache-Control", "max-age=60", "ETag", `"1"`))
	e.get("/n")
	e.origin.set(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotModified) })
	a := e.get("/n", "Cache-Control", "no-cache")
	a.want(t, 200, "x", StatusRevalidated)
	a.wantCacheStatus(t, "sturdy; fwd=request; fwd-status=304; ttl=60")
	a = e.get("/n", "Pragma", "no-cache")
	a.want(t, 200, "x", StatusRevalidated)
}

func TestCacheStatusAppendsToUpstream(t *testing.T) {
	e := newEnv(t, respond(200, "x", "Cache-Control", "max-age=60", "Cache-Status", "edge-origin; hit"))
	e.get("/cs").wantCacheStatus(t, "edge-origin; hit, sturdy; fwd=uri-miss; fwd-status=200; stored")
	e.get("/cs").wantCacheStatus(t, "edge-origin; hit, sturdy; hit; ttl=60")
}

// TestMismatched304: a 304 naming another ETag is not about our copy; the
// cache drops it and asks again without validators.
func TestMismatched304(t *testing.T) {
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
	e.get("/m").want(t, 200, "new", StatusMiss)
	e.get("/m").want(t, 200, "new", StatusHit)
	if n := e.origin.hits.Load(); n != 3 {
		t.Errorf("origin hits = %d, want 3", n)
	}
}
