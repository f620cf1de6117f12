package server

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// httpConns follows the connections of one net/http server, so that its
// drain can tell when none of them will read another request.
//
// Why: once Server.Shutdown has begun, net/http's connection closes,
// without an answer, any request it reads from then on (conn.serve checks
// shuttingDown right after readRequest; golang/go#75591). On a kept-alive
// connection the client may retry; on a new one, handed to the server a
// moment before a reload retired it or the process exited, it cannot
// (Go's Transport does not retry on a fresh connection), and the request
// is lost. So the drain turns keep-alives off first (every answer from
// then on closes its connection), and calls Shutdown only when each
// connection has closed, is in a handler, has begun a request since, or
// is HTTP/2 (Shutdown ends those with GOAWAY, which loses nothing).
type httpConns struct {
	mu    sync.Mutex
	conns map[net.Conn]*httpConn
	// draining is set once keep-alives are off: a request that begins
	// after it is its connection's last.
	draining atomic.Bool
}

// httpConn is one connection's part in the drain.
type httpConn struct {
	born      time.Time
	inHandler atomic.Int32
	last      atomic.Bool // a request began after draining was set
	h2        atomic.Bool
}

type httpConnKey struct{}

// add is the server's ConnContext: it starts following c.
func (d *httpConns) add(ctx context.Context, c net.Conn) context.Context {
	hc := &httpConn{born: time.Now()}
	d.mu.Lock()
	if d.conns == nil {
		d.conns = make(map[net.Conn]*httpConn)
	}
	d.conns[c] = hc
	d.mu.Unlock()
	return context.WithValue(ctx, httpConnKey{}, hc)
}

// state is the server's ConnState: a closed or hijacked connection is no
// longer the server's.
func (d *httpConns) state(c net.Conn, st http.ConnState) {
	if st == http.StateClosed || st == http.StateHijacked {
		d.mu.Lock()
		delete(d.conns, c)
		d.mu.Unlock()
	}
}

// wrap marks, around h, which connections are in a handler and which have
// begun a request since the drain began.
func (d *httpConns) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hc, _ := r.Context().Value(httpConnKey{}).(*httpConn)
		if hc == nil {
			h.ServeHTTP(w, r)
			return
		}
		hc.inHandler.Add(1)
		defer hc.inHandler.Add(-1)
		if r.ProtoMajor == 2 {
			hc.h2.Store(true)
		}
		if d.draining.Load() {
			hc.last.Store(true)
		}
		h.ServeHTTP(w, r)
	})
}

// newConnGrace is how long a drain waits for a connection's next request
// (from when the drain began or the connection was accepted, whichever
// is later): net/http's Shutdown leaves a new connection that long too.
const newConnGrace = 5 * time.Second

// quiesce turns srv's keep-alives off and waits until none of its
// connections will read another request (see httpConns), for at most
// newConnGrace per connection, or until ctx ends. Idle connections are
// closed as they are found (a client may retry on those, as on any
// kept-alive connection the server closes).
func (d *httpConns) quiesce(ctx context.Context, srv *http.Server) {
	// Keep-alives go off before draining is set, so that a request marked
	// last has its answer sent after keep-alives went off.
	srv.SetKeepAlivesEnabled(false) // closes the idle ones
	d.draining.Store(true)
	start := time.Now()
	wait := time.Millisecond
	for d.waiting(start) {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, 50*time.Millisecond)
		// Connections that went idle meanwhile (their answer began before
		// keep-alives went off) and new ones past net/http's grace.
		srv.SetKeepAlivesEnabled(false)
	}
}

// waiting reports whether a connection may still read a request that
// Shutdown would drop.
func (d *httpConns) waiting(start time.Time) bool {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, hc := range d.conns {
		if hc.h2.Load() || hc.last.Load() || hc.inHandler.Load() > 0 {
			continue
		}
		from := start
		if hc.born.After(from) {
			from = hc.born
		}
		if now.Sub(from) < newConnGrace {
			return true
		}
	}
	return false
}
