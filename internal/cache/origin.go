package cache

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"
)

// miss describes a request that has to ask the origin.
type miss struct {
	key, primary string
	stale        *entry // stored response to revalidate, nil if none
	reqCC        directives
	fwd          string  // RFC 9211 fwd value
	f            *flight // the flight this request leads, nil if not collapsed
}

// forward fetches from the origin for a miss or a revalidation, and answers:
// the revalidated stored response on a matching 304, a stale copy if the
// origin failed within the stale-if-error bound, or the origin's response,
// whose body is stored on its way to the client if it may be.
func (c *Cache) forward(r *http.Request, p *Policy, rs *routeState, fetch Fetch, m *miss) (*http.Response, Result) {
	// lead is published to followers on return, unless published earlier or
	// handed to the body's tee (which then clears m.f).
	var lead flightResult
	defer func() { c.finish(m.key, m.f, lead) }()

	out := outgoing(r, r.Context(), m.stale)
	requestTime := c.now()
	resp, err := fetch(out)
	responseTime := c.now()
	rs.originRequests.Add(1)
	if err == nil && resp.Body == nil {
		resp.Body = http.NoBody
	}

	if err != nil || p.failStatus(resp.StatusCode) {
		return c.originFailed(r, p, rs, m, resp, err, &lead)
	}
	c.originSucceeded(rs, p.Route, resp.StatusCode)

	if resp.StatusCode == http.StatusNotModified && m.stale != nil {
		if !validatorMatches(m.stale, resp.Header) {
			// The 304 is about a representation we do not hold (RFC 9111
			// 4.3.4): drop ours and ask again without validators.
			drain(resp)
			c.store.invalidate(m.key)
			m.stale = nil
			if r.Method == http.MethodHead {
				// Without a copy to revalidate the request stays a HEAD,
				// whose empty body must not be stored: pass it through.
				return c.passThrough(r, p, rs, fetch, m.fwd, "", StatusMiss)
			}
			return c.forward(r, p, rs, fetch, m)
		}
		drain(resp)
		ne := m.stale.refreshed(out, resp, requestTime, responseTime)
		if ne.cc.noStore || ne.cc.private {
			c.store.invalidate(m.key)
		} else {
			c.store.put(m.primary, ne)
			lead = flightResult{ent: ne, status: StatusRevalidated, originStatus: http.StatusNotModified}
		}
		return fromOrigin(storedResponse(r, ne, ne.age(c.now()), cacheStatus{fwd: m.fwd, fwdStatus: http.StatusNotModified}), resp.Body),
			Result{Status: StatusRevalidated, OriginStatus: http.StatusNotModified}
	}
	return c.deliver(r, p, rs, m, resp, requestTime, responseTime, &lead)
}

// originFailed answers a failed fetch: with the stale copy when
// stale-if-error allows it (counted as a hidden error, labelled, and part of
// the route's masking episode), else with the origin's own error response,
// or no response at all for a fetch error (the proxy answers 502/504).
func (c *Cache) originFailed(r *http.Request, p *Policy, rs *routeState, m *miss,
	resp *http.Response, err error, lead *flightResult) (*http.Response, Result) {
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	if err != nil && r.Context().Err() != nil {
		// The client left; that is not the origin's failure.
		return nil, Result{Status: StatusMiss, OriginErr: err}
	}
	rs.originErrors.Add(1)
	if m.stale != nil {
		now := c.now()
		if age := m.stale.age(now); staleIfErrorOK(m.stale, age, p, false) {
			drain(resp)
			rs.errorsHidden.Add(1)
			*lead = flightResult{staleOK: true, status: StatusStale, originStatus: status}
			c.staleServed(rs, p.Route, evidence(r, status, err))
			sr := storedResponse(r, m.stale, age, cacheStatus{fwd: m.fwd, fwdStatus: status, detail: "stale-if-error"})
			if resp != nil {
				fromOrigin(sr, resp.Body)
			}
			return sr, Result{Status: StatusStale, Stale: true, OriginStatus: status, OriginErr: err, OriginError: true}
		}
	}
	rs.episodeFailure()
	if err != nil {
		return nil, Result{Status: StatusMiss, OriginErr: err, OriginError: true}
	}
	m.stale = nil // keep the stored copy: a later success replaces it, a later failure may still use it
	resp, res := c.deliver(r, p, rs, m, resp, time.Time{}, time.Time{}, lead)
	res.OriginError = true
	return resp, res
}

func evidence(r *http.Request, status int, err error) string {
	if err != nil {
		return fmt.Sprintf("%s %s: origin error: %v", r.Method, r.URL.Path, err)
	}
	return fmt.Sprintf("%s %s: origin status %d", r.Method, r.URL.Path, status)
}

// deliver returns the origin's response for the client, labelled. If it may
// be stored, its body is teed into the store on the way to the client, or,
// when the client gets no body (HEAD, or a 304 to its own conditional),
// read here and stored before returning.
func (c *Cache) deliver(r *http.Request, p *Policy, rs *routeState, m *miss,
	resp *http.Response, requestTime, responseTime time.Time, lead *flightResult) (*http.Response, Result) {
	res := Result{Status: StatusMiss, OriginStatus: resp.StatusCode}
	cc := parseDirectives(resp.Header["Cache-Control"])
	reason := notStorable(r, m.reqCC, resp, &cc, p, responseTime)
	if reason == "" && resp.ContentLength > c.maxObject {
		reason = "too-large"
	}
	if reason != "" {
		if m.stale != nil {
			c.store.invalidate(m.key) // superseded by a response we cannot keep
		}
		// Followers need not wait for the body: they will fetch themselves.
		c.finish(m.key, m.f, flightResult{})
	}
	cs := cacheStatus{fwd: m.fwd, fwdStatus: resp.StatusCode, detail: reason}
	// "stored" is only promised when the length is known to fit; a body of
	// unknown length may still turn out too large.
	cs.stored = reason == "" && resp.ContentLength >= 0
	upstreamCS := resp.Header["Cache-Status"]

	notModified := resp.StatusCode == http.StatusOK && conditionalMatches(r, resp.Header)
	if notModified || r.Method == http.MethodHead {
		if reason == "" {
			if e := c.readAndStore(r, rs, m, resp, upstreamCS, requestTime, responseTime); e != nil {
				*lead = flightResult{ent: e, status: StatusMiss, originStatus: resp.StatusCode}
				res.Stored = true
			}
		}
		resp.Body.Close()
		resp.Body, resp.Trailer = &memBody{origin: resp.Body}, nil
		if notModified {
			trimFor304(resp.Header)
			resp.Status, resp.StatusCode, resp.ContentLength = "304 Not Modified", http.StatusNotModified, 0
		}
		setCacheStatus(resp.Header, &cs)
		return resp, res
	}
	setCacheStatus(resp.Header, &cs)
	t := &tee{rc: resp.Body, c: c, r: r, rs: rs}
	if reason == "" {
		t.keep, t.resp, t.upstreamCS = true, resp, upstreamCS
		t.key, t.primary, t.stale, t.f = m.key, m.primary, m.stale, m.f
		t.requestTime, t.responseTime = requestTime, responseTime
		if resp.ContentLength > 0 {
			t.buf = make([]byte, 0, resp.ContentLength)
		}
		m.f = nil // the tee publishes the flight when the body has ended
	}
	resp.Body = t
	return resp, res
}

// readAndStore reads a storable body the client does not get, up to
// MaxObjectBytes, and stores it. It returns nil when nothing was stored: the
// body proved too large (the copy it supersedes is dropped) or broke
// (counted as an origin error unless the client left).
func (c *Cache) readAndStore(r *http.Request, rs *routeState, m *miss, resp *http.Response,
	upstreamCS []string, requestTime, responseTime time.Time) *entry {
	body, tooLarge, err := c.readAtMost(resp)
	switch {
	case tooLarge:
		if m.stale != nil {
			c.store.invalidate(m.key)
		}
		return nil
	case err != nil:
		if r.Context().Err() == nil {
			rs.originErrors.Add(1)
			rs.episodeFailure()
		}
		return nil
	case len(resp.Trailer) > 0:
		if m.stale != nil {
			c.store.invalidate(m.key)
		}
		return nil
	}
	return c.storeOrigin(r, rs, m.primary, resp, body, upstreamCS, requestTime, responseTime)
}

// storeOrigin stores the origin's response with its body and returns the
// entry. upstreamCS is the Cache-Status the origin sent: the client's has
// ours appended, which the store must not keep.
func (c *Cache) storeOrigin(r *http.Request, rs *routeState, primary string, resp *http.Response, body []byte,
	upstreamCS []string, requestTime, responseTime time.Time) *entry {
	e := newEntry(r, resp, body, requestTime, responseTime)
	if upstreamCS == nil {
		delete(e.header, "Cache-Status")
	} else {
		e.header["Cache-Status"] = slices.Clone(upstreamCS)
	}
	c.store.put(primary, e)
	rs.stored.Add(1)
	return e
}

// outgoing builds the request sent to the origin for r: the client's own
// conditionals are removed (the cache evaluates them against what it gets,
// so that it receives a full response it can store) and, when revalidating,
// the stored validators are added. A HEAD that revalidates a stored GET
// becomes a GET, so that a changed response can be stored.
func outgoing(r *http.Request, ctx context.Context, stale *entry) *http.Request {
	out := r.Clone(ctx)
	out.Header.Del("If-None-Match")
	out.Header.Del("If-Modified-Since")
	if stale != nil {
		if r.Method == http.MethodHead {
			out.Method = http.MethodGet
		}
		if stale.etag != "" {
			out.Header.Set("If-None-Match", stale.etag)
		}
		if stale.lastModified != "" {
			out.Header.Set("If-Modified-Since", stale.lastModified)
		}
	}
	return out
}

// validatorMatches reports whether a 304 is about e (RFC 9111 4.3.4): its
// ETag, if any, must match e's.
func validatorMatches(e *entry, h http.Header) bool {
	etag := h.Get("ETag")
	return etag == "" || e.etag == "" || weakEqual(etag, e.etag)
}

// drain discards a little of an unused body so the connection can be
// reused, then closes it.
func drain(resp *http.Response) {
	if resp == nil {
		return
	}
	io.CopyN(io.Discard, resp.Body, 4<<10) //nolint:errcheck // best effort
	resp.Body.Close()
}
