// Package lint finds settings that are valid but risky: the kind of config
// that passes every check and still turns a small problem into an outage.
// `sturdy check` prints these as warnings; they never stop a config loading.
package lint

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// Warning is one risky setting, positioned like a config error.
type Warning = config.Error

// Check returns the warnings for a validated config, in file order of the
// objects they concern.
func Check(c *config.Config) []Warning { return check(c, machine()) }

func check(c *config.Config, e env) []Warning {
	l := &linter{c: c, env: e}
	l.admin()
	l.routes()
	l.routing()
	l.grpcCatchAll()
	l.slashes()
	l.pools()
	l.selfLoops()
	l.fileLimit()
	return l.out
}

type linter struct {
	c   *config.Config
	env env
	out []Warning
}

func (l *linter) warn(path, format string, args ...any) {
	l.out = append(l.out, Warning{File: l.c.File, Line: l.c.Line(path), Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (l *linter) admin() {
	addr := l.c.Admin.Listen
	if addr == "off" {
		return
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return
	}
	if ip, err := netip.ParseAddr(host); host == "" || (err == nil && !ip.IsLoopback()) || (err != nil && host != "localhost") {
		l.warn("admin.listen", "the admin listener on %s is reachable from other machines; keep it on 127.0.0.1 or a private interface", addr)
	}
}

func (l *linter) routes() {
	hasDefault := false
	for i, r := range l.c.Routes {
		p := fmt.Sprintf("routes[%d]", i)
		hasDefault = hasDefault || r.Default
		if t := r.Timeouts; t.Total > 0 && t.Total <= t.ResponseHeader {
			l.warn(p+".timeouts.total", "total %s is not longer than response_header %s (the per-try timeout), so a retry can never happen in time", t.Total, t.ResponseHeader)
		}
		if n := l.poolSize(r.Pool); n > 0 && r.Retry.Tries > n && l.c.Has(p+".retry.tries") {
			l.warn(p+".retry.tries", "%d tries but pool %q has %d hosts; a request is never sent to the same host twice, so the extra tries do nothing", r.Retry.Tries, r.Pool, n)
		}
		if r.Cache.Enabled && r.Cache.StaleIfErrorMax.D() > time.Hour {
			l.warn(p+".cache.stale_if_error_max", "stale copies may hide a failing origin for %s; incident 004's monitors saw green for hours this way", r.Cache.StaleIfErrorMax)
		}
		if r.Cache.Enabled && r.Cache.BypassPaths != nil && !hasHealthPath(r.Cache.BypassPaths) {
			l.warn(p+".cache.bypass_paths", "the list replaces the default and names no health path (/healthz, /health, /readyz, /livez, /ping, /status): health checks through this route could be answered from cache")
		}
	}
	if !hasDefault && len(l.c.Routes) > 0 {
		l.warn("routes", "no route is default: requests for hosts no route names get 404; mark one route default: true to answer them")
	}
}

func (l *linter) poolSize(name string) int {
	for _, p := range l.c.Pools {
		if p.Name == name {
			return len(p.Hosts)
		}
	}
	return 0
}

func hasHealthPath(paths []string) bool {
	for _, p := range paths {
		switch p {
		case "/healthz", "/health", "/readyz", "/livez", "/ping", "/status":
			return true
		}
	}
	return false
}

func (l *linter) pools() {
	used := map[string]bool{}
	for _, r := range l.c.Routes {
		used[r.Pool] = true
		for _, b := range r.Backends {
			used[b.Pool] = true
			used[b.Fallback] = true
		}
		if r.Mirror != nil {
			used[r.Mirror.Pool] = true
		}
		used[r.Fallback.Pool] = true // a fallback pool serves its route while the route's own is empty
		if r.ForwardAuth != nil {
			used[r.ForwardAuth.Pool] = true // the auth service's hosts
		}
	}
	for i, p := range l.c.Pools {
		pp := fmt.Sprintf("pools[%d]", i)
		if !used[p.Name] {
			l.warn(pp+".name", "pool %q is not used by any route", p.Name)
		}
		if len(p.Hosts) == 1 && p.Hosts[0].SRV == "" {
			l.warn(pp+".hosts", "pool %q has a single host: when it fails, its routes have nothing to retry on", p.Name)
		}
		if pa := p.Health.Passive; pa.On() && pa.MaxEjected >= 1 && l.c.Has(pp+".health.passive.max_ejected") {
			l.warn(pp+".health.passive.max_ejected", "max_ejected %s lets passive evidence take every host of pool %q out of rotation; a failure everyone shares (or one misattributed) then empties the pool. Keep it at 50%% and let active checks mark a real outage", pa.MaxEjected, p.Name)
		}
		if pa := p.Health.Passive; pa.On() && pa.MinClients == 1 && l.c.Has(pp+".health.passive.min_clients") {
			l.warn(pp+".health.passive.min_clients", "min_clients 1 lets one client's failures make a host of pool %q an outlier: one scanner behind a WAF ejected healthy backends this way (incident 000); keep it at 3 or more", p.Name)
		}
		if p.HashKey != "" && p.Balance != config.BalanceHash {
			l.warn(pp+".hash_key", "hash_key only applies to balance: hash; this pool uses %s", p.Balance)
		}
		if pa := p.Health.Passive; p.Health.Active == nil && pa.On() && pa.MaxEjected > 0 && len(p.Hosts) > 1 {
			l.warn(pp+".health", "pool %q ejects hosts on passive evidence alone; add health.active (a readiness probe) so that a probe confirms before a host leaves rotation, especially behind a WAF or other middle tier", p.Name)
		}
		if p.TLS != nil && p.TLS.InsecureSkipVerify {
			l.warn(pp+".tls.insecure_skip_verify", "pool %q accepts any certificate from its backends; set tls.ca instead", p.Name)
		}
		if p.MaxIdleConnsPerHost > 1024 {
			l.warn(pp+".max_idle_conns_per_host", "%d idle connections per host is far above what a backend needs; with many workers it exhausts backend sockets (incident 001 ran 10240)", p.MaxIdleConnsPerHost)
		}
	}
}
