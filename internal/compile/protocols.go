package compile

import (
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/proxy"
	"github.com/sturdyproxy/sturdy/internal/wire/h2client"
)

// upstreamClient is a route's client to its pool's hosts: the HTTP/1.1
// client (internal/wire/h1client) or the HTTP/2 one (internal/wire/h2client).
type upstreamClient interface {
	proxy.Upstream
	// Close closes idle connections; requests in flight finish.
	Close()
}

// newH2Upstream makes the HTTP/2 client of a pool with protocol h2 (TLS,
// ALPN h2) or h2c (prior knowledge). Upgrade requests (WebSockets), which
// HTTP/2 cannot carry to a backend, go over HTTP/1.1 to the same hosts.
func (c *compiler) newH2Upstream(k upstreamKey, pt poolTLS) upstreamClient {
	tc := pt.config
	d := &net.Dialer{Timeout: k.connect, KeepAlive: 30 * time.Second}
	dial := d.DialContext
	if c.env.Dial != nil {
		dial = c.env.Dial(d)
	}
	o := h2client.Options{
		ConnectTimeout:        k.connect,
		ResponseHeaderTimeout: k.responseHeader,
		IdleTimeout:           k.idleTimeout,
		MaxConnsPerHost:       k.maxConns,
		MaxStreamsPerConn:     k.maxStreams,
		DialContext:           dial,
		Fallback:              fallbackTransport(k, pt, dial),
	}
	if k.protocol == config.ProtocolH2 {
		o.TLS = tc
		if o.TLS == nil {
			o.TLS = &tls.Config{}
		}
	}
	return &h2Upstream{Client: h2client.New(o), fallback: o.Fallback.(*http.Transport)}
}

type h2Upstream struct {
	*h2client.Client
	fallback *http.Transport
}

func (u *h2Upstream) Close() {
	u.Client.Close()
	u.fallback.CloseIdleConnections()
}

// h2InFlight is the most requests an HTTP/2 pool's host carries at once
// (the balancer skips a host at its cap): its connections times their
// streams, or no cap when connections are not bounded.
func h2InFlight(pc config.Pool) int64 {
	if pc.MaxConnsPerHost <= 0 || pc.MaxStreamsPerConn <= 0 {
		return 0
	}
	return int64(pc.MaxConnsPerHost) * int64(pc.MaxStreamsPerConn)
}
