// Package h1 is sturdy's own HTTP/1.1 server for plain-text client
// connections: a second front end beside net/http's server, feeding the
// same http.Handler (the proxy core), so that routing, attribution,
// retries and answers stay one.
//
// It serves only the common case, and hands everything else to net/http:
// a request it does not accept in full (chunked or any Transfer-Encoding,
// Expect, Upgrade, CONNECT, absolute-form or asterisk targets, HTTP/2's
// preface, a repeated or unusual Content-Length, obs-fold, a bare LF, any
// byte outside the rules of field lines, a head larger than its buffer)
// goes, with its connection and every byte read from it so far, to
// Server.Handoff: net/http's server, which answers it as it always has.
// So this server only has to be right about what it accepts, and the
// differential fuzz test holds it to that: whatever it accepts, net/http
// reads identically.
//
// What it buys over net/http: an idle keep-alive connection holds no
// buffer (no 8 KiB of bufio per connection), and once idle for a second
// no goroutine either: on Linux it waits in one epoll set shared by the
// server's long-idle connections (see parker); the request head is
// parsed in place into one string, and the client's going away is
// watched by the goroutine that waits for readability rather than by a
// background read started and stopped per request.
package h1

import (
	"context"
	"errors"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Server serves HTTP/1.1 on plain-text connections. The zero value is not
// usable: Handler and Handoff are required.
type Server struct {
	// Handler answers every request the server accepts.
	Handler http.Handler
	// Handoff takes over a connection this server does not serve: Read on
	// it returns the bytes already read first. It reports false when it
	// cannot take it (then the connection is closed).
	Handoff func(net.Conn) bool
	// ConnContext, when set, derives each connection's context.
	ConnContext func(ctx context.Context, c net.Conn) context.Context
	// ReadHeaderTimeout bounds the wait for a connection's first request
	// and the reading of every request head.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle for that long;
	// 0 means ReadHeaderTimeout.
	IdleTimeout time.Duration
	// MaxHeaderBytes: a longer head is handed off (net/http answers 431).
	MaxHeaderBytes int
	// ErrorLog receives handler panics; nil means the log package's.
	ErrorLog *log.Logger

	park time.Duration // parkTime unless a test sets it
	base time.Time     // the origin of mono, set when the server is made

	closing atomic.Bool
	serving sync.WaitGroup // Serve's loops, which Shutdown waits for
	handing atomic.Int64   // connections being given to Handoff
	mu      sync.Mutex
	ln      net.Listener
	conns   map[*conn]struct{}
	parked  parker // long-idle connections, without a goroutine
	date    atomic.Pointer[dateLine]
}

// newConnGrace is how long Shutdown leaves a new connection that has
// sent nothing yet (net/http's is 5 s).
const newConnGrace = 5 * time.Second

// ErrServerClosed is http.ErrServerClosed: Serve returns it after
// Shutdown or Close, as net/http's server does.
var ErrServerClosed = http.ErrServerClosed

// Serve accepts connections on l until it fails or the server is shut
// down. Each connection must be a *net.TCPConn (or offer SyscallConn).
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.serving.Add(1)
	defer s.serving.Done()
	s.ln = l
	if s.conns == nil {
		s.conns = make(map[*conn]struct{})
		s.base = time.Now()
		s.parked.init(s)
	}
	s.mu.Unlock()
	var pause time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.closing.Load() || errors.Is(err, net.ErrClosed) {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				pause = min(max(2*pause, 5*time.Millisecond), time.Second)
				time.Sleep(pause)
				continue
			}
			return err
		}
		pause = 0
		c, err := s.newConn(nc)
		if err != nil {
			nc.Close()
			continue
		}
		if !s.track(c) {
			// Accepted as Shutdown began: net/http's server, which shuts
			// down after this one, gives it a new connection's grace.
			if s.Handoff == nil || !s.Handoff(nc) {
				nc.Close()
			}
			continue
		}
		go c.watch()
	}
}

func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Shutdown stops accepting, closes idle connections, and waits for the
// others to finish their request and close, or for ctx to end.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing.Store(true)
	s.mu.Unlock()
	s.closeListener()
	// A connection accepted as the listener closed is handed off by Serve
	// (see Serve): done before Shutdown returns, so that the Handoff's
	// server, shut down after this one, still takes it.
	s.serving.Wait()
	wait := time.Millisecond
	for {
		if s.closeIdle() == 0 {
			s.parked.stop()
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// Close stops accepting and closes every connection at once.
func (s *Server) Close() error {
	s.closing.Store(true)
	s.closeListener()
	s.mu.Lock()
	for c := range s.conns {
		c.state.Store(stClosed) // first: the parker takes no closed connection
		if s.parked.drop(c) {
			delete(s.conns, c) // no watcher is left to untrack it
		}
		c.nc.Close()
	}
	s.mu.Unlock()
	s.parked.stop()
	return nil
}

func (s *Server) closeListener() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		s.ln.Close()
	}
}

// closeIdle closes the connections waiting between requests and returns
// how many remain open or are being handed off.
func (s *Server) closeIdle() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.mono(time.Now())
	for c := range s.conns {
		// As net/http: a new connection has a few seconds to send its
		// first request before Shutdown counts it as idle.
		if c.fresh.Load() && now-c.born < int64(newConnGrace) {
			continue
		}
		if c.state.CompareAndSwap(stIdle, stClosed) {
			// Closed before it is taken out of the parker: park refuses a
			// closed connection, so one parked just now is found here.
			if s.parked.drop(c) {
				delete(s.conns, c) // no watcher is left to untrack it
			}
			c.nc.Close()
		}
	}
	return len(s.conns) + int(s.handing.Load())
}

func (s *Server) logf(format string, args ...any) {
	if s.ErrorLog != nil {
		s.ErrorLog.Printf(format, args...)
	} else {
		log.Printf(format, args...)
	}
}

// mono is t on a monotonic clock of the server's own, in nanoseconds: the
// idle and park times are compared on it, so that a step of the wall
// clock cannot make an expired deadline look unexpired.
func (s *Server) mono(t time.Time) int64 { return int64(t.Sub(s.base)) }

func (s *Server) parkTime() time.Duration {
	if s.park > 0 {
		return s.park
	}
	return parkTime
}

func (s *Server) idleTimeout() time.Duration {
	if s.IdleTimeout > 0 {
		return s.IdleTimeout
	}
	return s.ReadHeaderTimeout
}

// dateLine is the Date field of the current second, formatted once.
type dateLine struct {
	sec  int64
	line []byte // "Date: ...\r\n"
}

func (s *Server) dateField(now time.Time) []byte {
	sec := now.Unix()
	if d := s.date.Load(); d != nil && d.sec == sec {
		return d.line
	}
	b := make([]byte, 0, 40)
	b = append(b, "Date: "...)
	b = now.UTC().AppendFormat(b, http.TimeFormat)
	b = append(b, "\r\n"...)
	s.date.Store(&dateLine{sec: sec, line: b})
	return b
}
