package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/edge/certs"
	"github.com/sturdyproxy/sturdy/internal/proxy"
)

// HTTP/3 (QUIC over UDP) beside a TLS listener, as an opt-in
// (listeners[].http3). quic-go serves the protocol; requests go to the
// same proxy.Handler as the TCP listener's (same listener name, so the
// same routes, certificates, access controls and health model), and the
// TCP listener's answers carry Alt-Svc so that browsers find it.
//
// The UDP socket is bound with the listener and kept with it; a reload
// that changes the http3 settings of a kept listener takes effect at the
// next restart (logged), as the acme section does. 0-RTT is off unless
// zero_rtt is set; even then a request in early data that is not GET,
// HEAD or OPTIONS gets 425 Too Early (RFC 8470), since early data can be
// replayed by anyone who saw it.

// h3Serving is a listener's HTTP/3 server and its UDP socket.
type h3Serving struct {
	cfg config.HTTP3
	pc  net.PacketConn
	srv *http3.Server
}

// bindHTTP3 opens the UDP socket of lc's http3 section and prepares its
// server; nil when lc has none.
func (s *Server) bindHTTP3(lc config.Listener, tcp net.Addr) (*h3Serving, error) {
	hc := lc.HTTP3
	if hc == nil || lc.TLS == nil {
		return nil, nil
	}
	addr := hc.Listen
	if addr == lc.Listen {
		addr = tcp.String() // the same port number as the TCP socket, also for port 0
	}
	pc, err := s.listenPacket(addr)
	if err != nil {
		return nil, fmt.Errorf("listener %s: cannot listen for HTTP/3 on udp %s: %w", lc.Name, addr, err)
	}
	name := lc.Name
	tc := &tls.Config{
		MinVersion: tls.VersionTLS13, // QUIC has no other
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			if lc := s.cur.Load().Listener(name); lc != nil && lc.TLS != nil {
				return lc.TLS.ConfigForClient(hello)
			}
			return nil, fmt.Errorf("listener %s is no longer a TLS listener", name)
		},
	}
	var h http.Handler = &proxy.Handler{Listener: name, TLS: true, Current: s.snapshot, Upgrades: s.upgrades}
	if hc.ZeroRTT {
		h = tooEarly{h}
	}
	srv := &http3.Server{
		Handler:        h,
		TLSConfig:      http3.ConfigureTLSConfig(tc),
		QUICConfig:     &quic.Config{Allow0RTT: hc.ZeroRTT, MaxIdleTimeout: lc.IdleTimeout.D()},
		MaxHeaderBytes: int(lc.MaxHeaderBytes),
		IdleTimeout:    lc.IdleTimeout.D(),
		ConnContext:    func(ctx context.Context, _ *quic.Conn) context.Context { return certs.ConnContext(ctx, nil) },
		Logger:         s.log,
	}
	return &h3Serving{cfg: *hc, pc: pc, srv: srv}, nil
}

// listenPacket opens the UDP socket for addr: inherited from the previous
// process across a binary upgrade, as the TCP sockets are.
func (s *Server) listenPacket(addr string) (net.PacketConn, error) {
	if s.sockets != nil {
		return s.sockets.ListenPacket("udp", addr)
	}
	return net.ListenPacket("udp", addr)
}

// port is the UDP port HTTP/3 is served on, for Alt-Svc.
func (h *h3Serving) port() int {
	if h == nil {
		return 0
	}
	if a, ok := h.pc.LocalAddr().(*net.UDPAddr); ok {
		return a.Port
	}
	return 0
}

// runHTTP3 serves l's HTTP/3 under the group.
func (s *Server) runHTTP3(l *listener) {
	h := l.h3
	if h == nil {
		return
	}
	name := l.cfg.Name
	s.group.Go("listener "+name+" http3", func(context.Context) error {
		err := h.srv.Serve(h.pc)
		if err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, quic.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			s.log.Error("HTTP/3 listener stopped", "listener", name, "err", err)
		}
		return nil
	})
	s.log.Info("listening", "listener", name, "addr", h.pc.LocalAddr().String(), "protocol", "http3")
}

// shutdown stops the HTTP/3 server (GOAWAY, then requests finish within
// ctx) and closes its socket.
func (h *h3Serving) shutdown(ctx context.Context) error {
	if h == nil {
		return nil
	}
	err := h.srv.Shutdown(ctx)
	h.pc.Close()
	return err
}

// altSvc is the Alt-Svc value a TLS listener advertises its HTTP/3 with;
// nil when there is none to advertise.
func altSvc(lc config.Listener, port int) []string {
	if lc.TLS == nil || lc.HTTP3 == nil || lc.HTTP3.AltSvcMaxAge <= 0 || port == 0 {
		return nil
	}
	return []string{`h3=":` + strconv.Itoa(port) + `"; ma=` + strconv.FormatInt(int64(lc.HTTP3.AltSvcMaxAge.D().Seconds()), 10)}
}

// withAltSvc adds Alt-Svc to every answer of a TLS listener with HTTP/3,
// before the one request path runs: one map store per request, the value
// built once per settings.
type withAltSvc struct {
	h     http.Handler
	value []string
}

func (a withAltSvc) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header()["Alt-Svc"] = a.value
	a.h.ServeHTTP(w, r)
}

// tooEarly answers 425 to requests in 0-RTT early data that are not
// safe to replay; the client sends them again after the handshake.
type tooEarly struct{ h http.Handler }

func (t tooEarly) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.TLS != nil && !r.TLS.HandshakeComplete {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			http.Error(w, "this request was sent in TLS early data, which can be replayed; send it again after the handshake", http.StatusTooEarly)
			return
		}
	}
	t.h.ServeHTTP(w, r)
}
