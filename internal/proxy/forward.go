package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"time"

	"github.com/sturdyproxy/sturdy/internal/access"
	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/edge"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/health/balance"
	"github.com/sturdyproxy/sturdy/internal/outcome"
	"github.com/sturdyproxy/sturdy/internal/proxy/spool"
	"github.com/sturdyproxy/sturdy/internal/route/subst"
	"github.com/sturdyproxy/sturdy/internal/view"
	"github.com/sturdyproxy/sturdy/internal/wire/h1client"
)

// failure is why an exchange produced no response to pass on.
type failure uint8

const (
	failNone       failure = iota
	failNoHost             // no host in rotation, nor one to panic-route to
	failFull               // hosts in rotation, all at their connection limit
	failUpstream           // attempts were made and failed (see class, sameTwice)
	failTooLarge           // the request body exceeded the route's limit
	failCancel             // the client went away
	failClientBody         // the client's request body broke (see fault)
	failLocal              // sturdy ran out of its own resources (fds, memory, ports)
	failCut                // a request that may not be sent again was waiting on a host found dead
	failStale              // a request that may not be sent again met a kept-alive connection's close
	failSpool              // the request body found no room on disk (client_body_temp)
)

// forwarder carries one request through its attempts. It lives on the
// stack of ServeHTTP (or, for a cache's background revalidation, on the
// heap for one fetch).
type forwarder struct {
	peer uint8 // peerUnknown until peerTrusted asks
	h    *Handler
	snap *Snapshot
	rt   *Route
	w    http.ResponseWriter
	r    *http.Request
	now  time.Time
	ctx  context.Context

	admission access.Admission // the access controls' verdict, when admitted is set
	admitted  bool
	conn      *Conn     // the client connection's state; nil on HTTP/2 and in tests
	dl        deadliner // the client connection's deadlines; nil when unsupported

	// What the route's features need; nil and zero on routes without
	// them. Shared state lives in heap objects of its own, so that the
	// forwarder stays on the stack.
	be    *Backend // the backend chosen for this request (see backend)
	reqID string   // the request id, when the route gives one
	// idValue is reqID as a header value, shared by the request and the
	// response (neither is changed after it is set: len == cap).
	idValue []string
	rw      *routeWriter   // the route's writer, when it changes answers
	vars    *subst.Vars    // template values, made on first use
	times   *upstreamTimes // the last attempt's times, when the access log wants them

	body     *clientBody // the request body when it streams (and cannot be replayed)
	buffered []byte      // the request body when it was read whole first
	spooled  *spool.File // the request body when it was read whole to disk first
	spoolErr error       // why it could not be, with failSpool
	fault    edge.Reason // what the client did wrong, with failClientBody
	bodyErr  error       // the request body's read error, with failClientBody
	tried    balance.Tried
	url      *url.URL // the outbound URL; attempts change its Host
	up       string   // the Upgrade forwarded: asked for by the client and allowed by the route
	out      *http.Request

	clientKey string
	clientBit uint64
	fails     [config.MaxTries]health.Failure
	nfails    int
	sameTwice bool
	noResend  bool // the outbound request may not be sent again after the keep-alive race

	status      int           // what the client was answered
	bytes       int64         // response body bytes sent
	class       outcome.Class // the last attempt's outcome
	attr        health.Attribution
	pool        *health.Pool // the pool of the last attempt
	host        *health.Host // the last host tried
	how         int          // 1 + the Answer* kind, when not answered normally
	cacheStatus string
	grpc        *grpcCall // set for gRPC calls (grpc.go)
}

func (f *forwarder) serve() {
	r, rt := f.r, f.rt
	defer f.closeSpool()
	f.ctx = r.Context()
	if rt.Total > 0 {
		var cancel context.CancelFunc
		f.ctx, cancel = context.WithTimeout(f.ctx, rt.Total)
		defer cancel()
	}
	if isGRPC(r) {
		if rt.NoGRPC {
			f.status = f.grpcUnreachable()
			return
		}
		defer f.grpcStart()()
	}
	if f.clientKey == "" {
		f.clientKey = clientKey(r, f.snap.ClientHeader, f.peerTrusted(), f.snap.Trusted)
	}
	f.clientBit = 1 << (balance.HashString(f.clientKey) & 63)
	if rt.ShedClients && rt.Monitor.Attributed(f.clientKey) {
		f.answered(AnswerShed)
		f.status = writeShedClient(f.w, rt.Name)
		return
	}
	f.arm(true)
	f.up = allowedUpgrade(r.Header, rt.Upgrades)
	if rt.Cache != nil && f.up == "" {
		if f.reqID != "" {
			f.r = withRequestID(f.r, f.reqID) // to the fetches the cache makes
		}
		f.serveCached()
		return
	}
	resp, host, fl := f.fetch()
	if resp != nil {
		f.status = f.respond(host, resp)
		return
	}
	f.status = f.answer(fl)
}

// fetch walks the route's pool and, when it has no host at all, the
// fallback pool.
func (f *forwarder) fetch() (*http.Response, *health.Host, failure) {
	be := f.backend()
	if fl := f.prepare(); fl != failNone {
		return nil, nil, fl
	}
	resp, host, fl := f.exchange(be.Pool)
	if fl == failNoHost && be.fallsBack() {
		f.answered(AnswerFallback)
		be.Pool.EpisodeAnswer(health.ByFallback)
		f.tried = balance.Tried{}
		resp, host, fl = f.exchange(be.Fallback)
	}
	return resp, host, fl
}

// fallsBack reports whether a request the pool has no host for goes to
// the fallback pool.
func (b *Backend) fallsBack() bool { return b.Fallback != nil && !b.Fallback.Failing() }

// Serving names (view.Serving*) the step of the chain fetch walks that
// answers the route's requests now (for its pool, not a split's other backends), and
// since when the pool has had no host, zero when it is failing or has
// hosts. The fallback counts only while it has hosts of its own.
func (r *Route) Serving() (mode string, since time.Time) {
	b := &Backend{Pool: r.Pool, Fallback: r.Fallback}
	p := b.Pool
	if p == nil {
		return view.ServingNormal, time.Time{} // files only
	}
	fallback := b.fallsBack() && b.Fallback.AvailableCount() > 0
	if p.Failing() { // exchange gives up at once: the chain answers
		if fallback {
			return view.ServingFallback, time.Time{}
		}
		return view.ServingSorry, time.Time{}
	}
	empty, since, _ := p.Empty()
	switch {
	case !empty:
		return view.ServingNormal, time.Time{}
	case p.InPanic():
		return view.ServingPanic, since
	case fallback:
		return view.ServingFallback, since
	}
	return view.ServingSorry, since
}

// exchange runs the attempts on one pool: the balancing policy's order,
// panic routing when no host is in rotation, retries when they are safe and
// within budget. It returns the response to pass on (a failing one too,
// when a backend gave one), or why there is none.
func (f *forwarder) exchange(p *health.Pool) (*http.Response, *health.Host, failure) {
	rt := f.rt
	budget := p.Budget()
	budget.Request(f.now)
	f.url.Scheme = p.Scheme
	key := f.hashKey()
	idempotent := isIdempotent(f.out.Method)
	f.nfails, f.sameTwice = 0, false

	hr := f.healthRequest()
	var held *http.Response // a failing answer kept to pass on if nothing better comes
	var heldHost *health.Host
	cut := false
	stale, staleUsed := false, false // the last failure was the keep-alive race; one was
	shed := false                    // a host refused it with 503 and Retry-After (overload)
	for attempt := 0; attempt < rt.Tries; attempt++ {
		if p.Failing() && (f.nfails > 0 || cut) {
			// Found failing while this request waited on it (its wait was
			// cut, or it failed): the chain answers now. Sent again as the
			// pool's trial, it would wait the whole timeout once more.
			break
		}
		host := p.Next(key, &f.tried, f.now)
		if host == nil && p.Failing() {
			break // known to be failing, no trial due: the chain answers
		}
		if host == nil && p.AvailableCount() == 0 {
			// Every host is out. Those out on passive evidence alone are
			// tried anyway: the evidence may be wrong.
			if host = p.Panic(&f.tried); host != nil {
				f.answered(AnswerPanic)
			}
		}
		if host == nil {
			break
		}
		// A retry after a failure that reached a backend spends the retry
		// budget; one after a refused or timed-out connection costs the
		// backends nothing and is always made, and so is one after the
		// keep-alive race (stale).
		if attempt > 0 && (f.nfails > 0 || shed) && !stale && !budget.Allow(f.now, rt.RetryBudget, rt.MinRetries) {
			break
		}
		if held != nil {
			discard(held, heldHost)
			held, heldHost = nil, nil
		}
		f.tried.Add(host.Index())
		f.pool, f.host = p, host
		t0 := time.Now()
		resp, class, err := f.attempt(host)
		took := time.Since(t0)
		if err != nil && errors.Is(err, h1client.ErrCut) {
			// The host was found dead while this request waited on it:
			// nothing is charged to anyone. Sent again only when that is
			// safe, and then at no cost to the retry budget; otherwise the
			// empty-pool chain answers now rather than a timeout later.
			cut = true
			if !idempotent || f.body != nil {
				f.settle(p, &hr)
				return nil, nil, failCut
			}
			attempt-- // does not use up a try
			continue
		}
		if class == outcome.OK && p.FailStatus(resp.StatusCode) {
			class = outcome.Status5xx
		}
		if class == outcome.OK && f.grpc != nil {
			class, _ = f.grpcClass(p, resp)
		}
		host.Observe(class, took, f.bodySent(class), t0.UnixNano()+int64(took))
		f.class = class
		switch {
		case class == outcome.OK:
			if f.grpc == nil || !f.grpc.late { // else recorded from the trailers
				p.Record(host, class, &hr, f.now)
			}
			f.settle(p, &hr)
			return resp, host, failNone
		case class == outcome.Status5xx && resp.StatusCode == http.StatusServiceUnavailable && len(resp.Header["Retry-After"]) > 0:
			// Overload is not failure: the host is full, not broken. It is
			// charged nothing and sent less for a while (health's
			// Overloaded); the request may try a host with room, within
			// the budget, and otherwise gets the host's own answer, which
			// says when to come back.
			p.Overloaded(host, retryAfter(resp.Header["Retry-After"][0], time.Now()), host.InFlight(), f.now)
			held, heldHost = resp, host
			shed, stale = true, false
			if !idempotent || f.body != nil {
				attempt = rt.Tries // it may have been acted on, or cannot be sent again
			}
			continue
		case isBodyTooLarge(err):
			f.settle(p, &hr)
			return nil, nil, failTooLarge
		case class == outcome.ClientCancel:
			p.Record(host, class, &hr, f.now)
			f.settle(p, &hr)
			return nil, nil, failCancel
		case class == outcome.ClientBodyError:
			// The client's body broke mid-stream: the attempt is abandoned
			// (the backend sees its connection closed) and is the client's.
			p.Record(host, class, &hr, f.now)
			f.settle(p, &hr)
			f.fault, f.bodyErr = bodyFault(err), err
			return nil, nil, failClientBody
		case class == outcome.LocalError:
			// sturdy's own limits: no backend is to blame, and another
			// host would fail the same way.
			p.Record(host, class, &hr, f.now)
			f.settle(p, &hr)
			if f.snap.Local != nil {
				f.snap.Local.UpstreamFailed(err)
			}
			return nil, nil, failLocal
		case class == outcome.StaleConnection && f.noResend && !staleUsed && idempotent && f.body == nil:
			// The keep-alive race met by a request that may be sent again
			// but was not resent to the same host (WithoutResend): it goes
			// to another host, once, free of the retry budget and charged
			// to nobody, as below for a reused connection's EOF.
			p.Record(host, class, &hr, f.now)
			stale, staleUsed = true, true
			continue
		case class == outcome.StaleConnection:
			// The backend closed the kept-alive connection as the request
			// arrived, and it may not be sent again: the connection's
			// staleness, not the host's failure (see h1client).
			p.Record(host, class, &hr, f.now)
			f.settle(p, &hr)
			return nil, nil, failStale
		case !class.Sent():
			p.Record(host, class, &hr, f.now)
			if f.body != nil && f.body.started() {
				attempt = rt.Tries // the body is gone: nothing to send again
			}
			continue
		}
		// The request reached the backend and failed there.
		status := 0
		if resp != nil {
			status = resp.StatusCode
			held, heldHost = resp, host
		}
		fl := health.Failure{Host: host, Class: class, Status: status}
		var ue *h1client.Error
		stale = false
		if f.noResend && !staleUsed && errors.As(err, &ue) && ue.Reused && (class == outcome.EOFBeforeResponse || class == outcome.Reset) {
			// A reused connection closed before any of the answer: the
			// keep-alive race, which h1client would have resent to the
			// same host. It goes to another host instead, once, free of
			// the retry budget, and is evidence against this host only
			// with another host's agreement.
			fl.Stale, stale, staleUsed = true, true, true
		} else {
			// Noted now, not when the request is settled: a slow route's
			// other requests are answered two timeouts from now.
			rt.Tracker.AttemptFailed(class, f.clientBit)
		}
		// Only another backend's agreement makes it the request's: a
		// resend to the same host after the keep-alive race (h1client's,
		// reported as Resent) asked that host twice, and a dying host
		// answers both the same way. The retry below goes to a different
		// host, once (WithoutResend).
		f.sameTwice = f.sameTwice || health.FailedElsewhere(f.fails[:f.nfails], fl)
		f.fails[f.nfails] = fl
		f.nfails++
		replayable := f.body == nil
		if f.sameTwice || !idempotent || !replayable || rt.Tracker.Degraded() || rt.Monitor.Attributed(f.clientKey) {
			// Failed the same way twice: it is the request, not the hosts.
			// Not idempotent or not replayable: sending it again could
			// apply it twice. A degraded route or an attributed client:
			// the failures are their own, and retrying only spends
			// capacity others need.
			break
		}
		if !f.noResend {
			// The retry goes to one more host, once: not twice on it after
			// the keep-alive race as well.
			f.noResend = true
			f.out = f.out.WithContext(h1client.WithoutResend(f.out.Context()))
		}
	}
	f.settle(p, &hr)
	switch {
	case held != nil:
		// A backend's own answer, even a failing one, says more than ours.
		return held, heldHost, failNone
	case f.nfails > 0 && p.Failing() && idempotent && f.body == nil:
		// A failed trial of a pool known to be failing: answered like
		// every other request to it, by the empty-pool chain, since
		// sending it elsewhere is safe.
		return nil, nil, failNoHost
	case f.nfails > 0:
		return nil, nil, failUpstream
	case f.tried.Len() == 0 && p.AvailableCount() > 0 && !p.Failing() && !cut:
		return nil, nil, failFull
	}
	// No backend could even be reached: as far as this request can tell,
	// the pool is empty, and the empty-pool chain answers.
	return nil, nil, failNoHost
}

// answer writes the client's answer for a failure and returns its status.
func (f *forwarder) answer(fl failure) int {
	rt := f.rt
	if s := f.grpcAnswer(fl); s != 0 {
		return s
	}
	switch fl {
	case failCancel:
		// The client is gone (or half gone): answer nothing, and make sure
		// net/http does not send an empty 200 in our place.
		f.status = 499
		panic(http.ErrAbortHandler)
	}
	if fl != failUpstream {
		f.arm(false) // the proxy's own decisions keep their own bodies
	}
	switch fl {
	case failTooLarge:
		f.snap.Edge.C.Add(edge.RejectTooLarge)
		return writeEdgeError(f.w, http.StatusRequestEntityTooLarge, rt.Name, "the request body is larger than this route allows")
	case failClientBody:
		return f.answerFault()
	case failLocal:
		return writeBusy(f.w, rt.Name, "sturdy itself ran out of resources (file descriptors, memory or local ports) reaching the backends; no backend was marked down")
	case failFull:
		f.answered(AnswerShed)
		return writeBusy(f.w, rt.Name, "every backend is at its connection limit or shedding load")
	case failNoHost, failCut:
		return f.sorry()
	case failSpool:
		w := f.w
		w.Header()["Retry-After"] = []string{"5"}
		why := "the request body could not wait on disk for a backend (client_body_temp is full); nothing was sent to any backend"
		if !errors.Is(f.spoolErr, spool.ErrFull) {
			why = "the request body could not be written to disk for a backend (" + f.spoolErr.Error() + "); nothing was sent to any backend"
			if f.snap.Local != nil {
				f.snap.Local.UpstreamFailed(f.spoolErr)
			}
		}
		return writeEdgeError(w, http.StatusServiceUnavailable, rt.Name, why)
	case failStale:
		return writeEdgeError(f.w, http.StatusBadGateway, rt.Name, "the backend closed its kept-alive connection as this request arrived (stale_connection); it was not sent again, since it may not be safe to repeat, and no backend was charged")
	case failUpstream:
		// The answer says whose failure it was as attribution decided:
		// failing the same way on two backends makes it the request's
		// only while they serve others and its route serves the rest.
		switch {
		case f.sameTwice && (f.attr == health.AttrRequest || f.attr == health.AttrClient):
			return writeRequestFailed(f.w, rt.Name, f.class)
		case f.attr == health.AttrRequest:
			// One host, but the same request failing the same way each
			// time it came lately while that host served others.
			return writeRequestFailedAgain(f.w, rt.Name, f.class)
		case f.sameTwice && f.attr == health.AttrRoute:
			return writeRouteFailed(f.w, rt.Name, f.class)
		}
		return writeUpstreamError(f.w, rt.Name, f.class)
	}
	return writeUpstreamError(f.w, rt.Name, f.class)
}

// sorry answers with the route's sorry page: the end of the empty-pool
// chain, never a bare 502.
func (f *forwarder) sorry() int {
	rt := f.rt
	f.answered(AnswerSorry)
	f.backend().Pool.EpisodeAnswer(health.BySorry)
	if g := asGRPC(f.w); g != nil {
		return f.grpcSorry(g)
	}
	h := f.w.Header()
	h["Content-Type"] = []string{rt.Sorry.ContentType}
	h["Retry-After"] = []string{rt.Sorry.RetryAfter}
	h["Cache-Control"] = []string{"no-store"}
	h["Content-Length"] = []string{strconv.Itoa(len(rt.Sorry.Body))}
	f.w.WriteHeader(rt.Sorry.Status)
	f.w.Write(rt.Sorry.Body)
	return rt.Sorry.Status
}

// retryAfter reads a Retry-After value (seconds, or an HTTP date) as a
// duration from now; 0 when it cannot be read or has passed.
func retryAfter(v string, now time.Time) time.Duration {
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(min(max(n, 0), 86400)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// healthRequest is what attribution needs to know about this request.
// What it was sent as names it for attribution when it has no body: a
// body is part of what a request is, and is not remembered.
func (f *forwarder) healthRequest() health.Request {
	hr := health.Request{Route: f.rt.Tracker, RouteBit: f.rt.RouteBit, ClientKey: f.clientKey, ClientBit: f.clientBit, RequestID: f.reqID}
	if f.body == nil && f.buffered == nil && f.spooled == nil && f.url != nil {
		hr.Method, hr.Path, hr.Query = f.r.Method, f.url.Path, f.url.RawQuery
	}
	return hr
}

// settle hands the request's failed attempts on p to attribution.
func (f *forwarder) settle(p *health.Pool, hr *health.Request) {
	if f.nfails == 0 {
		return
	}
	f.attr = p.Settle(hr, f.fails[:f.nfails], f.sameTwice, f.now)
}

// discard closes a response we will not pass on. A little of its body is
// read first so that the connection can be kept.
func discard(resp *http.Response, h *health.Host) {
	io.CopyN(io.Discard, resp.Body, 4<<10)
	resp.Body.Close()
	h.Release()
}

func isIdempotent(method string) bool {
	switch method {
	case "GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE":
		return true
	}
	return false
}

// clientKey is the attribution key of the request's client: its address,
// or a header when configured. Behind a trusted proxy the address is the
// client's (from X-Forwarded-For) and the header is believed; from anyone
// else the header is ignored, so a client cannot choose its own key. The
// common case (an untrusted peer) does not allocate.
func clientKey(r *http.Request, header string, peerTrusted bool, trusted []netip.Prefix) string {
	if !peerTrusted {
		return hostOf(r.RemoteAddr)
	}
	if header != "" {
		if v := r.Header[header]; len(v) > 0 && v[0] != "" {
			return v[0]
		}
	}
	ip, _ := edge.ClientIP(r, trusted)
	return ip.String()
}

func (f *forwarder) hashKey() uint64 {
	be := f.backend()
	switch be.HashKind {
	case "":
		return 0
	case "header":
		if v := f.r.Header.Get(be.HashName); v != "" {
			return balance.HashString(v)
		}
	case "cookie":
		if c, err := f.r.Cookie(be.HashName); err == nil && c.Value != "" {
			return balance.HashString(c.Value)
		}
	}
	return balance.HashString(f.clientKey)
}

// attempt sends the request to host. It returns the response, or nil, the
// class of the failure and the error.
func (f *forwarder) attempt(host *health.Host) (*http.Response, outcome.Class, error) {
	f.url.Host = host.Target
	if f.buffered != nil {
		f.out.Body = io.NopCloser(bytes.NewReader(f.buffered))
	} else if f.spooled != nil {
		f.out.Body = f.spooled.Reader()
	}
	be := f.be
	if be.Host != nil && be.Host.UsesProxyHost() {
		v := f.templateVars()
		v.ProxyHost = proxyHost(host.Addr, f.url.Scheme)
		f.out.Host = be.Host.Expand(v)
	}
	host.Acquire()
	if f.times != nil {
		f.times.start()
	}
	resp, err := be.Upstream.RoundTrip(f.out)
	if f.times != nil {
		f.times.header()
	}
	if err != nil {
		host.Release()
		if err := f.body.failure(); err != nil && (f.r.Context().Err() == nil || clientBroke(err)) {
			// The attempt failed because the client's body did.
			return nil, outcome.ClientBodyError, err
		}
		gone := f.r.Context().Err() != nil || f.callerGone()
		if !gone && f.deadlinePassed() {
			// The route's deadline ended the attempt. An HTTP/2 transport
			// may report the stream reset it sent, or the backend's own
			// (a gRPC backend is told the deadline and keeps it too),
			// before the context's timer has fired; the cause is the
			// deadline either way.
			return nil, outcome.ResponseTimeout, err
		}
		return nil, outcome.Classify(err, gone), err
	}
	return resp, outcome.OK, nil
}

// deadlinePassed reports whether the request's deadline (the route's
// total, or a gRPC call's) has passed: by the clock, not only by the
// context, whose timer may not have fired yet.
func (f *forwarder) deadlinePassed() bool {
	if f.ctx.Err() == context.DeadlineExceeded {
		return true
	}
	dl, ok := f.ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// bodySent is how many request body bytes an attempt that ended in c sent.
func (f *forwarder) bodySent(c outcome.Class) int64 {
	switch {
	case !c.Sent():
		return 0
	case f.buffered != nil:
		return int64(len(f.buffered))
	case f.spooled != nil:
		return f.spooled.Size()
	case f.body != nil:
		return f.body.read.Load()
	}
	return 0
}
