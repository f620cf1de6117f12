package config

// The protocols sturdy speaks beyond HTTP/1.1 (docs/protocols.md): h2c and
// the PROXY protocol on listeners, HTTP/3 beside a TLS listener, HTTP/2 to
// pools (h2 over TLS, h2c) and the gRPC health checking protocol as an
// active check. The keys live on Listener, Pool and ActiveCheck; their
// defaults and validation are here.

import (
	"fmt"
	"runtime"
	"strings"
	"time"
)

// HTTP3 serves HTTP/3 (QUIC, UDP) beside a TLS listener, with its
// certificates, routes and health model, and advertises it to the
// listener's HTTPS clients with Alt-Svc.
type HTTP3 struct {
	// Listen is the UDP host:port. Default: the listener's own address
	// (the same port number, over UDP).
	Listen string `yaml:"listen"`
	// ZeroRTT accepts requests in 0-RTT early data, which an attacker can
	// replay; even then only GET, HEAD and OPTIONS are served from early
	// data, others get 425 Too Early. Default false.
	ZeroRTT bool `yaml:"zero_rtt"`
	// AltSvcMaxAge is how long clients may remember that HTTP/3 is there
	// (the Alt-Svc ma parameter). Default 24h; 0s sends no Alt-Svc.
	AltSvcMaxAge Duration `yaml:"alt_svc_max_age"`
}

// PROXY protocol modes (listeners[].proxy_protocol).
const (
	ProxyProtocolOff      = "off"
	ProxyProtocolOptional = "optional"
	ProxyProtocolRequired = "required"

	FrontendNetHTTP = "net/http"
	FrontendNative  = "native"
)

// Upstream protocols (pools[].protocol).
const (
	ProtocolHTTP1 = "http1"
	ProtocolH2    = "h2"
	ProtocolH2C   = "h2c"
)

// UpgradeWebSocket is the protocol routes[].upgrades allows by default.
const UpgradeWebSocket = "websocket"

// Active check types (pools[].health.active.type).
const (
	CheckHTTP = "http"
	CheckGRPC = "grpc"
)

// GRPCHealthPath is the method a grpc check calls.
const GRPCHealthPath = "/grpc.health.v1.Health/Check"

// Protocol defaults. docs/protocols.md lists the same values.
const (
	DefaultMaxStreamsPerConn = 100
	DefaultAltSvcMaxAge      = 24 * time.Hour
)

// defaultFrontend is the HTTP/1.1 server of a listener that names none:
// the native one where it serves (plain HTTP, no PROXY header, Linux),
// net/http's elsewhere. The native server hands what it does not read
// itself to net/http's on the same connection, so a request is answered
// alike either way; it costs less CPU per request and far less memory
// per idle connection (docs/performance.md).
func defaultFrontend(l Listener) string {
	if l.TLS == nil && (l.ProxyProtocol == "" || l.ProxyProtocol == ProxyProtocolOff) && runtime.GOOS == "linux" {
		return FrontendNative
	}
	return FrontendNetHTTP
}

// UsesHTTP2 reports whether the pool speaks HTTP/2 to its hosts.
func (p Pool) UsesHTTP2() bool { return p.Protocol == ProtocolH2 || p.Protocol == ProtocolH2C }

func (c *Config) setProtocolDefaults() {
	for i := range c.Listeners {
		l := &c.Listeners[i]
		if l.Frontend == "" {
			l.Frontend = defaultFrontend(*l)
		}
		if l.ProxyProtocol == "" {
			l.ProxyProtocol = ProxyProtocolOff
		}
		if h := l.HTTP3; h != nil {
			if h.Listen == "" {
				h.Listen = l.Listen
			}
			if h.AltSvcMaxAge == 0 && !c.Has(fmt.Sprintf("listeners[%d].http3.alt_svc_max_age", i)) {
				h.AltSvcMaxAge = Duration(DefaultAltSvcMaxAge)
			}
		}
	}
	for i := range c.Routes {
		r := &c.Routes[i]
		if r.Upgrades == nil && !c.Has(fmt.Sprintf("routes[%d].upgrades", i)) {
			r.Upgrades = []string{UpgradeWebSocket}
		}
	}
	for i := range c.Pools {
		p := &c.Pools[i]
		if p.Protocol == "" {
			p.Protocol = ProtocolHTTP1
		}
		if p.UsesHTTP2() && p.MaxStreamsPerConn == 0 {
			p.MaxStreamsPerConn = DefaultMaxStreamsPerConn
		}
		if a := p.Health.Active; a != nil {
			if a.Type == "" {
				a.Type = CheckHTTP
			}
			if a.Type == CheckGRPC && a.Path == "" {
				a.Path = GRPCHealthPath
			}
		}
	}
}

func (v *validator) protocols() {
	c := v.c
	for i, l := range c.Listeners {
		p := fmt.Sprintf("listeners[%d]", i)
		if l.H2C && l.TLS != nil {
			v.errorf(p+".h2c", "h2c is HTTP/2 without TLS; this listener has tls, which offers HTTP/2 already (alpn h2)")
		}
		switch l.ProxyProtocol {
		case ProxyProtocolOff:
		case ProxyProtocolOptional, ProxyProtocolRequired:
			if len(c.TrustedProxies) == 0 {
				v.errorf(p+".proxy_protocol", "PROXY headers are believed only from trusted_proxies, and none are listed; add the load balancers' addresses to trusted_proxies")
			}
		default:
			v.errorf(p+".proxy_protocol", "unknown mode %q; expected off, optional (trusted proxies may send a PROXY header) or required (every connection must come from a trusted proxy with one)", l.ProxyProtocol)
		}
		switch l.Frontend {
		case FrontendNetHTTP:
		case FrontendNative:
			switch {
			case l.TLS != nil:
				v.errorf(p+".frontend", "the native front end serves plain HTTP/1.1 only; this listener has tls (remove frontend, or tls)")
			case l.ProxyProtocol != ProxyProtocolOff:
				v.errorf(p+".frontend", "the native front end does not read PROXY headers yet; use frontend: net/http on a listener with proxy_protocol")
			case runtime.GOOS != "linux":
				v.errorf(p+".frontend", "the native front end needs Linux (it waits on sockets with MSG_PEEK); use frontend: net/http here")
			}
		default:
			v.errorf(p+".frontend", "unknown front end %q; expected native (the default on plain Linux listeners) or net/http", l.Frontend)
		}
		if h := l.HTTP3; h != nil {
			if l.TLS == nil {
				v.errorf(p+".http3", "HTTP/3 runs over QUIC, which always uses TLS; add tls to this listener")
			}
			if h.Listen != l.Listen {
				v.checkAddr(p+".http3.listen", h.Listen)
			}
		}
	}
	for i, r := range c.Routes {
		for j, up := range r.Upgrades {
			p := fmt.Sprintf("routes[%d].upgrades[%d]", i, j)
			switch {
			case !validFieldName(up):
				v.errorf(p, "%q is not a protocol name (a token, like websocket)", up)
			case strings.EqualFold(up, ProtocolH2C):
				v.errorf(p, "h2c cannot be allowed: the upgraded connection would carry HTTP/2 requests to the backend past every rule of this route; for HTTP/2 to the backend, set the pool's protocol to h2c")
			}
		}
	}
	for i, pl := range c.Pools {
		p := fmt.Sprintf("pools[%d]", i)
		switch pl.Protocol {
		case ProtocolHTTP1:
			if pl.MaxStreamsPerConn != 0 {
				v.errorf(p+".max_streams_per_conn", "only for protocol h2 or h2c; HTTP/1.1 carries one request per connection")
			}
		case ProtocolH2:
			if pl.TLS == nil {
				v.errorf(p+".protocol", "h2 is HTTP/2 over TLS; add tls to the pool, or use h2c for HTTP/2 without TLS")
			}
		case ProtocolH2C:
			if pl.TLS != nil {
				v.errorf(p+".protocol", "h2c is HTTP/2 without TLS, but the pool has tls; use h2 for HTTP/2 over TLS")
			}
		default:
			v.errorf(p+".protocol", "unknown protocol %q; expected http1 (default), h2 (HTTP/2 over TLS) or h2c (HTTP/2 with prior knowledge, no TLS)", pl.Protocol)
		}
		if pl.MaxStreamsPerConn < 0 {
			v.errorf(p+".max_streams_per_conn", "must not be negative")
		}
		a := pl.Health.Active
		if a == nil {
			continue
		}
		ap := p + ".health.active"
		switch a.Type {
		case CheckHTTP:
			if a.GRPCService != "" {
				v.errorf(ap+".grpc_service", "only for type: grpc")
			}
		case CheckGRPC:
			if !pl.UsesHTTP2() {
				v.errorf(ap+".type", "gRPC runs over HTTP/2; set the pool's protocol to h2c (or h2 with tls)")
			}
			if a.Path != GRPCHealthPath {
				v.errorf(ap+".path", "a grpc check always calls %s; leave path out", GRPCHealthPath)
			}
			if c.Has(ap+".expect_status") || a.ExpectBody != "" {
				v.errorf(ap, "expect_status and expect_body are for http checks; a grpc check passes when the service answers SERVING")
			}
		default:
			v.errorf(ap+".type", "unknown check type %q; expected http or grpc (grpc.health.v1)", a.Type)
		}
	}
}
