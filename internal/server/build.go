package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"strconv"
	"time"

	"github.com/sturdyproxy/sturdy/internal/cache"
	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/edge"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/pool"
	"github.com/sturdyproxy/sturdy/internal/proxy"
	"github.com/sturdyproxy/sturdy/internal/resolve"
	"github.com/sturdyproxy/sturdy/internal/route"
	"github.com/sturdyproxy/sturdy/internal/upstream"
)

// transportKey identifies an upstream connection pool. Routes that share a
// pool and its timeouts share connections; a reload that keeps the key keeps
// the warm connections.
type transportKey struct {
	pool           string
	tls            *config.UpstreamTLS // the pool's; nil for plain HTTP
	connect        time.Duration
	responseHeader time.Duration
	maxIdle        int
	maxConns       int
	idleTimeout    time.Duration
}

// runtime is what one config compiles to, plus the state carried into the
// next reload.
type runtime struct {
	snap       *proxy.Snapshot
	pools      map[string]*pool.Pool
	health     []*health.Pool
	healthBy   map[string]*health.Pool
	states     map[string]*pool.State // "pool|addr"
	transports map[transportKey]*upstream.Client
	stats      map[string]*proxy.Stats // by route name; survives reloads
	trackers   map[string]*health.RouteTracker
	routeBits  map[string]uint64 // applied to trackers once the config is accepted
}

// applyRouteBits gives each route tracker its sketch bit in this config.
func (rt *runtime) applyRouteBits() {
	for name, b := range rt.routeBits {
		rt.trackers[name].SetBit(b)
	}
}

func stateKey(pool, addr string) string { return pool + "|" + addr }

// build compiles cfg. prev (nil on first load) lends host state and
// transports for whatever the two configs share.
func (s *Server) build(cfg *config.Config, prev *runtime) (*runtime, error) {
	mon, store := s.monitor, s.cache
	rt := &runtime{
		pools:      map[string]*pool.Pool{},
		healthBy:   map[string]*health.Pool{},
		states:     map[string]*pool.State{},
		transports: map[transportKey]*upstream.Client{},
		stats:      map[string]*proxy.Stats{},
		trackers:   map[string]*health.RouteTracker{},
		routeBits:  map[string]uint64{},
	}
	for _, pc := range cfg.Pools {
		specs := make([]pool.Spec, len(pc.Hosts))
		for i, h := range pc.Hosts {
			specs[i] = pool.Spec{Addr: h.Addr, Weight: h.Weight}
		}
		p, err := pool.New(pc.Name, pc.Balance, specs, func(addr string) *pool.State {
			st := (*pool.State)(nil)
			if prev != nil {
				st = prev.states[stateKey(pc.Name, addr)]
			}
			if st == nil {
				st = new(pool.State)
			}
			rt.states[stateKey(pc.Name, addr)] = st
			return st
		})
		if err != nil {
			return nil, err
		}
		p.MaxInFlight = int64(pc.MaxConnsPerHost)
		rt.pools[pc.Name] = p
		hp := mon.NewPool(p, pc.Health)
		if pc.TLS != nil {
			p.Scheme, hp.TLS = "https", upstreamTLS(pc.TLS)
		}
		rt.health = append(rt.health, hp)
		rt.healthBy[pc.Name] = hp
	}

	trusted := make([]netip.Prefix, 0, len(cfg.TrustedProxies))
	for _, s := range cfg.TrustedProxies {
		p, err := config.ParsePrefix(s)
		if err != nil {
			return nil, err
		}
		trusted = append(trusted, p)
	}

	poolCfg := map[string]config.Pool{}
	for _, pc := range cfg.Pools {
		poolCfg[pc.Name] = pc
	}
	perListener := map[string][]*route.Entry[*proxy.Route]{}
	for i, rc := range cfg.Routes {
		pc := poolCfg[rc.Pool]
		key := transportKey{
			pool:           pc.Name,
			tls:            pc.TLS,
			connect:        rc.Timeouts.Connect.D(),
			responseHeader: rc.Timeouts.ResponseHeader.D(),
			maxIdle:        pc.MaxIdleConnsPerHost,
			maxConns:       pc.MaxConnsPerHost,
			idleTimeout:    pc.IdleConnTimeout.D(),
		}
		tr := rt.transports[key]
		if tr == nil && prev != nil {
			tr = prev.transports[key]
		}
		if tr == nil {
			tr = newTransport(key, s.dns)
		}
		rt.transports[key] = tr
		p := rt.pools[rc.Pool]
		stats := (*proxy.Stats)(nil)
		if prev != nil {
			stats = prev.stats[rc.Name]
		}
		if stats == nil {
			stats = new(proxy.Stats)
		}
		rt.stats[rc.Name] = stats
		tracker := mon.Route(rc.Name, pool.Bit(uint64(i)))
		rt.trackers[rc.Name] = tracker
		rt.routeBits[rc.Name] = pool.Bit(uint64(i))
		r := &proxy.Route{
			Name:         rc.Name,
			Pool:         p,
			Upstream:     tr,
			MaxBodyBytes: int64(rc.MaxBodyBytes),
			Total:        rc.Timeouts.Total.D(),
			Tries:        rc.Retry.Tries,
			RetryBudget:  float64(rc.Retry.Budget),
			MinRetries:   rc.Retry.MinRetries,
			BufferBody:   int64(rc.Retry.BufferBody),
			Health:       rt.healthBy[rc.Pool],
			Tracker:      tracker,
			Monitor:      mon,
			Stats:        stats,
			MaxInFlight:  int64(rc.Limits.MaxInFlight),
			Sorry: proxy.Sorry{
				Status:      rc.Sorry.Status,
				RetryAfter:  strconv.Itoa(int(max(rc.Sorry.RetryAfter.D().Seconds(), 1))),
				ContentType: rc.Sorry.ContentType,
				Body:        rc.Sorry.Loaded,
			},
		}
		if fp := rc.Fallback.Pool; fp != "" {
			r.Fallback = &proxy.Fallback{Pool: rt.pools[fp], Health: rt.healthBy[fp]}
		}
		if rc.Cache.Enabled {
			r.Cache, r.CachePolicy = store, cachePolicy(rc, pc)
		}
		r.Agg = s.agg
		r.Prepare()
		if pc.Balance == config.BalanceHash {
			kind, name, err := config.ParseHashKey(pc.HashKey)
			if err != nil {
				return nil, fmt.Errorf("pool %s: %w", pc.Name, err)
			}
			if kind == "header" {
				name = textproto.CanonicalMIMEHeaderKey(name)
			}
			r.HashKind, r.HashName = kind, name
		}
		e := &route.Entry[*proxy.Route]{Hosts: rc.Hosts, Path: rc.Path, Default: rc.Default, Value: r}
		names := rc.Listeners
		if len(names) == 0 {
			for _, l := range cfg.Listeners {
				names = append(names, l.Name)
			}
		}
		for _, ln := range names {
			perListener[ln] = append(perListener[ln], e)
		}
	}
	deny, err := denyList(cfg.Edge)
	if err != nil {
		return nil, err
	}
	rt.snap = &proxy.Snapshot{
		Tables:  map[string]*route.Table[*proxy.Route]{},
		Trusted: trusted,
		Edge:    edge.New(cfg.Edge.NonASCII == config.NonASCIIReject, deny, trusted, s.edge),
		Access:  s.access,
	}
	for _, l := range cfg.Listeners {
		rt.snap.Tables[l.Name] = route.New(perListener[l.Name])
	}
	return rt, nil
}

// hostAddrs lists every pool host address of cfg.
func hostAddrs(cfg *config.Config) []string {
	var addrs []string
	for _, pc := range cfg.Pools {
		for _, h := range pc.Hosts {
			addrs = append(addrs, h.Addr)
		}
	}
	return addrs
}

// resolveNames hands the pools' host names to the background resolver; a
// name that never resolved is a warning at load.
func (s *Server) resolveNames(cfg *config.Config) {
	for _, name := range s.dns.Set(hostAddrs(cfg)) {
		s.log.Warn("a pool host name does not resolve; its host fails with dns_error until it does", "name", name)
	}
}

// denyList merges the inline deny list and the deny file (re-read on every
// reload).
func denyList(e config.Edge) ([]netip.Prefix, error) {
	entries := e.Deny
	if e.DenyFile != "" {
		more, err := config.LoadDenyFile(e.DenyFile)
		if err != nil {
			return nil, err
		}
		entries = append(entries[:len(entries):len(entries)], more...)
	}
	out := make([]netip.Prefix, 0, len(entries))
	for _, s := range entries {
		p, err := config.ParsePrefix(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// cachePolicy maps a route's cache settings to the cache's policy. In the
// config 0s turns a stale kind off; in the policy that is a negative cap.
func cachePolicy(rc config.Route, pc config.Pool) *cache.Policy {
	off := func(d config.Duration) time.Duration {
		if d == 0 {
			return -1
		}
		return d.D()
	}
	return &cache.Policy{
		Route:                   rc.Name,
		StaleIfErrorMax:         off(rc.Cache.StaleIfErrorMax),
		StaleWhileRevalidateMax: off(rc.Cache.StaleWhileRevalidateMax),
		CacheAuthorized:         rc.Cache.CacheAuthorized,
		IgnoreCookies:           rc.Cache.IgnoreCookies,
		BypassPaths:             rc.Cache.BypassPaths,
		FailStatuses:            pc.Health.FailStatuses,
	}
}

// newTransport makes the upstream client for one pool and timeout set: the
// strict synchronous HTTP/1.1 client for plain HTTP, with http.Transport
// for what it hands over (Upgrade, Expect: 100-continue). Neither retries on
// its own, uses proxy environment variables, or asks for compression the
// client did not ask for; both keep a bounded number of idle connections.
func newTransport(k transportKey, dns *resolve.Resolver) *upstream.Client {
	d := &net.Dialer{Timeout: k.connect, KeepAlive: 30 * time.Second}
	return upstream.New(upstream.Options{
		ConnectTimeout:        k.connect,
		ResponseHeaderTimeout: k.responseHeader,
		MaxIdlePerHost:        k.maxIdle,
		IdleTimeout:           k.idleTimeout,
		DialContext:           dns.DialContext(d),
		Fallback:              fallbackTransport(k, dns.DialContext(d)),
	})
}

// upstreamTLS is the client TLS config for a pool's backends.
func upstreamTLS(t *config.UpstreamTLS) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		RootCAs:            t.Roots,
		InsecureSkipVerify: t.InsecureSkipVerify,
	}
}

// fallbackTransport carries what the HTTP/1.1 client hands over: HTTPS
// pools, Upgrade, Expect: 100-continue.
func fallbackTransport(k transportKey, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Transport {
	var tc *tls.Config
	if k.tls != nil {
		tc = upstreamTLS(k.tls)
	}
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            dial,
		TLSClientConfig:        tc,
		MaxIdleConnsPerHost:    k.maxIdle,
		IdleConnTimeout:        k.idleTimeout,
		ResponseHeaderTimeout:  k.responseHeader,
		ExpectContinueTimeout:  time.Second,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 1 << 20,
		WriteBufferSize:        32 << 10,
		ReadBufferSize:         32 << 10,
	}
}

// closeUnused closes idle connections of transports the new runtime dropped;
// requests still in flight on them finish normally.
func closeUnused(old, cur *runtime) {
	if old == nil {
		return
	}
	for k, tr := range old.transports {
		if cur.transports[k] != tr {
			// Requests in flight on it finish; their connections are
			// closed, not kept idle on a client nobody uses.
			tr.Close()
		}
	}
}
