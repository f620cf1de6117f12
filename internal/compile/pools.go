package compile

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/edge/certs"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/wire/h1client"
)

// pool compiles pools[i]; a nil result means errors were recorded.
func (c *compiler) pool(i int, attr *health.Attributing) *health.Pool {
	pc := c.cfg.Pools[i]
	p := "pools[" + strconv.Itoa(i) + "]"
	hc := health.PoolConfig{
		Name:         pc.Name,
		Balance:      pc.Balance,
		Scheme:       "http",
		MaxInFlight:  int64(pc.MaxConnsPerHost),
		FailStatuses: pc.Health.FailStatuses,
		Passive:      passive(pc.Health.Passive),
		Unresolved:   pc.Unresolved != "",
	}
	hc.Hosts = c.hosts(pc)
	if pc.UsesHTTP2() {
		hc.MaxInFlight, hc.Protocol = h2InFlight(pc), pc.Protocol
	}
	cut := &cutter{}
	c.cutters[pc.Name] = cut
	hc.Cut = cut.cut
	if pc.TLS != nil {
		tc, id := c.upstreamTLS(p+".tls", pc.TLS)
		hc.Scheme, hc.TLS = "https", tc
		pt := poolTLS{config: tc, id: id}
		if tc != nil && tc.ServerName == "" && named(hc.Hosts) {
			if c.prev != nil {
				pt.names = c.prev.serverNames[pc.Name]
			}
			if pt.names == nil {
				pt.names = &serverNames{}
			}
			pt.names.set(hc.Hosts)
			c.rt.serverNames[pc.Name] = pt.names
			pt.id += "+names"
		}
		c.poolTLS[pc.Name] = pt
	}
	if a := pc.Health.Active; a != nil {
		lo, hi, err := config.ParseStatusRange(a.ExpectStatus)
		if err != nil {
			c.errorf(p+".health.active.expect_status", "%v", err)
		}
		hc.Probe = &health.Probe{
			Method: a.Method, Path: a.Path, Host: a.Host,
			ExpectLo: lo, ExpectHi: hi, Expect: a.ExpectStatus, ExpectBody: a.ExpectBody,
			Interval: a.Interval.D(), FastInterval: a.FastInterval.D(), Jitter: a.Jitter.D(),
			Timeout: a.Timeout.D(), Rise: a.Rise, Fall: a.Fall,
			GRPC: a.Type == config.CheckGRPC, GRPCService: a.GRPCService,
		}
	}
	var prev *health.Pool
	if c.prev != nil {
		prev = c.prev.poolBy[pc.Name]
	}
	hp, err := health.NewPool(c.env.Monitor, attr, hc, prev)
	if err != nil {
		c.errorf(p+".balance", "%v", err)
		return nil
	}
	return hp
}

// cutter ends the requests waiting on a host of one pool, in every
// upstream client of the pool (routes with different timeouts have their
// own). It is filled while the routes compile and fixed once the runtime
// is published.
type cutter struct{ clients []waitCutter }

// waitCutter is an upstream client that can end the waits on a host (the
// HTTP/1.1 client; HTTP/2 streams end with their connection's fate).
type waitCutter interface{ Cut(addr string) int }

func (k *cutter) cut(addr string) {
	for _, u := range k.clients {
		u.Cut(addr)
	}
}

func (k *cutter) add(c upstreamClient) {
	u, ok := c.(waitCutter)
	if !ok {
		return
	}
	for _, o := range k.clients {
		if o == u {
			return
		}
	}
	k.clients = append(k.clients, u)
}

// poolTLS is a pool's upstream TLS config and its identity, and the names
// of its hosts dialled by address.
type poolTLS struct {
	config *tls.Config
	id     string
	names  *serverNames // nil when no host came from a name, or server_name is set
}

func named(hosts []health.HostSpec) bool {
	for _, h := range hosts {
		if h.Name != "" {
			return true
		}
	}
	return false
}

// upstreamTLS is the client TLS config for a pool's backends, with its CA
// bundle and client certificate read; the second result identifies the
// settings and the files' content, so that upstream clients are shared
// only by equal settings.
func (c *compiler) upstreamTLS(p string, t *config.UpstreamTLS) (*tls.Config, string) {
	tc, err := certs.UpstreamConfig(t, p, c.read)
	if err != nil {
		c.errs = append(c.errs, config.Error{File: c.cfg.File, Line: c.cfg.Line(p), Msg: err.Error()}) // the message starts with the key path
		return nil, ""
	}
	id := sha256.New()
	id.Write([]byte(t.ServerName + "\x00" + strconv.FormatBool(t.InsecureSkipVerify) + "\x00"))
	for _, f := range []string{t.CA, t.Cert, t.Key} {
		if f != "" {
			b, _ := c.read(f) // the bytes UpstreamConfig compiled
			id.Write(b)
		}
		id.Write([]byte{0})
	}
	return tc, hex.EncodeToString(id.Sum(nil)[:8])
}

// upstreamKey identifies an upstream client. Routes that share a pool and
// its timeouts share connections; a reload that keeps the key keeps the
// warm connections.
type upstreamKey struct {
	pool           string
	tls            string // the TLS settings' identity; "" for plain HTTP
	connect        time.Duration
	responseHeader time.Duration
	maxIdle        int
	idleTimeout    time.Duration
	protocol       string // http1, h2, h2c (protocols.go)
	maxConns       int    // HTTP/2 connections per host
	maxStreams     int    // HTTP/2 streams per connection
}

// upstream returns the client for a route of pool pc: the previous
// runtime's when the settings are the same.
func (c *compiler) upstream(rc config.Route, pc config.Pool) upstreamClient {
	k := upstreamKey{
		pool:           pc.Name,
		connect:        rc.Timeouts.Connect.D(),
		responseHeader: rc.Timeouts.ResponseHeader.D(),
		maxIdle:        pc.MaxIdleConnsPerHost,
		idleTimeout:    pc.IdleConnTimeout.D(),
		protocol:       pc.Protocol,
	}
	if pc.UsesHTTP2() {
		k.maxConns, k.maxStreams = pc.MaxConnsPerHost, pc.MaxStreamsPerConn
	}
	pt := c.poolTLS[pc.Name]
	k.tls = pt.id
	if u := c.rt.upstreams[k]; u != nil {
		return u
	}
	defer func() { c.cutters[pc.Name].add(c.rt.upstreams[k]) }()
	var u upstreamClient
	if c.prev != nil {
		u = c.prev.upstreams[k]
	}
	if u == nil && (k.protocol == config.ProtocolH2 || k.protocol == config.ProtocolH2C) {
		u = c.newH2Upstream(k, pt)
	}
	if u == nil {
		u = c.newUpstream(k, pt)
	}
	c.rt.upstreams[k] = u
	return u
}

// newUpstream makes the upstream client for one pool and timeout set: the
// strict synchronous HTTP/1.1 client for plain HTTP, with http.Transport
// for what it hands over (HTTPS, Upgrade, Expect: 100-continue). Neither
// retries on its own, uses proxy environment variables, or asks for
// compression the client did not ask for; both keep a bounded number of
// idle connections.
func (c *compiler) newUpstream(k upstreamKey, pt poolTLS) *h1client.Client {
	d := &net.Dialer{Timeout: k.connect, KeepAlive: 30 * time.Second}
	dial := d.DialContext
	if c.env.Dial != nil {
		dial = c.env.Dial(d)
	}
	return h1client.New(h1client.Options{
		ConnectTimeout:        k.connect,
		ResponseHeaderTimeout: k.responseHeader,
		MaxIdlePerHost:        k.maxIdle,
		IdleTimeout:           k.idleTimeout,
		DialContext:           dial,
		Fallback:              fallbackTransport(k, pt, dial),
	})
}

func fallbackTransport(k upstreamKey, pt poolTLS, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Transport {
	t := &http.Transport{
		Proxy:                  nil,
		DialContext:            dial,
		TLSClientConfig:        pt.config,
		MaxIdleConnsPerHost:    k.maxIdle,
		IdleConnTimeout:        k.idleTimeout,
		ResponseHeaderTimeout:  k.responseHeader,
		ExpectContinueTimeout:  time.Second,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 1 << 20,
		WriteBufferSize:        32 << 10,
		ReadBufferSize:         32 << 10,
	}
	if pt.names != nil {
		t.DialTLSContext = pt.names.dialTLS(pt.config, dial)
	}
	return t
}

// passive is a pool's passive health settings as the health model takes
// them: plain durations and shares, with the config's defaults applied.
func passive(ps config.Passive) health.Passive {
	return health.Passive{
		Off:                        !ps.On(),
		Window:                     ps.Window.D(),
		MinRequests:                ps.MinRequests,
		MinClients:                 ps.MinClients,
		FailureRate:                float64(ps.FailureRate),
		ConsecutiveConnectFailures: ps.ConsecutiveConnectFailures,
		MaxEjected:                 float64(ps.MaxEjected),
		EjectTime:                  ps.EjectTime.D(),
		MaxEjectTime:               ps.MaxEjectTime.D(),
		SlowStart:                  ps.SlowStart.D(),
		TrialInterval:              ps.TrialInterval.D(),
		GrayFailure: health.GrayFailure{
			Off:           !ps.GrayFailure.On(),
			Disagreements: ps.GrayFailure.Disagreements,
			Within:        ps.GrayFailure.Within.D(),
		},
	}
}
