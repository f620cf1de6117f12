// Package proxy is the request path: it matches a route, builds the
// outbound request, walks the pool's try order, and streams the response
// back. It owns the status a client sees when no backend answers.
//
// Everything here runs once per proxied request, so it takes no lock that
// other requests share, logs nothing per request, and allocates little.
package proxy

import (
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sturdyproxy/sturdy/internal/access"
	"github.com/sturdyproxy/sturdy/internal/cache"
	"github.com/sturdyproxy/sturdy/internal/edge"
	"github.com/sturdyproxy/sturdy/internal/edge/certs"
	"github.com/sturdyproxy/sturdy/internal/edge/forcehttps"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/proxy/accesslog"
	"github.com/sturdyproxy/sturdy/internal/proxy/compress"
	"github.com/sturdyproxy/sturdy/internal/proxy/spool"
	"github.com/sturdyproxy/sturdy/internal/proxy/static"
	"github.com/sturdyproxy/sturdy/internal/route"
	"github.com/sturdyproxy/sturdy/internal/route/subst"
)

// Upstream sends one request to one backend. *http.Transport is one; the
// seam exists so that a stricter, faster HTTP/1.1 client can replace it.
// An Upstream must not retry on its own, but for the keep-alive race: a
// request that failed on a reused connection before any of the response
// arrived, idempotent or not written at all, may go once more on a new
// connection (as http.Transport and internal/wire/h1client do).
type Upstream interface {
	RoundTrip(*http.Request) (*http.Response, error)
}

// Route is a compiled route: what the proxy needs per request, resolved
// once at config load.
type Route struct {
	Name string
	// Pool serves the route. Required.
	Pool     *health.Pool
	Upstream Upstream
	// MaxBodyBytes bounds the request body (413 above it). 0 means no limit.
	MaxBodyBytes int64
	// Total bounds the whole exchange; 0 means no limit.
	Total time.Duration
	// Tries bounds attempts per request, the first one included (1 to
	// config.MaxTries). A request that reached a backend is tried again
	// only when its method is idempotent and its body could be replayed.
	Tries int
	// RetryBudget is the share of the pool's recent requests retries may
	// add; MinRetries lets that many through at low traffic.
	RetryBudget float64
	MinRetries  int
	// BufferBody is the largest idempotent request body read into memory so
	// that it can be replayed.
	BufferBody int64
	// BufferRequest is the largest request body read whole before a
	// backend is chosen (any method), so that a body that breaks is the
	// client's and no backend gets half a request; larger bodies wait in
	// Spool, or stream without it.
	// 0 means bodies stream (except BufferBody's).
	BufferRequest int64
	// Spool is where bodies larger than BufferRequest wait, whole, before
	// a backend is chosen; nil streams them.
	Spool *spool.Dir
	// BodyTimeout bounds the wait for each read of the request body, and
	// SendTimeout for each write of the response to the client: a client
	// that stalls that long is cut, one that moves is never. 0 means no
	// limit.
	BodyTimeout, SendTimeout time.Duration
	// NoGRPC is set when no pool of the route speaks HTTP/2: a gRPC call
	// (which needs HTTP/2 end to end) is answered UNIMPLEMENTED at once,
	// not sent to a backend it would hang on until its deadline.
	NoGRPC bool
	// AllowEncodedSlashes lets paths with %2F or %5C through (routed on
	// the decoded form, forwarded as sent); otherwise they get 400.
	AllowEncodedSlashes bool
	// Upgrades are the protocols (lower case) a client may switch to
	// through the route; an Upgrade to any other is not forwarded, and a
	// backend that switches to one anyway is refused (upgrade.go). nil
	// allows none.
	Upgrades []string
	// Tracker watches the route's failures (route attribution) and
	// RouteBit is the route's sketch bit in this config. Monitor knows
	// which clients are attributed. All required.
	Tracker  *health.RouteTracker
	RouteBit uint64
	Monitor  *health.Monitor
	// ShedClients refuses attributed clients with 429.
	ShedClients bool
	// Stats are the route's counters. Required.
	Stats *Stats
	// HashKind and HashName select the hash balancing key: "client_ip",
	// "header" (HashName is the canonical header name) or "cookie".
	HashKind, HashName string
	// MaxInFlight bounds concurrent requests on the route; 0 means none.
	MaxInFlight int64
	// Fallback is the pool tried while the route's own pool is empty; nil
	// means none.
	Fallback *health.Pool
	// Sorry is the answer when nothing else can answer. Required.
	Sorry Sorry
	// Cache, when set, answers through the shared cache with CachePolicy.
	Cache       *cache.Cache
	CachePolicy *cache.Policy
	// ClientCert is what the route asks of the client's certificate.
	ClientCert certs.Requirement
	// Access, when set, are the route's access controls (allow/deny,
	// methods, rate and connection limits, basic and forward auth),
	// decided before anything else, charged to no backend.
	Access *access.Policy
	// Static, when set, answers from files; a request its chain hands to
	// the pool (or every request, when the chain never does) goes on to
	// Pool. Pool is nil on a route that only serves files.
	Static *static.Handler
	// Compress, when set, compresses answers the client accepts encoded.
	Compress *compress.Policy
	// Agg, when set, receives the degraded answers as aggregated log lines.
	Agg Aggregator
	// HostHeader is the Host the backend gets (host_header); nil means the
	// client's. Backends of a split route carry their own.
	HostHeader *subst.Template
	// Routing, when set, holds the route's matching-related features:
	// redirect, rewrite, header rules, split, mirror, request id, error
	// pages (routing.go).
	Routing *Routing
	// Rematch, when set, rewrites the path and routes the request again
	// (rewrite.rematch, nginx's rewrite ... last); the route itself
	// answers nothing (rematch.go).
	Rematch *Rewrite

	notes      [numAnswers]string      // set by Prepare
	noGRPCNote string                  // set by Prepare
	faultNotes [edge.NumReasons]string // set by Prepare
	single     Backend                 // Pool and its companions as a backend, set by Prepare
}

// Sorry is a route's sorry page.
type Sorry struct {
	Status      int
	RetryAfter  string // seconds
	ContentType string
	Body        []byte
}

// Snapshot is everything the request path reads, swapped as one pointer on
// reload. It must not change once published.
type Snapshot struct {
	// Listeners holds what each listener (by name) answers.
	Listeners map[string]*Listener
	// Trusted lists the peers whose X-Forwarded-* headers are believed.
	Trusted []netip.Prefix
	// ClientHeader, when set (canonical form), is the header that names
	// the client for attribution behind trusted proxies; otherwise the
	// client is its address.
	ClientHeader string
	// Edge decides what never reaches a backend. Required.
	Edge *edge.Edge
	// Access is the access log; nil means off. AccessFormat is what its
	// records hold; nil means the default JSON fields.
	Access       *accesslog.Logger
	AccessFormat *accesslog.Format
	// Untrusted holds the header fields (canonical) dropped from requests
	// of peers that are not trusted proxies: identity and URL fields that
	// frameworks believe (X-Original-URL, True-Client-IP, ...). A set, not
	// a list: requests are copied header by header and each is looked up,
	// which costs a tenth of deleting two dozen absent names.
	Untrusted map[string]struct{}
	// Instance identifies this sturdy process in X-Sturdy-Hops, so that a
	// request that comes back through it is recognised (a loop); "" turns
	// loop detection off.
	Instance string
	// Local hears of sturdy's own resource exhaustion; nil drops it.
	Local LocalErrors
}

// Listener is what one listener answers before and through its routes.
type Listener struct {
	// Table chooses the route. Required.
	Table *route.Table[*Route]
	// MergeSlashes merges repeated slashes in the path before routing
	// (nginx merge_slashes), at the edge, with the rest of the path's
	// normalisation; the backend gets the merged path.
	MergeSlashes bool
	// AllowUnderscores keeps request header fields whose names hold "_";
	// otherwise they are dropped before routing, access rules and the
	// backend see the header (underscores.go).
	AllowUnderscores bool
	// Challenge answers ACME HTTP-01 challenges (before any redirect);
	// nil means none.
	Challenge func(http.ResponseWriter, *http.Request) bool
	// Redirect sends every plain request to HTTPS; nil means none.
	Redirect *forcehttps.Redirector
	// HSTS is the Strict-Transport-Security value of a TLS listener's
	// answers; nil means none.
	HSTS []string
}

// Handler serves one listener. Its zero value is not usable; set Listener
// and Snapshot.
type Handler struct {
	// Listener is the name of the listener this handler serves.
	Listener string
	// TLS reports whether the listener is HTTPS (for X-Forwarded-Proto).
	TLS bool
	// Current returns the serving config; it is called once per request.
	Current func() *Snapshot
	// Upgrades, when set, tracks upgraded (WebSocket) connections for the
	// server's shutdown.
	Upgrades *Upgrades
	// Port is the listener's port, sent as X-Forwarded-Port; "" means the
	// port of the connection's local address.
	Port string

	// portHdr is X-Forwarded-Port's value for Port, made on first use and
	// shared by every request (header values are never written in place).
	portHdr atomic.Pointer[[]string]
	// hopsHdr is X-Sturdy-Hops' value for a request that carries none:
	// the instance's mark, made on first use and shared, never modified.
	hopsHdr atomic.Pointer[[]string]
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w = grpcWrap(w, r) // sturdy's own answers to gRPC calls are gRPC (grpc.go)
	snap := h.Current()
	ln := snap.Listeners[h.Listener]
	conn, ok := h.checkConn(w, r, snap)
	if !ok {
		return
	}
	status, why, slashes := snap.Edge.Check(r, ln.MergeSlashes)
	if status == 0 && snap.Instance != "" && isLoop(r.Header, snap.Instance) {
		snap.Edge.C.Add(edge.RejectLoop)
		status, why = http.StatusLoopDetected, "this request has come through this sturdy "+strconv.Itoa(maxSelfPasses)+" times already; a pool probably points back at one of its own listeners"
	}
	if status != 0 {
		snap.Edge.C.Answered(status)
		writeText(w, status, strconv.Itoa(status)+" "+http.StatusText(status)+": "+why+".\n")
		return
	}
	if !ln.AllowUnderscores && dropUnderscored(r.Header) {
		snap.Edge.C.Add(edge.DroppedUnderscore)
	}
	if ln.Challenge != nil && ln.Challenge(w, r) {
		return
	}
	if ln.Redirect != nil && ln.Redirect.Handle(w, r) {
		snap.Edge.C.Answered(ln.Redirect.Status())
		return
	}
	if ln.HSTS != nil {
		w.Header()["Strict-Transport-Security"] = ln.HSTS
	}
	e, slash, found := ln.Table.Resolve(r)
	if !found {
		snap.Edge.C.Answered(writeNoRoute(w))
		return
	}
	rt := e.Value
	if slash {
		rt.Stats.observe(addSlash(w, r, scheme(h.TLS)[0]), 0, time.Now().UnixNano(), false)
		return
	}
	if p, ok := edge.WithoutParams(r.URL.Path); ok && !sameRoute(ln.Table, r, p, e) {
		snap.Edge.C.Add(edge.RejectParams)
		rt.Stats.observe(writeEdgeError(w, http.StatusBadRequest, rt.Name, "path parameters (;) are ambiguous here: a backend that removes them (as Java servlet containers do) would read a path that another route serves"), 0, time.Now().UnixNano(), false)
		return
	}
	if rt.Rematch != nil {
		if r, rt = h.rematch(w, r, snap, ln, rt); rt == nil {
			return
		}
	}
	if slashes && !rt.AllowEncodedSlashes {
		snap.Edge.C.Add(edge.RejectSlash)
		rt.Stats.observe(writeEdgeError(w, http.StatusBadRequest, rt.Name, "encoded slashes (%2F, %5C) in the path are ambiguous, and this route does not allow them (allow_encoded_slashes)"), 0, time.Now().UnixNano(), false)
		return
	}
	h.serveRoute(w, r, snap, rt, conn)
}

// The steps of a routed request are three functions, not one, so that
// each has few enough returns for its defers to be open-coded (a defer
// the compiler cannot inline costs a few hundred instructions a request).

// serveRoute answers a request that a route took, and counts and logs it.
func (h *Handler) serveRoute(w http.ResponseWriter, r *http.Request, snap *Snapshot, rt *Route, conn *Conn) {
	start := time.Now()
	fw := forwarder{h: h, snap: snap, rt: rt, w: w, r: r, now: start, conn: conn}
	fw.dl, _ = w.(deadliner)
	if snap.Access != nil && snap.AccessFormat.WantsUpstreamTimes() {
		fw.times = new(upstreamTimes)
	}
	defer fw.finish(start)
	fw.admitAndServe(w)
}

// finish counts the answer in the route's figures and the access log.
func (fw *forwarder) finish(start time.Time) {
	d := time.Since(start)
	rt, end := fw.rt, start.UnixNano()+int64(d)
	own := fw.attr == health.AttrClient
	if !own && fw.status >= 500 && fw.attr != health.None {
		// A failure before its client was known to cause its own: if the
		// client is attributed later, this answer becomes its fault too.
		own = rt.Monitor.FailedAnswer(fw.clientKey, rt.Tracker)
	}
	rt.Stats.observe(fw.status, d, end, own)
	if n := rt.Tracker.TakeClientFaults(); n > 0 {
		rt.Stats.reattribute(n, end)
	}
	if a := fw.snap.Access; a != nil {
		fw.logAccess(a, start, d)
	}
	if fw.rw != nil {
		fw.rw.release()
	}
}

// admitAndServe runs the route's checks before it takes capacity: client
// certificate, redirect, body size and access controls. w is the
// listener's writer, under any route writer.
func (fw *forwarder) admitAndServe(w http.ResponseWriter) {
	rt, r := fw.rt, fw.r
	g := rt.Routing
	if g != nil {
		fw.begin(g)
	}
	if err := rt.ClientCert.Check(r); err != nil {
		fw.status = writeEdgeError(fw.w, http.StatusForbidden, rt.Name, err.Error())
		return
	}
	if g != nil && g.Redirect != nil {
		fw.status = fw.redirect(g.Redirect)
		return
	}
	if rt.MaxBodyBytes > 0 && r.Body != nil && r.Body != http.NoBody {
		if r.ContentLength > rt.MaxBodyBytes {
			fw.snap.Edge.C.Add(edge.RejectTooLarge)
			fw.status = writeEdgeError(fw.w, http.StatusRequestEntityTooLarge, rt.Name, "the request body is larger than this route allows")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, rt.MaxBodyBytes)
	}
	if rt.Access != nil {
		// Before the bulkhead: a request delayed by its rate limit holds
		// none of the route's capacity.
		if !fw.admit() {
			return
		}
		defer fw.admission.Done() // releases concurrency slots
	}
	fw.serveAdmitted(w)
}

// serveAdmitted answers an admitted request within the route's bulkhead:
// a fixed answer, a file, or a backend's.
func (fw *forwarder) serveAdmitted(w http.ResponseWriter) {
	rt := fw.rt
	n := rt.Stats.InFlight.Add(1)
	defer rt.Stats.InFlight.Add(-1)
	if rt.MaxInFlight > 0 && n > rt.MaxInFlight {
		// The route's bulkhead is full: answer at once rather than queue,
		// so a slow route cannot take workers from the others.
		fw.answered(AnswerShed)
		fw.status = writeBusy(fw.w, rt.Name, "this route is at its limit of requests in flight")
		return
	}
	if g := rt.Routing; g != nil && g.Respond != nil && g.Respond.Close {
		fw.answerFixed(g.Respond) // never returns (aborts the handler); before compression, which could write a tail
	}
	if rt.Compress != nil {
		if cw := compress.Wrap(w, fw.r, rt.Compress); cw != nil {
			defer cw.Close() // before the counters: the compressed tail is part of the answer
			fw.wrapInner(cw)
		}
	}
	if g := rt.Routing; g != nil && g.Respond != nil {
		fw.status = fw.answerFixed(g.Respond)
		return
	}
	if g := rt.Routing; g != nil && g.Backends != nil && g.Backends.fixed {
		if rs := fw.backend().Respond; rs != nil {
			fw.status = fw.answerFixed(rs)
			return
		}
	}
	if rt.Static != nil && fw.serveFile() {
		return
	}
	fw.serve()
}

// sameRoute reports whether r, with its path read as p, takes the route
// of e: what a path's parameters (";...") may change is nothing at all.
func sameRoute(t *route.Table[*Route], r *http.Request, p string, e *route.Entry[*Route]) bool {
	r2 := *r
	u := *r.URL
	u.Path = p
	r2.URL = &u
	e2, _ := t.MatchRequest(&r2)
	return e2 == e
}

// addSlash answers a prefix route's path asked for without its trailing
// slash with a redirect to the path with it, query kept, as nginx does for
// a prefix location ending in "/": an absolute URL on the client's Host,
// as nginx writes it (absolute_redirect on, server_name_in_redirect off).
func addSlash(w http.ResponseWriter, r *http.Request, scheme string) int {
	loc := scheme + "://" + r.Host + r.URL.EscapedPath() + "/"
	if r.Host == "" {
		loc = r.URL.EscapedPath() + "/" // HTTP/1.0 without Host: relative
	}
	if r.URL.RawQuery != "" {
		loc += "?" + r.URL.RawQuery
	}
	h := w.Header()
	h["Location"] = []string{loc}
	h["Content-Length"] = []string{"0"}
	w.WriteHeader(http.StatusMovedPermanently)
	return http.StatusMovedPermanently
}
