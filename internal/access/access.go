// Package access runs a route's access controls in one call, before any
// upstream attempt, and writes the refusal when one says no: allow/deny
// lists, method restrictions, rate limits, concurrency limits, basic auth
// and forward auth, in that order. Nothing decided here is charged to a
// backend. A route that configures none of them has no Policy (nil) and
// pays one nil check.
//
// The order is cheapest and least revealing first. The allow/deny list
// comes first so that a refused address learns nothing about the route
// (not even its methods) and cannot fill the limit tables; then the method
// bitset; then the rate limit, so that floods are shed before any password
// hashing or auth sub-request, and its delay is served before a
// concurrency slot is taken (a request waiting for its slot is not in
// flight); then the concurrency limit; then basic auth (local CPU), then
// forward auth (a network round trip). nginx runs limit_req before
// allow/deny; the difference is only which refusal a denied address sees.
package access

import (
	"context"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/sturdyproxy/sturdy/internal/access/acl"
	"github.com/sturdyproxy/sturdy/internal/access/basicauth"
	"github.com/sturdyproxy/sturdy/internal/access/connlimit"
	"github.com/sturdyproxy/sturdy/internal/access/forwardauth"
	"github.com/sturdyproxy/sturdy/internal/access/ratelimit"
	"github.com/sturdyproxy/sturdy/internal/wire/plain"
)

// Policy is one route's compiled access controls. It is immutable.
type Policy struct {
	route   string
	acl     *acl.List
	methods *MethodSet
	// methodsStatus answers a refused method: 405 (with Allow), 403, or
	// StatusClose.
	methodsStatus int
	rate          *ratelimit.Limits
	conn          *connlimit.Limits
	basic         *basicauth.Auth
	forward       *forwardauth.Auth
}

// StatusClose is the status Admit returns, having written nothing, for a
// request the route answers by closing the connection (methods_status
// 444, nginx's return 444): the caller aborts the response.
const StatusClose = 444

// Client is what the proxy decided about the request's client.
type Client struct {
	// IP is the client's address behind trusted proxies and the PROXY
	// protocol (edge.ClientIP); invalid for a unix socket.
	IP netip.Addr
	// Key is the same address as a string (the limits' client_ip key and
	// the key basic auth counts failures under); the proxy usually has it
	// already, without allocating.
	Key string
	// Attributed is true while attribution holds the client responsible
	// for its own failures (health.Monitor.Attributed): rate limit zones
	// with an attributed limit then apply it.
	Attributed bool
	// Proto is "https" or "http", as the client used (for forward auth).
	Proto string
}

// Admission is a request let through. Apply it to the upstream request's
// headers and call Done when the request has ended.
type Admission struct {
	held connlimit.Held
	fwd  forwardauth.Verdict
	// User is the basic auth user ("" without basic auth).
	User string
	// StripAuthorization is true when basic auth consumed the client's
	// Authorization header and it must not reach the backends.
	StripAuthorization bool
}

// Apply changes the upstream request's headers: forward auth's copied
// headers in place of the client's, and Authorization removed after basic
// auth unless forward_authorization is set.
func (a *Admission) Apply(h http.Header) {
	if a.StripAuthorization {
		delete(h, "Authorization")
	}
	a.fwd.Apply(h)
}

// Done releases the request's concurrency slots. Call it once.
func (a *Admission) Done() { a.held.Release() }

// Admit runs the route's controls on r in order. When it returns false it
// has answered the client (or the client went away while its request was
// being delayed) and the request must go no further; status is what was
// written (499 for a client that left, StatusClose when the caller must
// close the connection unanswered), for the access log. now is the
// process's clock.
func (p *Policy) Admit(w http.ResponseWriter, r *http.Request, c Client, now time.Time) (adm Admission, status int, ok bool) {
	if p.acl != nil && !p.acl.Allowed(c.IP) {
		return adm, p.refuse(w, http.StatusForbidden, 0, "requests from this address are refused"), false
	}
	if p.methods != nil && !p.methods.Allows(r.Method) {
		switch p.methodsStatus {
		case StatusClose:
			return adm, StatusClose, false // the caller closes: nothing is written
		case http.StatusForbidden:
			return adm, p.refuse(w, http.StatusForbidden, 0, "method "+strconv.Quote(r.Method)+" is not allowed here"), false
		}
		w.Header()["Allow"] = []string{p.methods.Allow()}
		return adm, p.refuse(w, http.StatusMethodNotAllowed, 0, "method "+strconv.Quote(r.Method)+" is not allowed here"), false
	}
	if p.rate != nil {
		res := p.rate.Decide(r, ratelimit.Client{Addr: c.Key, Attributed: c.Attributed}, now)
		switch res.Verdict {
		case ratelimit.Reject:
			return adm, p.refuse(w, res.Status, res.Wait, "too many requests from this client"), false
		case ratelimit.Delay:
			if !wait(r.Context(), res.Wait) {
				return adm, 499, false
			}
		}
	}
	if p.conn != nil {
		held, refusal := p.conn.Acquire(r, c.Key)
		if refusal != nil {
			return adm, p.refuse(w, refusal.Status, time.Second, "too many requests from this client at once"), false
		}
		adm.held = held
	}
	if p.basic != nil {
		res := p.basic.Check(r, c.Key, now)
		switch res.Status {
		case 0:
			adm.User = res.User
			adm.StripAuthorization = !p.basic.ForwardAuthorization()
		case http.StatusUnauthorized:
			adm.Done()
			w.Header()["Www-Authenticate"] = []string{p.basic.Challenge()}
			return Admission{}, p.refuse(w, http.StatusUnauthorized, 0, "sign in with a user name and password"), false
		default:
			adm.Done()
			return Admission{}, p.refuse(w, res.Status, res.RetryAfter, "too many failed sign-ins from this client"), false
		}
	}
	if p.forward != nil {
		v := p.forward.Check(r, forwardauth.Origin{ClientIP: c.Key, Proto: c.Proto})
		if !v.OK {
			adm.Done()
			if v.Status != 499 {
				v.Write(w)
			}
			return Admission{}, v.Status, false
		}
		adm.fwd = v
	}
	return adm, 0, true
}

// wait holds a delayed request until its slot, or until the client leaves.
func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// refuse writes a short plain-text refusal naming the route, in the form
// of the proxy's other edge answers, with Retry-After when retry > 0
// (rounded up to whole seconds, at least 1).
func (p *Policy) refuse(w http.ResponseWriter, status int, retry time.Duration, why string) int {
	h := w.Header()
	if retry > 0 {
		h["Retry-After"] = []string{strconv.FormatInt(int64((retry+time.Second-1)/time.Second), 10)}
	}
	body := strconv.Itoa(status) + " " + http.StatusText(status) + ": route " + strconv.Quote(p.route) + ": " + why + ".\n"
	return plain.Write(w, status, body)
}
