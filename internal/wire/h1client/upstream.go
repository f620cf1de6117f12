// Package h1client is a strict, synchronous HTTP/1.1 client for plain-HTTP
// backends: the proxy's hot path to its upstreams.
//
// A round trip runs on the caller's goroutine: it takes a pooled
// connection (or dials one), writes the request with one buffered write,
// and reads the response head itself. There is no read or write loop
// goroutine per connection and no timer per request: the response-header
// timeout is a read deadline, and the request's context is honoured by a
// context.AfterFunc that expires the connection's deadlines. Only request
// bodies over 64 KiB or of unknown length are written by a goroutine of
// their own (see syncBodyMax).
//
// The client never retries on another host, and never retries a request
// that may have reached the backend's application. Stale idle connections
// are caught before use by a non-blocking liveness check; the race that
// check cannot see (the backend closes an idle connection just as the
// request goes out) is the one case sent again, once, on a new
// connection: the connection was reused, not one byte of the response
// arrived, the connection closed or reset, and the request is idempotent
// (or nothing of it was written, or the backend's close acknowledged none
// of it: see conn.unacked) with a body that is empty or can be had again
// (Request.GetBody). net/http's Transport and nginx do the same, but for
// that proof. A request that cannot be sent again and meets the race
// fails with outcome.ErrStaleConnection, the connection's doing.
//
// What can be seen coming is avoided: a connection is not reused after
// Connection: close, nor past its backend's Keep-Alive timeout; a request
// that could not be sent again takes no connection idle for more than
// cautiousIdle, nor any idle one of a host seen closing connections soon
// after responses (see hostPool.get).
//
// Responses are parsed strictly, so that the proxy and the backend can
// never disagree about where a response ends (response smuggling): see
// head.read and head.frame for the rules. What the client does not handle
// (https, Upgrade, Expect: 100-continue, CONNECT) goes to Options.Fallback.
package h1client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configures a Client. The zero value is usable, but then requests
// that need the fallback fail.
type Options struct {
	// ConnectTimeout bounds dialing a new connection. 0 means no limit
	// beyond the request's context and the operating system's.
	ConnectTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for the response head, counted
	// from the moment the whole request (body included) was written.
	// 0 means no limit.
	ResponseHeaderTimeout time.Duration
	// MaxIdlePerHost bounds the idle connections kept per host address.
	// 0 means DefaultMaxIdlePerHost; negative means none are kept.
	MaxIdlePerHost int
	// MaxConnsPerHost bounds all connections per host address: dialing,
	// in use and idle. When the host is full a request waits for a
	// connection (or a free slot) until its context ends. 0 means no limit.
	MaxConnsPerHost int
	// IdleTimeout closes connections idle for longer. 0 means idle
	// connections are kept until the backend closes them.
	IdleTimeout time.Duration
	// ReadBufferSize and WriteBufferSize size each connection's buffers.
	// 0 means DefaultBufferSize.
	ReadBufferSize, WriteBufferSize int
	// DialContext, when set, dials instead of a net.Dialer with
	// ConnectTimeout (sturdy passes its background DNS resolver's).
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// Fallback sends the requests this client does not handle: other
	// schemes than http, Upgrade requests, Expect: 100-continue and
	// CONNECT. nil means such requests fail with an error.
	Fallback http.RoundTripper
}

// Defaults for zero Options fields.
const (
	DefaultMaxIdlePerHost = 2
	DefaultBufferSize     = 32 << 10
)

// maxHeaderBytes bounds the response head: status line and header fields
// of the final response and of any 1xx before it, like http.Transport's
// MaxResponseHeaderBytes as sturdy sets it.
const maxHeaderBytes = 1 << 20

// syncBodyMax is the largest request body written on the caller's
// goroutine before the response is read. Larger bodies, and bodies of
// unknown length, are written by a goroutine of their own so that a
// backend may answer before it has read the whole body (an early 413, or
// a full-duplex stream) without both sides blocking on full buffers.
const syncBodyMax = 64 << 10

// Client is an HTTP/1.1 client with a connection pool per host address.
// It is safe for concurrent use.
type Client struct {
	o       Options
	maxIdle int
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)

	hosts sync.Map // addr → *hostPool

	staleRetries atomic.Uint64 // see StaleRetries
	// trust is trustIdle unless a test sets it: how long an idle
	// connection skips the liveness check for a resendable request.
	trust time.Duration

	closed    atomic.Bool
	janitorOn atomic.Bool // an idle-connection janitor goroutine is running
	janitorWG sync.WaitGroup
	done      chan struct{} // closed by Close; stops the janitor
	closeOnce sync.Once

	rbufs, wbufs sync.Pool // *bufio.Reader, *bufio.Writer of the configured sizes
}

// New returns a client configured by o.
func New(o Options) *Client {
	if o.ReadBufferSize <= 0 {
		o.ReadBufferSize = DefaultBufferSize
	}
	if o.WriteBufferSize <= 0 {
		o.WriteBufferSize = DefaultBufferSize
	}
	c := &Client{o: o, dial: o.DialContext, done: make(chan struct{}), trust: trustIdle}
	if c.dial == nil {
		c.dial = (&net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	switch {
	case o.MaxIdlePerHost == 0:
		c.maxIdle = DefaultMaxIdlePerHost
	case o.MaxIdlePerHost > 0:
		c.maxIdle = o.MaxIdlePerHost
	}
	return c
}

// RoundTrip sends req and returns the response once its head has arrived;
// the caller reads and closes the body. It implements http.RoundTripper
// and never retries, but for the stale-connection race (see the package
// doc). Errors from the connection are *Error values that
// wrap what the network said (a *net.OpError from dialing, a timeout,
// syscall.ECONNRESET, io.EOF or io.ErrUnexpectedEOF when the backend
// closed first) or a *BadResponseError. An error reading req.Body is
// returned as it is.
func (c *Client) RoundTrip(req *http.Request) (*http.Response, error) {
	if why := c.unhandled(req); why != "" {
		if c.o.Fallback == nil {
			closeBody(req)
			return nil, errors.New("upstream: no fallback transport for " + why)
		}
		return c.o.Fallback.RoundTrip(req)
	}
	return c.roundTrip(req)
}

// unhandled says why req must go to the fallback, or "" when it need not.
func (c *Client) unhandled(req *http.Request) string {
	if req.URL == nil {
		return "a request without URL"
	}
	if req.URL.Scheme != "http" {
		return "scheme " + req.URL.Scheme
	}
	if req.Method == http.MethodConnect {
		return "CONNECT"
	}
	h := req.Header
	if len(h) == 0 {
		return ""
	}
	if _, ok := h["Upgrade"]; ok {
		return "Upgrade"
	}
	if ex, ok := h["Expect"]; ok {
		for _, v := range ex {
			if strings.EqualFold(strings.TrimSpace(v), "100-continue") {
				return "Expect: 100-continue"
			}
		}
	}
	return ""
}

// CloseIdleConnections closes the idle connections of every host, and
// those of the fallback when it has such a method. Connections in use are
// not affected and may become idle afterwards.
func (c *Client) CloseIdleConnections() {
	c.hosts.Range(func(_, v any) bool {
		v.(*hostPool).closeIdle(false)
		return true
	})
	if f, ok := c.o.Fallback.(interface{ CloseIdleConnections() }); ok {
		f.CloseIdleConnections()
	}
}

// ErrCut is the error of a request whose wait for a response was ended by
// Cut: the host was found dead while the request waited on it. The request
// was sent; whether it may be sent elsewhere is the caller's decision.
var ErrCut = errors.New("upstream: the wait for a response was cut: the host was marked down")

// Close closes the idle connections and stops keeping any: connections in
// use are closed when their response ends. Requests may still be made.
func (c *Client) Close() {
	c.closed.Store(true)
	c.closeOnce.Do(func() { close(c.done) })
	c.CloseIdleConnections()
	c.janitorWG.Wait()
}

// Phase is the step of a round trip that failed.
type Phase uint8

// Phases, in order.
const (
	// PhaseConnect is waiting for a connection slot or dialing: nothing of
	// the request was sent.
	PhaseConnect Phase = iota + 1
	// PhaseWrite is writing the request.
	PhaseWrite
	// PhaseHeader is waiting for and reading the response head.
	PhaseHeader
	// PhaseBody is reading the response body.
	PhaseBody
)

func (p Phase) String() string {
	switch p {
	case PhaseConnect:
		return "connect"
	case PhaseWrite:
		return "write request"
	case PhaseHeader:
		return "read response head"
	case PhaseBody:
		return "read response body"
	}
	return "unknown phase"
}

// Error is a failed round trip or body read: where it failed, and why.
type Error struct {
	Phase Phase
	Addr  string // the backend's address
	// Reused reports whether the connection had carried an earlier
	// request: a failure there may be the backend closing an idle
	// connection just as the request went out.
	Reused bool
	// Resent reports that this failure is the request's second send: the
	// first, on a reused connection, failed before any of the response
	// arrived (the keep-alive race), and the request went again on a new
	// connection and failed too. Twice on two connections, it is likely
	// the request that fails, not the connection.
	Resent bool
	Err    error
	// unreceived: the backend's close did not acknowledge any byte of
	// the request (see conn.unacked).
	unreceived bool
}

func (e *Error) Error() string {
	return "upstream " + e.Addr + ": " + e.Phase.String() + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// BadResponseError is a response that breaks the protocol or the strict
// rules of this client. The connection it came on is closed.
type BadResponseError struct{ Reason string }

func (e *BadResponseError) Error() string { return "malformed response: " + e.Reason }

func bad(reason string) error { return &BadResponseError{Reason: reason} }

// aLongTimeAgo is a deadline in the past: setting it fails blocked and
// future reads and writes at once.
var aLongTimeAgo = time.Unix(1, 0)

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// ctxErr returns the context's error when it ended, else err.
func ctxErr(ctx context.Context, err error) error {
	if e := ctx.Err(); e != nil {
		return e
	}
	return err
}
