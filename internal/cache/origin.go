package cache

import (
	"context"
	"fmt"
	"io"
	"net/http"
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
// streamed and (if cacheable) stored.
func (c *Cache) forward(w http.ResponseWriter, r *http.Request, p *Policy, rs *routeState, fetch Fetch, m *miss) Result {
	var lead flightResult // published to followers on return, unless published earlier
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
		return c.originFailed(w, r, p, rs, m, resp, err, &lead)
	}
	c.originSucceeded(rs, p.Route, resp.StatusCode)

	if resp.StatusCode == http.StatusNotModified && m.stale != nil {
		if !validatorMatches(m.stale, resp.Header) {
			// The 304 is about a representation we do not hold (RFC 9111
			// 4.3.4): drop ours and ask again without validators.
			drain(resp)
			c.store.invalidate(m.key)
			m.stale = nil
			return c.forward(w, r, p, rs, fetch, m)
		}
		drain(resp)
		ne := m.stale.refreshed(out, resp, requestTime, responseTime)
		if ne.cc.noStore || ne.cc.private {
			c.store.invalidate(m.key)
		} else {
			c.store.put(m.primary, ne)
			lead = flightResult{ent: ne, status: StatusRevalidated, originStatus: http.StatusNotModified}
		}
		c.writeStored(w, r, ne, ne.age(c.now()), cacheStatus{fwd: m.fwd, fwdStatus: http.StatusNotModified})
		return Result{Status: StatusRevalidated, OriginStatus: http.StatusNotModified}
	}
	return c.deliver(w, r, p, rs, m, resp, requestTime, responseTime, &lead)
}

// originFailed answers a failed fetch: with the stale copy when
// stale-if-error allows it (counted as a hidden error, labelled, and part of
// the route's masking episode), else with the origin's own error response,
// or nothing at all for a fetch error (the proxy writes its 502/504).
func (c *Cache) originFailed(w http.ResponseWriter, r *http.Request, p *Policy, rs *routeState, m *miss,
	resp *http.Response, err error, lead *flightResult) Result {
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	if err != nil && r.Context().Err() != nil {
		// The client left; that is not the origin's failure.
		return Result{Status: StatusMiss, OriginErr: err}
	}
	rs.originErrors.Add(1)
	if m.stale != nil {
		now := c.now()
		if age := m.stale.age(now); staleIfErrorOK(m.stale, age, p, false) {
			drain(resp)
			rs.errorsHidden.Add(1)
			*lead = flightResult{staleOK: true, status: StatusStale, originStatus: status}
			c.staleServed(rs, p.Route, evidence(r, status, err))
			c.writeStored(w, r, m.stale, age, cacheStatus{fwd: m.fwd, fwdStatus: status, detail: "stale-if-error"})
			return Result{Status: StatusStale, Stale: true, OriginStatus: status, OriginErr: err, OriginError: true}
		}
	}
	rs.episodeFailure()
	if err != nil {
		return Result{Status: StatusMiss, OriginErr: err, OriginError: true}
	}
	m.stale = nil // keep the stored copy: a later success replaces it, a later failure may still use it
	res := c.deliver(w, r, p, rs, m, resp, time.Time{}, time.Time{}, lead)
	res.OriginError = true
	return res
}

func evidence(r *http.Request, status int, err error) string {
	if err != nil {
		return fmt.Sprintf("%s %s: origin error: %v", r.Method, r.URL.Path, err)
	}
	return fmt.Sprintf("%s %s: origin status %d", r.Method, r.URL.Path, status)
}

// deliver streams the origin's response to the client and, if it may be
// stored, tees the body into memory and stores it at the end.
func (c *Cache) deliver(w http.ResponseWriter, r *http.Request, p *Policy, rs *routeState, m *miss,
	resp *http.Response, requestTime, responseTime time.Time, lead *flightResult) Result {
	defer resp.Body.Close()
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
	h := w.Header()
	for k, vv := range resp.Header {
		h[k] = vv
	}
	setCacheStatus(h, &cs)

	toClient := r.Method != http.MethodHead
	if resp.StatusCode == http.StatusOK && conditionalMatches(r, resp.Header) {
		trimFor304(h)
		w.WriteHeader(http.StatusNotModified)
		toClient = false
	} else {
		w.WriteHeader(resp.StatusCode)
	}
	if reason != "" && !toClient {
		return res
	}

	body, kept, complete := c.copyBody(w, r, rs, resp, toClient, reason == "")
	if reason != "" || !complete {
		return res // an interrupted body leaves the store as it was
	}
	if !kept {
		if m.stale != nil {
			c.store.invalidate(m.key) // superseded, and the new body did not fit
		}
		return res
	}
	e := newEntry(r, resp, body, requestTime, responseTime)
	c.store.put(m.primary, e)
	rs.stored.Add(1)
	*lead = flightResult{ent: e, status: StatusMiss, originStatus: resp.StatusCode}
	res.Stored = true
	return res
}

// copyBody streams resp's body to the client (if toClient) and, if keep,
// into a buffer of at most MaxObjectBytes, dropped as soon as the body
// proves larger. complete reports that the whole body was read and
// written; kept that body holds all of it. A body that breaks after the
// header went out aborts the response (see Serve).
func (c *Cache) copyBody(w http.ResponseWriter, r *http.Request, rs *routeState, resp *http.Response,
	toClient, keep bool) (body []byte, kept, complete bool) {
	if keep && resp.ContentLength > 0 {
		body = make([]byte, 0, resp.ContentLength)
	}
	// Bodies of unknown length may be streams (SSE, long polls): flush each
	// chunk instead of letting it sit in the server's buffer.
	var flush func() error
	if resp.ContentLength < 0 && toClient {
		flush = http.NewResponseController(w).Flush
	}
	bp := c.bufs.Get().(*[]byte)
	defer c.bufs.Put(bp)
	buf := *bp
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if keep {
				if int64(len(body)+n) > c.maxObject {
					keep, body = false, nil
				} else {
					body = append(body, buf[:n]...)
				}
			}
			if toClient {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return nil, false, false // the client left; its context ends the fetch
				}
				if flush != nil {
					flush() //nolint:errcheck // a failed flush shows up as a failed write
				}
			}
		}
		if rerr == io.EOF {
			return body, keep, true
		}
		if rerr != nil {
			if r.Context().Err() == nil {
				rs.originErrors.Add(1)
				rs.episodeFailure()
				if toClient {
					panic(http.ErrAbortHandler)
				}
			}
			return nil, false, false
		}
		if !keep && !toClient {
			return nil, false, true // too large for the store, and nobody to send it to
		}
	}
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
