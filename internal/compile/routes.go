package compile

import (
	"net/textproto"
	"strconv"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/cache"
	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/edge/certs"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/proxy"
)

// route compiles routes[i]; its pools are built already.
func (c *compiler) route(i int) *proxy.Route {
	rc := c.cfg.Routes[i]
	var prev *proxy.Route
	if c.prev != nil {
		prev = c.prev.routeBy[rc.Name]
	}
	r := &proxy.Route{
		Name:                rc.Name,
		MaxBodyBytes:        int64(rc.MaxBodyBytes),
		Total:               rc.Timeouts.Total.D(),
		Tries:               rc.Retry.Tries,
		RetryBudget:         float64(rc.Retry.Budget),
		MinRetries:          rc.Retry.MinRetries,
		BufferBody:          int64(rc.Retry.BufferBody),
		BufferRequest:       int64(rc.BufferRequestBody),
		BodyTimeout:         rc.Timeouts.ClientBody.D(),
		SendTimeout:         rc.Timeouts.ClientSend.D(),
		AllowEncodedSlashes: rc.AllowEncodedSlashes,
		Upgrades:            upgrades(rc.Upgrades),
		RouteBit:            1 << (uint64(i) & 63),
		Monitor:             c.env.Monitor,
		ShedClients:         c.cfg.Attribution.ShedClients,
		MaxInFlight:         int64(rc.Limits.MaxInFlight),
		Sorry:               c.sorry(i, rc),
		ClientCert:          certs.RequirementOf(rc),
		Agg:                 c.env.Agg,
	}
	if rc.RequestBuffering && rc.BufferRequestBody > 0 {
		r.Spool = c.rt.spool
	}
	// A route's counters and its attribution tracker live as long as its
	// name, across reloads: counters only go up, a degraded route stays so.
	if prev != nil {
		r.Stats, r.Tracker = prev.Stats, prev.Tracker
	} else {
		r.Stats, r.Tracker = new(proxy.Stats), health.NewRouteTracker(c.env.Monitor, rc.Name)
	}
	c.routeFeatures(i, r)
	m := c.routeMatch(i)
	c.matches = append(c.matches, m)
	defer r.Prepare()
	defer c.routing(i, r, m) // after the pool: Prepare copies what it sets
	// A split route's first weighted pool stands for it where one pool is
	// shown (status page, readiness, the cache's stale answers).
	primary := rc.Pool
	for _, b := range rc.Backends {
		if b.Header == nil && b.Cookie == nil && b.Weight > 0 && primary == "" {
			primary = b.Pool
		}
	}
	if primary == "" {
		return r // files only, or a redirect: nothing to proxy to
	}
	r.NoGRPC = !c.speaksHTTP2(rc)
	pi := c.poolIndex(primary)
	pc := c.cfg.Pools[pi]
	r.Pool, r.Upstream = c.rt.poolBy[primary], c.upstream(rc, pc)
	if fp := rc.Fallback.Pool; fp != "" {
		r.Fallback = c.rt.poolBy[fp]
	}
	if rc.Cache.Enabled && c.env.Cache != nil {
		r.Cache, r.CachePolicy = c.env.Cache, cachePolicy(rc, pc)
	}
	r.HashKind, r.HashName = c.hashKey(pi, pc)
	return r
}

// speaksHTTP2 reports whether a pool the route can send to speaks HTTP/2,
// as a gRPC call needs, or has no host at all: a call on such a route is
// answered by the empty-pool chain (UNAVAILABLE), as for a GRPCRoute whose
// Service is missing, not refused as one HTTP/1.1 cannot carry.
func (c *compiler) speaksHTTP2(rc config.Route) bool {
	pools := []string{rc.Pool, rc.Fallback.Pool}
	for _, b := range rc.Backends {
		pools = append(pools, b.Pool, b.Fallback)
	}
	for _, name := range pools {
		if i := c.poolIndex(name); name != "" && i >= 0 {
			if p := c.cfg.Pools[i]; p.UsesHTTP2() || len(p.Hosts) == 0 {
				return true
			}
		}
	}
	return false
}

// hashKey is pools[pi]'s hash balancing key: kind and (canonical) name,
// or "" for other policies.
func (c *compiler) hashKey(pi int, pc config.Pool) (string, string) {
	if pc.Balance != config.BalanceHash {
		return "", ""
	}
	kind, name, err := config.ParseHashKey(pc.HashKey)
	if err != nil {
		c.errorf("pools["+strconv.Itoa(pi)+"].hash_key", "%v", err)
	}
	if kind == "header" {
		name = textproto.CanonicalMIMEHeaderKey(name)
	}
	return kind, name
}

func (c *compiler) poolIndex(name string) int {
	for i, p := range c.cfg.Pools {
		if p.Name == name {
			return i
		}
	}
	return -1 // config.Load refuses a route naming an unknown pool
}

// cachePolicy maps a route's cache settings to the cache's policy.
func cachePolicy(rc config.Route, pc config.Pool) *cache.Policy {
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

// upgrades are a route's allowed Upgrade protocols, in lower case; nil
// for none.
func upgrades(names []string) []string {
	if len(names) == 0 {
		return nil
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strings.ToLower(n)
	}
	return out
}
