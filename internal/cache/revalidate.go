package cache

import (
	"context"
	"io"
	"net/http"
)

// revalidateInBackground refreshes e for stale-while-revalidate. At most one
// refresh per key runs at a time (it is registered as the key's flight, so
// requests that cannot take a stale answer wait for it rather than asking
// the origin again), at most MaxBackground run at all, and none after
// Close. When no slot is free the refresh is skipped: the next stale
// request will try again.
func (c *Cache) revalidateInBackground(r *http.Request, p *Policy, rs *routeState, fetch Fetch,
	key, primary string, e *entry, reqCC directives) {
	c.mu.Lock()
	if c.closed || c.flights[key] != nil {
		c.mu.Unlock()
		return
	}
	select {
	case c.bg <- struct{}{}:
	default:
		c.mu.Unlock()
		return
	}
	f := &flight{done: make(chan struct{})}
	c.flights[key] = f
	c.wg.Add(1)
	c.mu.Unlock()

	// The client's request ends with this call: clone it onto the cache's
	// own context, which Close cancels, with a deadline of its own.
	ctx, cancel := context.WithTimeout(c.ctx, c.bgTimeout)
	out := outgoing(r, ctx, e)
	out.Method = http.MethodGet
	out.Body = http.NoBody
	policy := *p
	go func() {
		defer c.wg.Done()
		defer func() { <-c.bg }()
		defer cancel()
		c.refresh(out, &policy, rs, fetch, key, primary, e, reqCC, f)
	}()
}

// refresh performs one background revalidation and updates the store: a
// matching 304 refreshes e, a storable response replaces it, anything else
// that is not an error removes it. A failure leaves e in place but stops
// stale-while-revalidate for it, so that the next request revalidates in the
// foreground where stale-if-error is bounded, counted and announced.
func (c *Cache) refresh(out *http.Request, p *Policy, rs *routeState, fetch Fetch,
	key, primary string, e *entry, reqCC directives, f *flight) {
	var lead flightResult
	defer func() { c.finish(key, f, lead) }()

	requestTime := c.now()
	resp, err := fetch(out)
	responseTime := c.now()
	rs.originRequests.Add(1)
	if err == nil && resp.Body == nil {
		resp.Body = http.NoBody
	}
	if err != nil || p.failStatus(resp.StatusCode) {
		drain(resp)
		if c.ctx.Err() != nil {
			return // closing, not the origin's fault
		}
		rs.originErrors.Add(1)
		rs.episodeFailure()
		e.revalidationFailed.Store(true)
		return
	}
	defer resp.Body.Close()
	c.originSucceeded(rs, p.Route, resp.StatusCode)

	if resp.StatusCode == http.StatusNotModified {
		if !validatorMatches(e, resp.Header) {
			c.store.invalidate(key)
			return
		}
		ne := e.refreshed(out, resp, requestTime, responseTime)
		if ne.cc.noStore || ne.cc.private {
			c.store.invalidate(key)
			return
		}
		c.store.put(primary, ne)
		lead = flightResult{ent: ne, status: StatusRevalidated, originStatus: resp.StatusCode}
		return
	}

	cc := parseDirectives(resp.Header["Cache-Control"])
	if notStorable(out, reqCC, resp, &cc, p, responseTime) != "" || resp.ContentLength > c.maxObject {
		c.store.invalidate(key)
		return
	}
	body, tooLarge, err := c.readAtMost(resp)
	switch {
	case tooLarge:
		c.store.invalidate(key) // superseded by a body we cannot keep
		return
	case err != nil:
		if c.ctx.Err() == nil {
			rs.originErrors.Add(1)
			rs.episodeFailure()
			e.revalidationFailed.Store(true)
		}
		return
	case len(resp.Trailer) > 0:
		c.store.invalidate(key) // trailers came, which the store cannot keep
		return
	}
	ne := newEntry(out, resp, body, requestTime, responseTime)
	c.store.put(primary, ne)
	rs.stored.Add(1)
	lead = flightResult{ent: ne, status: StatusMiss, originStatus: resp.StatusCode}
}

// readAtMost reads a whole body of at most MaxObjectBytes, stopping as soon
// as it proves larger.
func (c *Cache) readAtMost(resp *http.Response) (body []byte, tooLarge bool, err error) {
	limit := c.maxObject
	body = make([]byte, 0, max(0, min(resp.ContentLength, limit)))
	bp := c.bufs.Get().(*[]byte)
	defer c.bufs.Put(bp)
	buf := *bp
	for {
		n, err := resp.Body.Read(buf)
		if int64(len(body)+n) > limit {
			return nil, true, nil
		}
		body = append(body, buf[:n]...)
		if err == io.EOF {
			return body, false, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
}
