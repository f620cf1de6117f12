package cache

import (
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// heuristicCap bounds heuristic freshness (RFC 9111 4.2.2 suggests 10% of
// the time since Last-Modified; we never give more than a day).
const heuristicCap = 24 * time.Hour

// entry is a stored response, or a Vary marker. Everything but
// revalidationFailed is immutable once the entry is in the store: readers
// share it without locks, so a change means a new entry.
type entry struct {
	status int
	header http.Header // no Age (recomputed per answer); Date and Content-Length always set
	body   []byte

	responseTime time.Time     // when the response (or its last 304) arrived
	initialAge   time.Duration // corrected_initial_age, RFC 9111 4.2.3
	lifetime     time.Duration // freshness lifetime, 0 if it must always be revalidated
	cc           directives
	etag         string
	lastModified string

	// Vary: the normalised request header names (sorted) and the values of
	// the request that produced the response.
	varyNames  []string
	varyValues string

	// A marker stands at a URI's primary key when its responses vary; gen
	// tells its variants apart from those of older markers, so invalidating
	// the marker orphans every variant at once.
	marker bool
	gen    uint64

	weight uint32

	// revalidationFailed is set when a background revalidation failed:
	// from then on stale-while-revalidate no longer applies to this entry
	// and requests revalidate in the foreground, where stale-if-error and
	// its accounting take over. Side state, not content.
	revalidationFailed atomic.Bool
}

// age is current_age (RFC 9111 4.2.3).
func (e *entry) age(now time.Time) time.Duration {
	return e.initialAge + max(0, now.Sub(e.responseTime))
}

// staleness is how far past its freshness lifetime e is at age; negative
// while fresh.
func (e *entry) staleness(age time.Duration) time.Duration { return age - e.lifetime }

// initialAge implements RFC 9111 4.2.3:
//
//	apparent_age = max(0, response_time - date_value)
//	response_delay = response_time - request_time
//	corrected_age_value = age_value + response_delay
//	corrected_initial_age = max(apparent_age, corrected_age_value)
func initialAge(date, requestTime, responseTime time.Time, ageValue time.Duration) time.Duration {
	apparent := max(0, responseTime.Sub(date))
	corrected := ageValue + max(0, responseTime.Sub(requestTime))
	return max(apparent, corrected)
}

// ageValue reads an Age header; invalid or missing means 0.
func ageValue(h http.Header) time.Duration {
	v, ok := parseDelta(strings.TrimSpace(h.Get("Age")))
	if !ok {
		return 0
	}
	return v
}

// dateValue reads Date, or returns fallback when it is missing or invalid
// (RFC 9110 6.6.1: a recipient with a clock uses the time it received it).
func dateValue(h http.Header, fallback time.Time) time.Time {
	if t, err := http.ParseTime(h.Get("Date")); err == nil {
		return t
	}
	return fallback
}

// freshnessLifetime implements RFC 9111 4.2.1 for a shared cache:
// s-maxage, then max-age, then Expires minus Date. Heuristic freshness
// (4.2.2) is only given to responses that say public and carry
// Last-Modified: 10% of their age at Date, at most a day. Anything else gets
// 0, i.e. it is stored only if it can be revalidated, and every use
// revalidates it.
func freshnessLifetime(h http.Header, cc *directives, date time.Time) time.Duration {
	switch {
	case cc.noCache:
		return 0
	case cc.sMaxAge != absent:
		return cc.sMaxAge
	case cc.maxAge != absent:
		return cc.maxAge
	case len(h["Expires"]) > 0:
		exp, err := http.ParseTime(h.Get("Expires"))
		if err != nil {
			return 0 // an invalid Expires, e.g. "0", means already expired
		}
		return max(0, exp.Sub(date))
	case cc.public:
		lm, err := http.ParseTime(h.Get("Last-Modified"))
		if err != nil {
			return 0
		}
		return min(heuristicCap, max(0, date.Sub(lm))/10)
	}
	return 0
}

// hasExplicitFreshness reports whether the origin stated a lifetime.
func hasExplicitFreshness(h http.Header, cc *directives) bool {
	return cc.sMaxAge != absent || cc.maxAge != absent || len(h["Expires"]) > 0
}

// cacheableByDefault lists the statuses RFC 9110 15.1 calls heuristically
// cacheable, minus 206 (we never store partial content).
func cacheableByDefault(code int) bool {
	switch code {
	case 200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501:
		return true
	}
	return false
}

// notStorable returns why the response to r must not be stored, or "".
// The reason becomes the Cache-Status detail of the answer.
func notStorable(r *http.Request, reqCC directives, resp *http.Response, cc *directives, p *Policy, now time.Time) string {
	h := resp.Header
	switch {
	case reqCC.noStore || cc.noStore:
		return "no-store"
	case cc.private:
		return "private"
	case p.failStatus(resp.StatusCode):
		return "error-status"
	case resp.StatusCode == http.StatusPartialContent || resp.StatusCode < 200 ||
		resp.StatusCode == http.StatusNotModified:
		return "status"
	case !cacheableByDefault(resp.StatusCode) && !hasExplicitFreshness(h, cc):
		return "status"
	case len(h["Set-Cookie"]) > 0:
		// Conservative: a Set-Cookie response is someone's session.
		return "set-cookie"
	case len(r.Header["Authorization"]) > 0 && !cc.public && cc.sMaxAge == absent && !cc.mustRevalidate:
		return "authorization"
	case len(resp.Trailer) > 0:
		// The store keeps no trailers; such a response is passed through
		// with them rather than stored without them.
		return "trailers"
	}
	if _, star := varyNames(h); star {
		return "vary-star"
	}
	if freshnessLifetime(h, cc, dateValue(h, now)) == 0 && h.Get("ETag") == "" && h.Get("Last-Modified") == "" &&
		(cc.staleIfError == absent || cc.forbidsStale()) {
		// Never fresh, impossible to revalidate and never usable stale:
		// storing it would only cost memory.
		return "no-freshness"
	}
	return ""
}

// newEntry builds the stored form of resp. The header map is copied so that
// later changes by anyone else cannot reach the store.
func newEntry(r *http.Request, resp *http.Response, body []byte, requestTime, responseTime time.Time) *entry {
	h := resp.Header.Clone()
	age := ageValue(h)
	h.Del("Age")
	date := dateValue(h, responseTime)
	if h.Get("Date") == "" {
		h.Set("Date", responseTime.UTC().Format(http.TimeFormat))
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	cc := parseDirectives(h["Cache-Control"])
	e := &entry{
		status:       resp.StatusCode,
		header:       h,
		body:         body,
		responseTime: responseTime,
		initialAge:   initialAge(date, requestTime, responseTime, age),
		lifetime:     freshnessLifetime(h, &cc, date),
		cc:           cc,
		etag:         h.Get("ETag"),
		lastModified: h.Get("Last-Modified"),
	}
	e.varyNames, _ = varyNames(h)
	e.varyValues = varyValues(r.Header, e.varyNames)
	return e
}

// refreshed returns a copy of e updated by a 304 (RFC 9111 4.3.4): the 304's
// header fields replace the stored ones, except Content-Length, and the
// age bookkeeping restarts from the 304's timing.
func (e *entry) refreshed(r *http.Request, resp *http.Response, requestTime, responseTime time.Time) *entry {
	h := e.header.Clone()
	for k, vv := range resp.Header {
		switch k {
		case "Content-Length", "Age":
			continue
		}
		h[k] = append([]string(nil), vv...)
	}
	if resp.Header.Get("Date") == "" {
		h.Set("Date", responseTime.UTC().Format(http.TimeFormat))
	}
	synthetic := &http.Response{StatusCode: e.status, Header: h}
	ne := newEntry(r, synthetic, e.body, requestTime, responseTime)
	// The 304's own Age counts, not the one stored with the original.
	ne.initialAge = initialAge(dateValue(h, responseTime), requestTime, responseTime, ageValue(resp.Header))
	return ne
}

// weigh computes the entry's store weight: everything it keeps alive that
// grows with the response, plus a fixed allowance for the structs.
func weigh(key string, e *entry) uint32 {
	n := len(key) + len(e.body) + len(e.varyValues) + 256
	for k, vv := range e.header {
		for _, v := range vv {
			n += len(k) + len(v) + 16
		}
	}
	for _, v := range e.varyNames {
		n += len(v)
	}
	return uint32(min(n, 1<<32-1))
}
