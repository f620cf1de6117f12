package cache

import (
	"net/http"
)

// bypass passes a request that must not use the cache straight to the
// origin. A successful unsafe method invalidates what is stored for its
// URI (RFC 9111 4.4), so that a POST to a page is not followed by the old
// copy.
func (c *Cache) bypass(w http.ResponseWriter, r *http.Request, p *Policy, rs *routeState, fetch Fetch, reason string) Result {
	res := c.passThrough(w, r, p, rs, fetch, fwdBypass, reason, StatusBypass)
	if !safeMethod(r.Method) && res.OriginStatus >= 200 && res.OriginStatus < 400 {
		c.store.invalidate(primaryKey(r, p.Route))
	}
	return res
}

func safeMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// passThrough forwards r unchanged and streams the answer back, labelled;
// nothing is stored. Origin failures still count.
func (c *Cache) passThrough(w http.ResponseWriter, r *http.Request, p *Policy, rs *routeState, fetch Fetch,
	fwd, detail, status string) Result {
	resp, err := fetch(r)
	rs.originRequests.Add(1)
	if err != nil {
		if r.Context().Err() != nil {
			return Result{Status: status, OriginErr: err}
		}
		rs.originErrors.Add(1)
		rs.episodeFailure()
		return Result{Status: status, OriginErr: err, OriginError: true}
	}
	if resp.Body == nil {
		resp.Body = http.NoBody
	}
	defer resp.Body.Close()
	res := Result{Status: status, OriginStatus: resp.StatusCode}
	if p.failStatus(resp.StatusCode) {
		rs.originErrors.Add(1)
		rs.episodeFailure()
		res.OriginError = true
	} else {
		c.originSucceeded(rs, p.Route, resp.StatusCode)
	}
	h := w.Header()
	for k, vv := range resp.Header {
		h[k] = vv
	}
	setCacheStatus(h, &cacheStatus{fwd: fwd, fwdStatus: resp.StatusCode, detail: detail})
	w.WriteHeader(resp.StatusCode)
	if r.Method != http.MethodHead {
		c.copyBody(w, r, rs, resp, true, false)
	}
	return res
}
