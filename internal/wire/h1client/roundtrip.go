package h1client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"syscall"
	"time"

	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// maxWriteWait is how long a finished response waits for its request
// body goroutine to report before the connection is given up, as
// http.Transport's maxWriteWaitBeforeConnReuse.
const maxWriteWait = 50 * time.Millisecond

// exchange is the connection's side of one round trip, kept until the
// response body ends so that the connection can be handed back.
type exchange struct {
	pc     *conn
	ctx    context.Context
	stop   func() bool // stops the context.AfterFunc; nil without one
	w      *bodyWriter // nil when the body was written synchronously
	keep   bool        // request and response allow another exchange
	reused bool
	done   bool
}

// finish ends the exchange: the connection goes back to the pool when
// clean and nothing else forbids it, and is closed otherwise.
func (x *exchange) finish(clean bool) {
	if x.done {
		return
	}
	x.done = true
	pc := x.pc
	reuse := clean && x.keep
	if x.stop != nil && !x.stop() {
		reuse = false // the context ended: the deadlines are expired
	}
	if x.w != nil {
		if reuse && !x.w.finished(maxWriteWait) {
			reuse = false // the backend answered before reading the whole body
		} else if x.w.finished(0) {
			pc.async = false
			if x.w.srcErr != nil || x.w.wireErr != nil {
				reuse = false
			}
		}
	}
	if pc.aborted.Load() {
		reuse = false
	}
	if reuse {
		pc.releaseReader()
		pc.hp.put(pc)
	} else {
		pc.hp.discard(pc)
	}
}

// bodyError closes the connection after a failed body read and returns
// the error to report.
func (x *exchange) bodyError(err error) error {
	x.finish(false)
	if e := x.writerError(); e != nil {
		return e
	}
	if _, ok := err.(*BadResponseError); !ok {
		err = ctxErr(x.ctx, err)
	}
	return &Error{Phase: PhaseBody, Addr: x.pc.hp.addr, Reused: x.reused, Err: err}
}

// writerError is the request body's read error when the body goroutine
// ended with one.
func (x *exchange) writerError() error {
	if x.w == nil {
		return nil
	}
	select {
	case <-x.w.done:
		return x.w.srcErr
	default:
		return nil
	}
}

// roundTrip makes the exchange, and makes it once more on a new
// connection when a reused one failed as an idle connection the backend
// closed just as the request went out does (see staleFailure). That
// second try is the connection's, not a retry of the proxy's: no backend
// did anything wrong, and it costs no retry budget.
func (c *Client) roundTrip(req *http.Request) (*http.Response, error) {
	resp, err, again := c.exchange(req, false)
	if !again {
		return resp, err
	}
	var first *Error
	errors.As(err, &first)
	if req.Body != nil && req.Body != http.NoBody {
		body, gerr := req.GetBody()
		if gerr != nil {
			return nil, err
		}
		r2 := new(http.Request)
		*r2 = *req
		r2.Body = body
		req = r2
	}
	c.staleRetries.Add(1)
	resp, err, _ = c.exchange(req, true)
	var ue *Error
	if errors.As(err, &ue) && (first == nil || !first.unreceived) {
		ue.Resent = true
	}
	return resp, err
}

type noResendKey struct{}

// WithoutResend returns ctx marked so that a request made with it is never
// sent a second time after the keep-alive race: for a caller that has
// already sent the request elsewhere (a retry on another host), so that a
// request that kills backends reaches no more of them than the caller
// chose.
func WithoutResend(ctx context.Context) context.Context {
	return noResendCtx{ctx}
}

// noResendCtx is WithoutResend's mark. It is not context.WithValue's,
// which would hide an AfterFunc method of ctx (the native front end's
// request contexts have one): context.AfterFunc on it would then start a
// goroutine per request to wait for ctx.
type noResendCtx struct{ context.Context }

func (c noResendCtx) Value(key any) any {
	if key == (noResendKey{}) {
		return true
	}
	return c.Context.Value(key)
}

func (c noResendCtx) AfterFunc(f func()) (stop func() bool) { return afterFunc(c.Context, f) }

// KeepAfterFunc returns ctx, derived from base by values alone (an
// httptrace trace, a request id: context.WithValue), with base's own
// AfterFunc still in reach. context.WithValue hides it, and
// context.AfterFunc on the result, as every exchange makes, would wait
// for base in a goroutine per request. Only for a ctx that ends exactly
// when base does.
func KeepAfterFunc(ctx, base context.Context) context.Context {
	a, ok := base.(afterFuncer)
	if !ok || ctx == base {
		return ctx
	}
	if _, ok := ctx.(afterFuncer); ok {
		return ctx
	}
	return valuesOf{ctx, a}
}

// valuesOf is KeepAfterFunc's context: ctx's values, base's AfterFunc.
type valuesOf struct {
	context.Context
	base afterFuncer
}

func (c valuesOf) AfterFunc(f func()) (stop func() bool) { return c.base.AfterFunc(f) }

// afterFuncer is the context package's: a context that runs a function
// when it ends without the package's help.
type afterFuncer interface {
	AfterFunc(func()) func() bool
}

// afterFunc is context.AfterFunc, asked of ctx itself when it can: the
// package's allocates a context of its own, a closure and a place in the
// parent's children for each call.
func afterFunc(ctx context.Context, f func()) (stop func() bool) {
	if a, ok := ctx.(afterFuncer); ok {
		return a.AfterFunc(f)
	}
	return context.AfterFunc(ctx, f)
}

// StaleRetries counts the requests sent again on a new connection after
// a reused one turned out closed before any of the response arrived.
func (c *Client) StaleRetries() uint64 { return c.staleRetries.Load() }

// exchange is one try of a round trip, on a new connection when fresh. again
// reports a failure that may be tried once more on a new connection.
func (c *Client) exchange(req *http.Request, fresh bool) (_ *http.Response, _ error, again bool) {
	ctx := req.Context()
	if req.URL.Host == "" {
		closeBody(req)
		return nil, errors.New("upstream: no host in request URL"), false
	}
	addr := hostPort(req.URL.Host)
	if err := ctx.Err(); err != nil {
		closeBody(req)
		return nil, &Error{Phase: PhaseConnect, Addr: addr, Err: err}, false
	}
	// How the body goes: none, Content-Length, or chunked.
	body := req.Body
	if body == http.NoBody {
		body = nil
	}
	mode, cl := bodyNone, req.ContentLength
	switch {
	case body == nil:
		if cl > 0 {
			return nil, errors.New("upstream: request ContentLength > 0 with no body"), false
		}
	case cl > 0:
		mode = bodyFixed
	case cl < 0:
		mode = bodyChunked
	}

	// A request that could not be sent again, were the backend to close
	// the connection as it arrives, is careful which one it takes.
	cautious := !idempotent(req) || body != nil && req.GetBody == nil
	resendable := !cautious && !fresh && ctx.Value(noResendKey{}) == nil
	pc, err := c.hostPool(addr).get(ctx, fresh, cautious, resendable)
	if err != nil {
		if body != nil {
			body.Close()
		}
		return nil, &Error{Phase: PhaseConnect, Addr: addr, Err: err}, false
	}
	var first []byte // what was read from a body of unknown length
	if body != nil && cl == 0 {
		// ContentLength 0 with a body means unknown for net/http's client
		// (and is how the proxy hides a bodiless GET from http.Transport's
		// retries). Read once to tell an empty body from a stream.
		n, err := readSome(body, pc.probe[:])
		switch {
		case n > 0:
			mode, first = bodyChunked, pc.probe[:n]
		case err == io.EOF:
			body.Close()
			body = nil
		default:
			body.Close()
			pc.hp.put(pc) // nothing was written on it
			return nil, err, false
		}
	}
	in0, out0 := pc.wire.in.Load(), pc.wire.out.Load()
	r := &response{}
	x := &r.x
	x.pc, x.ctx, x.reused = pc, ctx, pc.used
	if _, ok := ctx.(afterFuncer); ok || ctx.Done() != nil {
		x.stop = afterFunc(ctx, pc.abortFn)
	}
	pc.awaiting.Store(true)
	fail := func(phase Phase, err error) (*http.Response, error, bool) {
		pc.awaiting.Store(false)
		// A reused connection the backend closed before any of the
		// response: the keep-alive race, or a request that killed it.
		// Whether the backend's close acknowledged the request tells
		// them apart, and is read before the connection is closed.
		noAnswer := x.reused && ctx.Err() == nil && closedEarly(err) && pc.wire.in.Load() == in0
		unreceived := noAnswer && errors.Is(err, io.EOF) && pc.unacked(out0)
		if x.w != nil && ctx.Err() != nil {
			// The context ended, perhaps because reading the request
			// body failed (net/http ends it on any error reading the
			// client's connection, a stalled upload's deadline
			// included): give the body goroutine a moment to say so, so
			// that the caller learns the body's error, not a
			// cancellation.
			x.w.finished(maxWriteWait)
		}
		x.finish(false)
		if e := x.writerError(); e != nil && !pc.cut.Load() {
			return nil, e, false
		}
		if _, ok := err.(*BadResponseError); !ok {
			err = ctxErr(ctx, err)
		}
		if pc.cut.Load() && ctx.Err() == nil {
			// The host was found dead while this request waited on it:
			// sending it again on a new connection to that host is no use.
			return nil, &Error{Phase: phase, Addr: addr, Reused: x.reused, Err: ErrCut}, false
		}
		if !noAnswer {
			return nil, &Error{Phase: phase, Addr: addr, Reused: x.reused, Err: err}, false
		}
		// The backend closed a connection it had kept alive, under a
		// request: whatever the reason, requests that cannot be sent
		// again are safer on new connections to it for a while.
		pc.hp.sawClosedSoon(0, time.Now())
		again := (body == nil || req.GetBody != nil) &&
			(idempotent(req) || unreceived || pc.wire.out.Load() == out0) &&
			ctx.Value(noResendKey{}) == nil
		if !again && (unreceived || isReset(err)) {
			// Not to be sent again, and the backend either never had it
			// or closed with it unread: the connection's staleness, not
			// the host's failure.
			err = fmt.Errorf("%w: %w", outcome.ErrStaleConnection, err)
		}
		return nil, &Error{Phase: phase, Addr: addr, Reused: true, unreceived: unreceived, Err: err}, again
	}

	pc.takeWriter()
	wantsClose, err := pc.writeHead(req, mode, cl)
	if err != nil {
		pc.awaiting.Store(false)
		x.finish(false)
		if body != nil {
			body.Close()
		}
		return nil, err, false
	}
	timeout := c.o.ResponseHeaderTimeout
	if mode == bodyNone || mode == bodyFixed && cl <= syncBodyMax {
		if mode == bodyFixed {
			srcErr, wireErr := pc.writeFixed(body, cl)
			body.Close()
			if srcErr != nil {
				pc.awaiting.Store(false)
				x.finish(false)
				return nil, srcErr, false
			}
			if wireErr != nil {
				return fail(PhaseWrite, wireErr)
			}
		}
		if timeout > 0 {
			pc.nc.SetReadDeadline(time.Now().Add(timeout))
			pc.headDeadline = false // replaced
		} else {
			pc.clearHeadDeadline()
		}
		if err := pc.flushAwait(); err != nil {
			return fail(PhaseWrite, err)
		}
	} else {
		pc.clearHeadDeadline() // the head is read while the body goes, unbounded until it is sent
		w := &bodyWriter{pc: pc, body: body, cl: cl, first: first, trailer: req.Trailer, timeout: timeout, done: make(chan struct{})}
		if mode == bodyChunked {
			w.cl = -1
		}
		x.w = w
		pc.async = true
		go w.run()
	}

	pc.takeReader()
	err = readResponse(pc.br, &pc.head, req.Method, r)
	pc.awaiting.Store(false)
	if cap(pc.head.buf) > 64<<10 {
		pc.head.buf = nil // a huge head: do not keep its buffer
	}
	if x.w != nil {
		x.w.headDone()
	} else if timeout > 0 {
		if err == nil && r.body.buffered(pc.br) {
			pc.headDeadline = true // nothing more is read for this exchange: leave it
		} else {
			pc.nc.SetReadDeadline(time.Time{})
		}
	}
	if err == nil && pc.aborted.Load() {
		// The deadline was expired (context or body goroutine) while being
		// cleared: report the cause.
		err = context.Canceled
	}
	if err != nil {
		return fail(PhaseHeader, err)
	}
	r.Request = req
	x.keep = !r.Close && !wantsClose
	if pc.keepFor = keepAliveFor(pc.head.keepAlive); pc.keepFor < 0 {
		x.keep = false
	}
	if r.body.kind == bodyNone {
		r.Body = http.NoBody
		x.finish(true)
	} else {
		r.body.x = x
		r.Body = &r.body
	}
	return &r.Response, nil, false
}

// closedEarly reports whether err is the connection closing under the
// request (EOF, reset, broken pipe), as a backend that closes an idle
// connection just as a request arrives makes it look; not a timeout, not
// a response that broke the rules.
func closedEarly(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED)
}

// isReset reports whether err is the backend resetting the connection.
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED)
}

// idempotent reports whether sending req twice is harmless (RFC 9110
// 9.2.2), or the client said so with an Idempotency-Key.
func idempotent(req *http.Request) bool {
	switch req.Method {
	case "", "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
		return true
	}
	_, ok := req.Header["Idempotency-Key"]
	return ok
}

// readSome reads into p until it gets a byte or an error.
func readSome(r io.Reader, p []byte) (int, error) {
	for range 100 {
		if n, err := r.Read(p); n > 0 || err != nil {
			return n, err
		}
	}
	return 0, io.ErrNoProgress
}

// hostPort adds the default port to a host without one.
func hostPort(h string) string {
	for i := len(h) - 1; i >= 0; i-- {
		switch h[i] {
		case ':':
			return h
		case ']':
			return h + ":80"
		}
	}
	return h + ":80"
}
