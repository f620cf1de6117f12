package cache

import (
	"net/http"
	"testing"
	"time"
)

// dirs builds the expected directives: everything absent, then set.
func dirs(set func(d *directives)) directives {
	d := parseDirectives(nil)
	if set != nil {
		set(&d)
	}
	return d
}

var directiveCases = []struct {
	in   []string
	want directives
}{
	{nil, dirs(nil)},
	{[]string{"max-age=60, s-maxage=120"}, dirs(func(d *directives) { d.maxAge, d.sMaxAge = 60*time.Second, 120*time.Second })},
	{[]string{"MAX-AGE=5", "max-age=99"}, dirs(func(d *directives) { d.maxAge = 5 * time.Second })}, // first occurrence wins
	{[]string{`max-age="30"`}, dirs(func(d *directives) { d.maxAge = 30 * time.Second })},
	{[]string{"max-age=abc"}, dirs(func(d *directives) { d.maxAge = 0 })}, // invalid freshness: stale
	{[]string{"stale-if-error=x"}, dirs(nil)},                             // invalid grant: none
	{[]string{"max-age=99999999999"}, dirs(func(d *directives) { d.maxAge = maxDelta })},
	{[]string{`private="Set-Cookie, X", no-cache="A,B", public`},
		dirs(func(d *directives) { d.private, d.noCache, d.public = true, true, true })},
	{[]string{"no-store,must-revalidate , proxy-revalidate"},
		dirs(func(d *directives) { d.noStore, d.mustRevalidate, d.proxyRevalidate = true, true, true })},
	{[]string{"public, max-age=120, stale-while-revalidate=60, stale-if-error=86400"}, dirs(func(d *directives) {
		d.public, d.maxAge, d.staleWhileRevalidate, d.staleIfError = true, 120*time.Second, 60*time.Second, 86400*time.Second
	})},
	{[]string{`ext="a,b\"c", min-fresh=7`}, dirs(func(d *directives) { d.minFresh = 7 * time.Second })},
	{[]string{",,, ,"}, dirs(nil)},
}

func TestParseDirectives(t *testing.T) {
	for _, tc := range directiveCases {
		if got := parseDirectives(tc.in); got != tc.want {
			t.Errorf("parseDirectives(%q)\n got %+v\nwant %+v", tc.in, got, tc.want)
		}
	}
}

func TestRequestPragma(t *testing.T) {
	if !requestDirectives(http.Header{"Pragma": {"no-cache"}}).noCache {
		t.Error("Pragma: no-cache ignored")
	}
	if requestDirectives(http.Header{"Pragma": {"no-cache"}, "Cache-Control": {"max-age=5"}}).noCache {
		t.Error("Pragma used although Cache-Control is present")
	}
}

func TestInitialAge(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		date, req, resp time.Time
		age, want       time.Duration
	}{
		{t0, t0, t0, 0, 0},
		{t0.Add(-10 * time.Second), t0, t0.Add(time.Second), 0, 11 * time.Second}, // apparent
		{t0, t0, t0.Add(3 * time.Second), 30 * time.Second, 33 * time.Second},     // age + delay
		{t0.Add(time.Hour), t0, t0.Add(time.Second), 0, time.Second},              // future Date
		{t0.Add(-time.Minute), t0, t0, 10 * time.Second, time.Minute},             // apparent wins
		{t0, t0.Add(time.Second), t0, 5 * time.Second, 5 * time.Second},           // clock went back: no negative delay
	} {
		if got := initialAge(tc.date, tc.req, tc.resp, tc.age); got != tc.want {
			t.Errorf("initialAge(%v) = %v, want %v", tc, got, tc.want)
		}
	}
}

func TestCacheStatusString(t *testing.T) {
	for _, tc := range []struct {
		s    cacheStatus
		want string
	}{
		{cacheStatus{hit: true, ttl: 42, hasTTL: true}, "sturdy; hit; ttl=42"},
		{cacheStatus{fwd: fwdURIMiss, fwdStatus: 200, stored: true}, "sturdy; fwd=uri-miss; fwd-status=200; stored"},
		{cacheStatus{fwd: fwdStale, fwdStatus: 502, ttl: -3, hasTTL: true, detail: "stale-if-error"},
			"sturdy; fwd=stale; fwd-status=502; ttl=-3; detail=stale-if-error"},
		{cacheStatus{fwd: fwdBypass, detail: `pool "a" empty`}, `sturdy; fwd=bypass; detail="pool \"a\" empty"`},
		{cacheStatus{fwd: fwdStale, detail: "9lives\x01"}, `sturdy; fwd=stale; detail="9lives"`},
	} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("got %s, want %s", got, tc.want)
		}
	}
}

func TestVaryValuesNormalised(t *testing.T) {
	names := []string{"Accept-Encoding", "X-Tenant"}
	a := varyValues(http.Header{"Accept-Encoding": {"GZIP ,  br"}, "X-Tenant": {"A"}}, names)
	b := varyValues(http.Header{"Accept-Encoding": {"gzip", "br"}, "X-Tenant": {"A"}}, names)
	c := varyValues(http.Header{"Accept-Encoding": {"gzip", "br"}, "X-Tenant": {"a"}}, names)
	d := varyValues(http.Header{"Accept-Encoding": {"gzip", "br"}, "X-Tenant": {""}}, names)
	e := varyValues(http.Header{"Accept-Encoding": {"gzip", "br"}}, names)
	if a != b || b == c || d == e {
		t.Errorf("normalisation: %q %q %q %q %q", a, b, c, d, e)
	}
	if n, star := varyNames(http.Header{"Vary": {"accept-encoding, X-Tenant", "Accept-Encoding"}}); star || len(n) != 2 {
		t.Errorf("varyNames = %v %v", n, star)
	}
}
