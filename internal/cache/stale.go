package cache

import (
	"net/http"
	"time"
)

// Stale serving (RFC 5861, RFC 9111 4.2.4) is where a cache can lie, so
// every path here is bounded by the route's Policy caps, refused when the
// origin forbids it, counted, and labelled in Cache-Status.

// whileRevalidateOK reports whether e may be served stale right now while a
// background request refreshes it: the origin asked for
// stale-while-revalidate, within min(its value, the policy cap), nothing
// forbids stale, the client did not ask for validation, and the last
// background attempt did not fail (a failing origin is stale-if-error's
// business, which is counted and announced).
func whileRevalidateOK(e *entry, age time.Duration, p *Policy, reqCC *directives) bool {
	if reqCC.noCache || reqCC.maxAge != absent || e.cc.forbidsStale() ||
		e.cc.staleWhileRevalidate == absent || e.revalidationFailed.Load() {
		return false
	}
	return e.staleness(age) <= min(e.cc.staleWhileRevalidate, p.staleWhileRevalidateMax())
}

// staleIfErrorOK reports whether e may stand in for a failed origin.
// Normally the response itself must grant stale-if-error, and the grant is
// cut to the policy cap (incident 004: 86400 asked, 900 given by default).
// When the proxy has no host at all (disconnected, RFC 9111 4.2.4) the
// policy cap applies even without a grant, unless the origin forbade stale
// (must-revalidate, proxy-revalidate, no-cache, or s-maxage without an
// explicit grant).
func staleIfErrorOK(e *entry, age time.Duration, p *Policy, disconnected bool) bool {
	limit := p.staleIfErrorMax()
	if limit < 0 || e.cc.forbidsStale() {
		return false
	}
	window := e.cc.staleIfError
	if window == absent {
		if !disconnected || e.cc.sMaxAge != absent {
			return false
		}
		window = limit
	}
	return e.staleness(age) <= min(window, limit)
}

// ServeStale returns the stored copy for r if the route may use it while
// the proxy has no host to ask (the empty-pool chain, design.md section 4):
// a fresh copy, or a stale one within the route's stale-if-error bound. It
// returns nil otherwise. reason becomes the Cache-Status detail (e.g.
// "pool-empty"). A stale answer counts as a hidden origin failure and may
// start a masking episode. The caller sends the response as it sends
// Serve's.
func (c *Cache) ServeStale(r *http.Request, p *Policy, reason string) *http.Response {
	if p == nil {
		p = &Policy{}
	}
	if p.bypassReason(r) != "" {
		return nil // a health check must see the outage, never a copy
	}
	e, _, _ := c.store.lookup(r, primaryKey(r, p.Route))
	if e == nil {
		return nil
	}
	rs := c.route(p.Route)
	age := e.age(c.now())
	if age < e.lifetime && !e.cc.noCache {
		rs.count(StatusHit)
		return storedResponse(r, e, age, cacheStatus{hit: true, detail: reason})
	}
	if !staleIfErrorOK(e, age, p, true) {
		return nil
	}
	rs.errorsHidden.Add(1)
	c.staleServed(rs, p.Route, r.Method+" "+r.URL.Path+": "+reason)
	rs.count(StatusStale)
	return storedResponse(r, e, age, cacheStatus{fwd: fwdStale, detail: reason})
}
