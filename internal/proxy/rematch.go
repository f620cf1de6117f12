package proxy

import (
	"net/http"
	"time"

	"github.com/sturdyproxy/sturdy/internal/route/subst"
)

// maxRematch bounds how often one request is routed again: nginx gives
// up after 10 internal redirects with a 500 as well.
const maxRematch = 10

// rematch follows routes whose rewrite routes the new path again
// (nginx's rewrite ... last): it returns the request with the rewritten
// path and the route that takes it, or a nil route when it answered
// itself (no route, a regex that did not match, or a loop). The client's
// request is not changed: its RequestURI (what $request_uri and the access
// log show) stays as sent, as nginx's $request_uri does.
func (h *Handler) rematch(w http.ResponseWriter, r *http.Request, snap *Snapshot, ln *Listener, rt *Route) (*http.Request, *Route) {
	for n := 0; rt.Rematch != nil; n++ {
		if n == maxRematch {
			rt.Stats.observe(writeEdgeError(w, http.StatusInternalServerError, rt.Name, "the request was routed again more than 10 times (rewrite.rematch); the rewrites send it round in a loop"), 0, time.Now().UnixNano(), false)
			return r, nil
		}
		rw := rt.Rematch
		if rw.Regex != nil && !rw.Regex.MatchString(r.URL.Path) {
			rt.Stats.observe(writeEdgeError(w, http.StatusNotFound, rt.Name, "the path does not match the route's rewrite, so there is nowhere to send it"), 0, time.Now().UnixNano(), false)
			return r, nil
		}
		v := subst.Vars{R: r, Scheme: scheme(h.TLS)[0], RemoteAddr: clientAddrString(r, snap.Trusted), Regex: rw.Regex, Subject: r.URL.Path}
		var esc string
		if rw.Prefix != nil {
			esc = replacePrefix(r.URL, rw.Match, rw.Prefix.Expand(&v))
		} else {
			esc = rw.Path.Expand(&v)
		}
		r2 := *r
		u := *r.URL
		setEscapedPath(&u, esc)
		r2.URL = &u
		r = &r2
		e, found := ln.Table.MatchRequest(r)
		if !found {
			snap.Edge.C.Answered(writeNoRoute(w))
			return r, nil
		}
		rt = e.Value
	}
	return r, rt
}
