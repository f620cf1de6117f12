package server

import (
	"net"
	"net/http"
	"net/netip"

	"github.com/pires/go-proxyproto"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// The PROXY protocol (v1 and v2) on a listener: a load balancer in front
// of sturdy (HAProxy with send-proxy-v2, an AWS NLB, ...) opens each
// connection with a header naming the real client, and sturdy uses that
// address as the connection's RemoteAddr, so that client attribution,
// min_clients, the deny list, rate limits and hashing see real clients.
//
// A header is believed only from trusted_proxies. With proxy_protocol:
// required a connection from anyone else is closed at accept, and one
// from a trusted proxy without a header is closed on its first read; with
// optional a trusted proxy may send a header and anyone else's header
// closes the connection. Nothing is ever written to a refused connection.
// The header is read by the connection's own goroutine (on first read),
// never by the accept loop, within the listener's read_header_timeout.

// proxyProtocol wraps an accepted connection for the listener's PROXY
// protocol mode; nil means c was refused (and closed).
func (s *Server) proxyProtocol(l *listener, c net.Conn) net.Conn {
	lc := l.cur.Load().cfg
	if lc.ProxyProtocol == config.ProxyProtocolOff || lc.ProxyProtocol == "" {
		return c
	}
	trusted := peerTrusted(c.RemoteAddr(), s.cur.Load().Proxy.Trusted)
	policy := proxyproto.USE
	switch {
	case lc.ProxyProtocol == config.ProxyProtocolRequired && !trusted:
		c.Close()
		s.agg.Add("connections refused on listener " + lc.Name + ": proxy_protocol is required and the peer is not in trusted_proxies")
		return nil
	case lc.ProxyProtocol == config.ProxyProtocolRequired:
		policy = proxyproto.REQUIRE
	case !trusted:
		policy = proxyproto.REJECT // a header from anyone else is a lie
	}
	timeout := lc.ReadHeaderTimeout.D()
	if timeout <= 0 {
		timeout = config.DefaultReadHeaderTimeout
	}
	return proxyproto.NewConn(c, proxyproto.WithPolicy(policy), proxyproto.SetReadHeaderTimeout(timeout))
}

func peerTrusted(a net.Addr, trusted []netip.Prefix) bool {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return false
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return false
	}
	ip = ip.Unmap()
	for _, p := range trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// h2cProtocols are a plain listener's protocols with h2c on: HTTP/1.1 and
// HTTP/2 with prior knowledge (RFC 9113 section 3.3). The HTTP/1.1
// Upgrade to h2c (removed from RFC 9113) is not offered.
func h2cProtocols() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return p
}

// sameProtocols reports whether two settings of a listener can share one
// http.Server as far as the protocols go.
func sameProtocols(a, b config.Listener) bool {
	return a.H2C == b.H2C && a.ProxyProtocol == b.ProxyProtocol && sameHTTP3(a.HTTP3, b.HTTP3)
}

func sameHTTP3(a, b *config.HTTP3) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
