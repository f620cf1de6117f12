package cache

import (
	"net/http"
)

// bypass passes a request that must not use the cache straight to the
// origin. A successful unsafe method invalidates what is stored for its
// URI (RFC 9111 4.4), so that a POST to a page is not followed by the old
// copy.
func (c *Cache) bypass(r *http.Request, p *Policy, rs *routeState, fetch Fetch, reason string) (*http.Response, Result) {
	resp, res := c.passThrough(r, p, rs, fetch, fwdBypass, reason, StatusBypass)
	if !safeMethod(r.Method) && res.OriginStatus >= 200 && res.OriginStatus < 400 {
		c.store.invalidate(primaryKey(r, p.Route))
	}
	return resp, res
}

func safeMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// passThrough forwards r unchanged and returns the origin's answer,
// labelled; nothing is stored. Origin failures still count, a body that
// breaks on its way to the client too.
func (c *Cache) passThrough(r *http.Request, p *Policy, rs *routeState, fetch Fetch,
	fwd, detail, status string) (*http.Response, Result) {
	resp, err := fetch(r)
	rs.originRequests.Add(1)
	if err != nil {
		if r.Context().Err() != nil {
			return nil, Result{Status: status, OriginErr: err}
		}
		rs.originErrors.Add(1)
		rs.episodeFailure()
		return nil, Result{Status: status, OriginErr: err, OriginError: true}
	}
	if resp.Body == nil {
		resp.Body = http.NoBody
	}
	res := Result{Status: status, OriginStatus: resp.StatusCode}
	if p.failStatus(resp.StatusCode) {
		rs.originErrors.Add(1)
		rs.episodeFailure()
		res.OriginError = true
	} else {
		c.originSucceeded(rs, p.Route, resp.StatusCode)
	}
	setCacheStatus(resp.Header, &cacheStatus{fwd: fwd, fwdStatus: resp.StatusCode, detail: detail})
	if r.Method != http.MethodHead && resp.Body != http.NoBody {
		resp.Body = &tee{rc: resp.Body, c: c, r: r, rs: rs}
	}
	return resp, res
}
