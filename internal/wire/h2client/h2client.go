// Package h2client sends requests to HTTP/2 backends: h2 over TLS (ALPN)
// and h2c (prior knowledge), for pools with protocol h2 or h2c, and so
// gRPC. It keeps a bounded set of connections per host address, each
// carrying at most a configured number of streams (fewer when the host's
// SETTINGS say so), and opens a new connection only when every open one
// is full.
//
// Errors say what happened in the terms of package outcome: a failure to
// connect is a dial error (nothing sent); a stream the backend refused
// before processing it (above a GOAWAY's last stream ID, REFUSED_STREAM,
// a connection that became unusable before the stream started) wraps
// outcome.ErrNotProcessed, so it is retried like a refused connection; a
// connection lost under a started stream is an EOF before the response;
// a stream reset by the backend is a reset. The client never retries.
//
// Connections come from net/http's Transport.NewClientConn (Go 1.26):
// the standard library's HTTP/2 implementation, with sturdy's pool over
// it.
package h2client

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sturdyproxy/sturdy/internal/outcome"
	"github.com/sturdyproxy/sturdy/internal/wire/h2conn"
)

// Options configures a Client.
type Options struct {
	// TLS, when set, speaks h2 over TLS (offering only h2 in ALPN);
	// nil speaks h2c with prior knowledge.
	TLS *tls.Config
	// ConnectTimeout bounds dialing and the TLS handshake. 0: none beyond
	// the request's context.
	ConnectTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for the response headers,
	// counted from the end of the request body. 0: no limit.
	ResponseHeaderTimeout time.Duration
	// IdleTimeout closes connections without streams for that long.
	// 0: kept until the backend closes them.
	IdleTimeout time.Duration
	// MaxConnsPerHost bounds the connections per host address; a request
	// that finds them all full waits for a free stream until its context
	// ends. 0: no limit (a new connection when all are full).
	MaxConnsPerHost int
	// MaxStreamsPerConn bounds the requests in flight on one connection;
	// the host's own SETTINGS_MAX_CONCURRENT_STREAMS applies when lower.
	// 0: the host's limit alone.
	MaxStreamsPerConn int
	// DialContext dials (sturdy passes its background resolver's).
	// nil: a net.Dialer with ConnectTimeout.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// Fallback sends what HTTP/2 cannot carry to a backend: HTTP/1.1
	// Upgrade requests (WebSockets). nil: those fail.
	Fallback http.RoundTripper
}

// Client is an HTTP/2 client with a bounded connection pool per host
// address. It is safe for concurrent use.
type Client struct {
	o      Options
	t      *http.Transport
	scheme string

	mu     sync.Mutex
	hosts  map[string]*hostConns // guarded by mu
	closed bool                  // guarded by mu
}

// New returns a client for o. It starts no goroutine; connections are
// dialed on demand.
func New(o Options) *Client {
	dial := o.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	wrap := h2conn.Wrap
	if o.TLS != nil {
		wrap = h2conn.WrapUnderTLS
	}
	// The transport flushes after a request's headers and after each of
	// its DATA frames: batched, a gRPC call's HEADERS, DATA and END_STREAM
	// leave in one write instead of three.
	dialBatched := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return wrap(c), nil
	}
	p := new(http.Protocols)
	scheme := "http"
	var tc *tls.Config
	if o.TLS != nil {
		p.SetHTTP2(true)
		scheme = "https"
		tc = o.TLS.Clone()
		tc.NextProtos = []string{"h2"}
	} else {
		p.SetUnencryptedHTTP2(true)
	}
	t := &http.Transport{
		Proxy:                  nil,
		DialContext:            dialBatched,
		TLSClientConfig:        tc,
		TLSHandshakeTimeout:    o.ConnectTimeout,
		IdleConnTimeout:        o.IdleTimeout,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 1 << 20,
		Protocols:              p,
		// A connection that went quiet is probed with a PING; one that
		// does not answer is closed, and its streams fail as lost.
		HTTP2: &http.HTTP2Config{SendPingTimeout: 30 * time.Second, PingTimeout: 15 * time.Second},
	}
	return &Client{o: o, t: t, scheme: scheme, hosts: map[string]*hostConns{}}
}

// RoundTrip sends req on a connection to req.URL.Host and returns the
// response once its headers arrived; the caller reads and closes the body
// (trailers are in resp.Trailer after the body's end).
func (c *Client) RoundTrip(req *http.Request) (*http.Response, error) {
	if isUpgrade(req) {
		if c.o.Fallback == nil {
			closeBody(req)
			return nil, errors.New("h2client: an Upgrade request cannot be sent over HTTP/2")
		}
		return c.o.Fallback.RoundTrip(req)
	}
	h, err := c.host(req.URL.Host)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	cc, err := h.get(req.Context(), c)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	out := req.WithContext(ctx)
	w := &headerWait{d: c.o.ResponseHeaderTimeout, cancel: cancel}
	if req.Body == nil || req.Body == http.NoBody {
		w.arm()
	} else {
		out.Body = &sentBody{ReadCloser: req.Body, left: req.ContentLength, w: w}
	}
	resp, err := cc.RoundTrip(out)
	timedOut := w.stop()
	if err != nil {
		cancel(nil)
		if timedOut {
			return nil, &Error{Err: err, kind: errHeaderTimeout}
		}
		return nil, classify(err)
	}
	resp.Body = &respBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

func (c *Client) host(addr string) (*hostConns, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("h2client: the client is closed (the config that used it was replaced)")
	}
	h := c.hosts[addr]
	if h == nil {
		h = &hostConns{addr: addr, wake: make(chan struct{})}
		c.hosts[addr] = h
	}
	return h, nil
}

// Close closes idle connections at once and the others when their last
// stream ends; requests in flight finish. Later requests fail.
func (c *Client) Close() {
	c.mu.Lock()
	c.closed = true
	hosts := c.hosts
	c.mu.Unlock()
	for _, h := range hosts {
		h.close()
	}
}

// hostConns are the connections to one host address.
type hostConns struct {
	addr string

	mu      sync.Mutex
	conns   []*http.ClientConn // guarded by mu
	dialing int                // guarded by mu
	// closing is read by the state hook, which a connection may run
	// synchronously from Reserve, called under mu: so not under mu.
	closing atomic.Bool

	// wakeMu guards wake, which is closed (and replaced) when a stream
	// ends, a connection opens or closes. It is never held while calling
	// into a connection: a connection's state hook takes it.
	wakeMu sync.Mutex
	wake   chan struct{}
}

// get returns a connection with a stream reserved for one RoundTrip: an
// open one with room, a new one while the host has fewer than
// MaxConnsPerHost, or the first to free a stream.
func (h *hostConns) get(ctx context.Context, c *Client) (*http.ClientConn, error) {
	for {
		wake := h.waiter()
		h.mu.Lock()
		if cc := h.pickLocked(c.o.MaxStreamsPerConn); cc != nil {
			h.mu.Unlock()
			return cc, nil
		}
		if c.o.MaxConnsPerHost <= 0 || len(h.conns)+h.dialing < c.o.MaxConnsPerHost {
			h.dialing++
			h.mu.Unlock()
			cc, err := c.dial(ctx, h.addr)
			h.mu.Lock()
			h.dialing--
			if err != nil {
				h.mu.Unlock()
				h.signal() // a waiter may dial in our place
				return nil, err
			}
			cc.SetStateHook(func(cc *http.ClientConn) { h.changed(cc) })
			h.conns = append(h.conns, cc)
			ok := cc.Reserve() == nil
			h.mu.Unlock()
			// The connection's other streams are for the waiters: a new
			// connection runs no state hook until its state changes.
			h.signal()
			if ok {
				return cc, nil
			}
			continue // closed at once: look again
		}
		h.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			// Every stream was taken until the deadline: nothing was
			// sent, like a connection that could not be made in time.
			return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: fixedAddr(h.addr), Err: ctx.Err()}
		}
	}
}

// pickLocked reserves a stream on the open connection with the fewest in
// flight that has room, dropping closed connections on the way.
func (h *hostConns) pickLocked(maxStreams int) *http.ClientConn {
	var best *http.ClientConn
	bestN := 0
	live := h.conns[:0]
	for _, cc := range h.conns {
		if cc.Err() != nil {
			continue
		}
		live = append(live, cc)
		n := cc.InFlight()
		if cc.Available() > 0 && (maxStreams <= 0 || n < maxStreams) && (best == nil || n < bestN) {
			best, bestN = cc, n
		}
	}
	clear(h.conns[len(live):])
	h.conns = live
	if best != nil && best.Reserve() == nil {
		return best
	}
	return nil
}

func (h *hostConns) waiter() <-chan struct{} {
	h.wakeMu.Lock()
	defer h.wakeMu.Unlock()
	return h.wake
}

func (h *hostConns) signal() {
	h.wakeMu.Lock()
	close(h.wake)
	h.wake = make(chan struct{})
	h.wakeMu.Unlock()
}

// changed is a connection's state hook: a stream ended, the host raised
// its limit, or the connection closed.
func (h *hostConns) changed(cc *http.ClientConn) {
	h.signal()
	if h.closing.Load() && cc.InFlight() == 0 {
		cc.Close()
	}
}

func (h *hostConns) close() {
	h.closing.Store(true)
	h.mu.Lock()
	conns := append([]*http.ClientConn(nil), h.conns...)
	h.mu.Unlock()
	for _, cc := range conns {
		if cc.InFlight() == 0 {
			cc.Close()
		}
	}
	h.signal()
}

// dial opens a connection. Every failure here happened before anything
// was sent, and says so as a dial error (TLS failures stay TLS failures).
func (c *Client) dial(ctx context.Context, addr string) (*http.ClientConn, error) {
	cc, err := c.t.NewClientConn(ctx, c.scheme, addr)
	if err == nil {
		return cc, nil
	}
	var op *net.OpError
	var de *net.DNSError
	if (errors.As(err, &op) && op.Op == "dial") || errors.As(err, &de) || isTLSError(err) {
		return nil, err
	}
	return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: fixedAddr(addr), Err: err}
}

func isTLSError(err error) bool {
	var rh tls.RecordHeaderError
	var ae tls.AlertError
	var ce *tls.CertificateVerificationError
	return errors.As(err, &rh) || errors.As(err, &ae) || errors.As(err, &ce)
}

type fixedAddr string

func (a fixedAddr) Network() string { return "tcp" }
func (a fixedAddr) String() string  { return string(a) }

// Error is a round trip's failure with what it means for the health
// model: it unwraps to both the original error and the class's cause.
type Error struct {
	Err  error
	kind error
}

func (e *Error) Error() string   { return e.kind.Error() + ": " + e.Err.Error() }
func (e *Error) Unwrap() []error { return []error{e.kind, e.Err} }

type timeoutError struct{ msg string }

func (e timeoutError) Error() string { return e.msg }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

var (
	errHeaderTimeout = timeoutError{"h2client: timeout awaiting response headers"}
	errStreamReset   = errors.Join(errors.New("h2client: the backend reset the stream"), syscall.ECONNRESET)
	errLost          = errors.Join(errors.New("h2client: the connection was lost under the stream"), io.ErrUnexpectedEOF)
)

// classify gives a RoundTrip error its meaning. net/http's HTTP/2 errors
// are not exported types, so the known ones are matched by their text; a
// test against a real server that sends GOAWAY and REFUSED_STREAM keeps
// this honest.
func classify(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	s := err.Error()
	switch {
	case strings.Contains(s, "graceful shutdown GOAWAY"), // stream above the GOAWAY's last stream ID
		strings.Contains(s, "REFUSED_STREAM"),
		strings.Contains(s, "client conn not usable"),
		strings.Contains(s, "client conn could not be established"):
		return &Error{Err: err, kind: outcome.ErrNotProcessed}
	case strings.Contains(s, "stream error:"):
		return &Error{Err: err, kind: errStreamReset}
	case strings.Contains(s, "connection lost"), strings.Contains(s, "GOAWAY and closed"),
		strings.Contains(s, "client conn is closed"):
		return &Error{Err: err, kind: errLost}
	}
	return err
}

// headerWait is the response-header timeout of one round trip: armed
// when the request body has been read to its end, stopped when RoundTrip
// returns.
type headerWait struct {
	d      time.Duration
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	t        *time.Timer // guarded by mu
	stopped  bool        // guarded by mu
	timedOut bool        // guarded by mu
}

func (w *headerWait) arm() {
	if w.d <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || w.t != nil {
		return
	}
	w.t = time.AfterFunc(w.d, func() {
		w.mu.Lock()
		fire := !w.stopped
		w.timedOut = fire
		w.mu.Unlock()
		if fire {
			w.cancel(errHeaderTimeout)
		}
	})
}

// stop disarms the timer and reports whether it had fired.
func (w *headerWait) stop() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	if w.t != nil {
		w.t.Stop()
	}
	return w.timedOut
}

// sentBody arms the header timeout once the request body is all read.
type sentBody struct {
	io.ReadCloser
	left int64 // bytes still expected when the length is known
	w    *headerWait
}

func (b *sentBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.left > 0 {
		b.left -= int64(n)
	}
	if err == io.EOF || (b.left == 0 && n > 0) {
		b.w.arm()
	}
	return n, err
}

// respBody ends the round trip's context with the body, which also
// resets a stream closed before its end.
type respBody struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
	once   sync.Once
}

func (b *respBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() { b.cancel(nil) })
	return err
}

func isUpgrade(r *http.Request) bool {
	_, ok := r.Header["Upgrade"]
	return ok
}

func closeBody(r *http.Request) {
	if r.Body != nil {
		r.Body.Close()
	}
}
