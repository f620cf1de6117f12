package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/edge/certs"
	"github.com/sturdyproxy/sturdy/internal/proxy"
	"github.com/sturdyproxy/sturdy/internal/wire/framing"
	"github.com/sturdyproxy/sturdy/internal/wire/h1"
)

// listener is one configured listener: a socket, bound once and kept
// across reloads while its address stays, and the http.Server that serves
// the listener's current settings. A reload that changes the settings
// (timeouts, header limits, TLS on or off) starts a new server on the
// same socket and lets the old one finish its connections: the socket
// never closes, so no connection is refused.
type listener struct {
	cfg  config.Listener // guarded by Server.mu
	sock net.Listener
	cur  atomic.Pointer[serving] // the server new connections go to
	h3   *h3Serving              // HTTP/3 beside a TLS listener (http3.go); nil without

	// accepting is closed when the accept loop has returned (nil until
	// serve starts it): a server that is to stop must still take the
	// connection the loop accepted as the socket closed.
	accepting chan struct{}

	acceptErrors atomic.Uint64
	handoffs     atomic.Uint64 // connections the native front end gave net/http
}

// serving is one http.Server over one listener's connections, and with
// frontend: native the h1 server in front of it, which serves what it can
// and hands the rest to srv.
type serving struct {
	cfg    config.Listener
	srv    *http.Server
	native *h1.Server    // nil: srv serves every connection
	conns  chan net.Conn // handed over by the accept loop
	handed chan net.Conn // from native to srv
	done   chan struct{} // closed when srv stops taking connections
	once   sync.Once
	// feedDone is closed when the native server stops taking connections:
	// the accept loop then hands them to the newer server.
	feedDone chan struct{}
	feedOnce sync.Once
	// http follows srv's connections for the drain (drain.go).
	http httpConns
	// serving counts srv's Serve loop while it runs: the drain waits for
	// it, so that a connection Serve took as the feed closed is followed.
	serving sync.WaitGroup

	handoffs *atomic.Uint64 // the listener's count
}

// Accept, Close and Addr make a serving the net.Listener its server
// serves: connections come from the listener's accept loop, or from the
// native server when there is one.
func (sv *serving) Accept() (net.Conn, error) {
	from := sv.conns
	if sv.native != nil {
		from = sv.handed
	}
	select {
	case c := <-from:
		if sv.cfg.TLS == nil {
			// Plain HTTP: follow the requests' framing, so that an
			// ambiguous one is refused (see internal/wire/framing).
			return framing.Wrap(c), nil
		}
		return c, nil
	case <-sv.done:
		return nil, net.ErrClosed
	}
}

// nativeFeed is the net.Listener the native server serves: the accept
// loop's connections, unwrapped (it reads framing strictly itself).
type nativeFeed struct{ *serving }

func (f nativeFeed) Accept() (net.Conn, error) {
	select {
	case c := <-f.conns:
		return c, nil
	case <-f.feedDone:
		return nil, net.ErrClosed
	case <-f.done:
		return nil, net.ErrClosed
	}
}

// Close stops the feed only: net/http's server still takes what the
// native server hands off while it finishes (sv.Close ends that).
func (f nativeFeed) Close() error {
	f.feedOnce.Do(func() { close(f.feedDone) })
	return nil
}

// handOff passes a connection from the native server to net/http's.
func (sv *serving) handOff(c net.Conn) bool {
	select {
	case sv.handed <- c:
		sv.handoffs.Add(1)
		return true
	case <-sv.done:
		return false
	}
}

func (sv *serving) Close() error {
	sv.once.Do(func() { close(sv.done) })
	return nil
}

func (sv *serving) Addr() net.Addr { return addrOf(sv.cfg.Listen) }

type fixedAddr string

func (a fixedAddr) Network() string { return "tcp" }
func (a fixedAddr) String() string  { return string(a) }

func addrOf(s string) net.Addr { return fixedAddr(s) }

// hand gives c to sv's server; false when that server has stopped taking
// connections (a reload replaced it a moment ago).
func (sv *serving) hand(c net.Conn) bool {
	select {
	case sv.conns <- c:
		return true
	case <-sv.feedDone: // nil without a native server: never ready
		return false
	case <-sv.done:
		return false
	}
}

// sameServing reports whether two settings can share one http.Server.
func sameServing(a, b config.Listener) bool {
	return (a.TLS == nil) == (b.TLS == nil) &&
		a.ReadHeaderTimeout == b.ReadHeaderTimeout && a.IdleTimeout == b.IdleTimeout &&
		a.MaxHeaderBytes == b.MaxHeaderBytes && a.Frontend == b.Frontend && sameProtocols(a, b)
}

// bind opens a listener's socket and prepares its first server; serve
// starts both.
func (s *Server) bind(lc config.Listener) (*listener, error) {
	sock, err := s.listen(lc.Listen)
	if err != nil {
		return nil, fmt.Errorf("listener %s: cannot listen on %s: %w", lc.Name, lc.Listen, err)
	}
	h3, err := s.bindHTTP3(lc, sock.Addr())
	if err != nil {
		sock.Close()
		return nil, err
	}
	l := &listener{cfg: lc, sock: sock, h3: h3}
	l.cur.Store(s.newServing(l, lc, sock.Addr(), h3.port()))
	return l, nil
}

// listen opens the socket for addr.
func (s *Server) listen(addr string) (net.Listener, error) {
	if s.sockets != nil {
		return s.sockets.Listen("tcp", addr)
	}
	return net.Listen("tcp", addr)
}

// newServing prepares the server of lc's settings; h3port, when not 0,
// is advertised in Alt-Svc.
func (s *Server) newServing(l *listener, lc config.Listener, addr net.Addr, h3port int) *serving {
	lc.Listen = addr.String() // the bound address, for port 0
	sv := &serving{cfg: lc, conns: make(chan net.Conn), done: make(chan struct{}), handoffs: &l.handoffs}
	handler := &proxy.Handler{Listener: lc.Name, TLS: lc.TLS != nil, Current: s.snapshot, Upgrades: s.upgrades, Port: portOf(addr)}
	sv.srv = &http.Server{
		Handler:           handler,
		ConnContext:       proxy.ConnContext,
		ReadHeaderTimeout: lc.ReadHeaderTimeout.D(),
		IdleTimeout:       lc.IdleTimeout.D(),
		MaxHeaderBytes:    int(lc.MaxHeaderBytes),
		// Per-connection errors (TLS handshakes from scanners and the like)
		// are noise at info level.
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	if lc.H2C {
		sv.srv.Protocols = h2cProtocols()
	}
	if lc.Frontend == config.FrontendNative {
		sv.handed = make(chan net.Conn)
		sv.feedDone = make(chan struct{})
		sv.native = &h1.Server{
			Handler:           handler,
			Handoff:           sv.handOff,
			ConnContext:       proxy.ConnContext,
			ReadHeaderTimeout: sv.srv.ReadHeaderTimeout,
			IdleTimeout:       sv.srv.IdleTimeout,
			MaxHeaderBytes:    sv.srv.MaxHeaderBytes,
			ErrorLog:          sv.srv.ErrorLog,
		}
	}
	if v := altSvc(lc, h3port); v != nil {
		sv.srv.Handler = withAltSvc{sv.srv.Handler, v}
	}
	if lc.TLS != nil {
		name := lc.Name
		sv.srv.TLSConfig = &tls.Config{
			MinVersion: tls.VersionTLS12,
			// The serving runtime's certificates and settings: a reload
			// publishes new ones with everything else, on the same socket.
			GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
				if lc := s.cur.Load().Listener(name); lc != nil && lc.TLS != nil {
					return lc.TLS.ConfigForClient(hello)
				}
				return nil, fmt.Errorf("listener %s is no longer a TLS listener", name)
			},
		}
		sv.srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
			return proxy.ConnContext(certs.ConnContext(ctx, c), c)
		}
	}
	if err := serveHTTP2(sv.srv); err != nil {
		// Only a TLS config with cipher suites unfit for HTTP/2 fails,
		// and sturdy's leaves them to crypto/tls; were it to, net/http's
		// own HTTP/2 server serves the listener, unbatched.
		s.log.Warn("listener's HTTP/2 writes are not batched", "listener", lc.Name, "err", err)
	}
	connContext := sv.srv.ConnContext
	sv.srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return sv.http.add(connContext(ctx, c), c)
	}
	sv.srv.ConnState = sv.http.state
	sv.srv.Handler = sv.http.wrap(sv.srv.Handler)
	return sv
}

// serve runs the listener's accept loop and its server as members of the
// group.
func (s *Server) serve(l *listener) {
	name := l.cfg.Name
	l.accepting = make(chan struct{})
	s.group.Go("listener "+name, func(context.Context) error {
		s.acceptLoop(l)
		close(l.accepting) // not deferred: a panicking loop is restarted
		return nil
	})
	s.runServing(name, l.cur.Load())
	s.runHTTP3(l)
	s.log.Info("listening", "listener", name, "addr", l.sock.Addr().String(), "tls", l.cfg.TLS != nil)
}

func (s *Server) runServing(name string, sv *serving) {
	sv.serving.Add(1)
	s.group.Go("listener "+name+" server", func(context.Context) error {
		var err error
		if sv.cfg.TLS != nil {
			err = sv.srv.ServeTLS(sv, "", "")
		} else {
			err = sv.srv.Serve(sv)
		}
		// net.ErrClosed: the drain stopped its feed before Shutdown.
		if err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			s.log.Error("listener stopped", "listener", name, "err", err)
		}
		sv.serving.Done() // not deferred: a panicking Serve is restarted
		return nil
	})
	if sv.native != nil {
		s.group.Go("listener "+name+" native server", func(context.Context) error {
			if err := sv.native.Serve(nativeFeed{sv}); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("listener stopped", "listener", name, "err", err)
			}
			return nil
		})
	}
}

// acceptLoop accepts on the socket until it is closed and hands each
// connection to the listener's current server.
func (s *Server) acceptLoop(l *listener) {
	var pause time.Duration
	for {
		c, err := l.sock.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: sturdy's own trouble,
			// never a backend's. Back off as net/http does.
			l.acceptErrors.Add(1)
			if !s.local.AcceptFailed(err) { // which logs its own aggregated line
				s.agg.Add("accept errors on listener " + l.cfg.Name + " (" + errnoName(err) + ")")
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			time.Sleep(pause)
			continue
		}
		pause = 0
		if c = s.proxyProtocol(l, c); c == nil {
			continue // refused: not from a trusted proxy
		}
		for {
			sv := l.cur.Load()
			if sv.hand(c) {
				break
			}
			if l.cur.Load() == sv { // no newer server: shutting down
				c.Close()
				break
			}
		}
	}
}

// reconfigure applies new settings to a kept listener: the same server
// when they allow it, else a new server on the same socket, the old one
// finishing its connections within grace.
func (s *Server) reconfigure(l *listener, lc config.Listener, grace time.Duration) {
	old := l.cur.Load()
	l.cfg = lc
	if !sameHTTP3(old.cfg.HTTP3, lc.HTTP3) {
		s.log.Warn("the http3 section of a kept listener changed; its UDP socket and 0-RTT setting change when sturdy restarts (Alt-Svc follows now)", "listener", lc.Name)
	}
	// The server's handler routes by the listener's name (routes'
	// listeners:, TLS settings): a socket kept under a new name needs a
	// new server, as a Gateway's address passed on to another Gateway
	// does in Kubernetes mode.
	if sameServing(old.cfg, lc) && old.cfg.Name == lc.Name {
		return
	}
	sv := s.newServing(l, lc, l.sock.Addr(), l.h3.port())
	s.runServing(lc.Name, sv)
	l.cur.Store(sv)
	s.drainServing(lc.Name, old, nil, grace)
	s.log.Info("listener settings changed; new connections get them, open ones finish on the old", "listener", lc.Name)
}

// drainServing stops a server that no longer gets connections, letting
// its requests finish within grace; after the accept loop has stopped,
// when accepting is not nil (see listener.accepting).
func (s *Server) drainServing(name string, sv *serving, accepting <-chan struct{}, grace time.Duration) {
	s.group.Go("retire listener "+name, func(context.Context) error {
		ctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		awaitClosed(ctx, accepting)
		sv.shutdown(ctx)
		return nil
	})
}

// shutdown lets the servers' requests finish until ctx ends, and closes
// what is still open then. It is called once no more connections come
// (a newer server gets them, or the accept loop has stopped). The native
// server goes first, so that what it hands off meanwhile still finds
// net/http's; net/http's is quiesced before its Shutdown, which would
// drop a request read after it began (httpConns).
func (sv *serving) shutdown(ctx context.Context) error {
	var err error
	// From here every answer of net/http's server ends its connection:
	// what the native server hands off too, as its own connections do.
	sv.srv.SetKeepAlivesEnabled(false)
	if n := sv.native; n != nil {
		if err = n.Shutdown(ctx); err != nil {
			n.Close()
		}
	}
	sv.Close() // net/http's server takes no more connections
	waitWithin(ctx, &sv.serving)
	sv.http.quiesce(ctx, sv.srv)
	if e := sv.srv.Shutdown(ctx); e != nil {
		sv.srv.Close()
		err = cmp.Or(err, e)
	}
	return err
}

// retire stops a listener the new config no longer has: its socket closes
// and its requests finish within grace.
func (s *Server) retire(l *listener, grace time.Duration) {
	l.sock.Close()
	s.drainServing(l.cfg.Name, l.cur.Load(), l.accepting, grace)
	if h := l.h3; h != nil {
		s.group.Go("retire listener "+l.cfg.Name+" http3", func(context.Context) error {
			ctx, cancel := context.WithTimeout(context.Background(), grace)
			defer cancel()
			h.shutdown(ctx)
			return nil
		})
	}
}

// portOf is the port of a listening address.
func portOf(a net.Addr) string {
	if _, p, err := net.SplitHostPort(a.String()); err == nil {
		return p
	}
	return ""
}

// errnoName is a short, bounded name for an accept error, for the
// aggregated log line.
func errnoName(err error) string {
	var ne *net.OpError
	if errors.As(err, &ne) && ne.Err != nil {
		s := ne.Err.Error()
		if len(s) > 40 {
			s = s[:40]
		}
		return s
	}
	return "error"
}

// socketSource opens listening sockets: the operating system's, or ones
// inherited from a previous sturdy process (binary upgrade).
type socketSource interface {
	Listen(network, addr string) (net.Listener, error)
	// ListenPacket opens a UDP socket (HTTP/3's): a new process of a
	// binary upgrade cannot bind the port the old one serves on.
	ListenPacket(network, addr string) (net.PacketConn, error)
}

// keepable returns the running listener whose socket lc can keep: the
// one on the same address (a port-0 address is the same only under the
// same name), not taken by another listener of the new config yet.
func (s *Server) keepable(lc config.Listener, taken map[*listener]bool) *listener {
	for name, l := range s.listeners {
		if taken[l] || l.cfg.Listen != lc.Listen || (strings.HasSuffix(lc.Listen, ":0") && name != lc.Name) {
			continue
		}
		return l
	}
	return nil
}

// waitWithin waits for wg, or for ctx to end: a Serve loop that never
// returns must not hold a shutdown past its grace.
func waitWithin(ctx context.Context, wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	awaitClosed(ctx, done)
}

// awaitClosed waits until ch is closed or ctx ends; a nil ch is not
// waited for.
func awaitClosed(ctx context.Context, ch <-chan struct{}) {
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-ctx.Done():
	}
}
