package config

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Fallback is what a route does when its pool has no host to try: a
// fallback pool, then a stale cached copy, then the sorry page.
type Fallback struct {
	// Pool is a second pool to send requests to while the route's own pool
	// is empty. Default: none.
	Pool string `yaml:"pool"`
}

// Sorry is the page a route answers with when nothing else can answer:
// never a bare 502.
type Sorry struct {
	// Status is 503 (default) or another 5xx.
	Status int `yaml:"status"`
	// RetryAfter is sent as Retry-After. Default 30s.
	RetryAfter Duration `yaml:"retry_after"`
	// Body is the page itself. Default: a short plain-text apology naming
	// the route.
	Body string `yaml:"body"`
	// BodyFile reads the page from a file instead (read at load and reload).
	BodyFile string `yaml:"body_file"`
	// ContentType of the page. Default text/html when the body starts with
	// "<", otherwise text/plain.
	ContentType string `yaml:"content_type"`
}

// Limits are a route's bulkheads.
type Limits struct {
	// MaxInFlight bounds concurrent requests on the route; when full, new
	// requests get 503 with Retry-After at once. Default 0: no limit.
	MaxInFlight int `yaml:"max_in_flight"`
}

// RouteCache opts a route into the shared cache.
type RouteCache struct {
	// Enabled turns caching on for the route. Default false.
	Enabled bool `yaml:"enabled"`
	// StaleIfErrorMax caps stale-if-error, whatever the origin asks (incident
	// 004 had a day). Default 15m; 0s disables stale-if-error.
	StaleIfErrorMax Duration `yaml:"stale_if_error_max"`
	// StaleWhileRevalidateMax caps stale-while-revalidate. Default 15m.
	StaleWhileRevalidateMax Duration `yaml:"stale_while_revalidate_max"`
	// CacheAuthorized allows caching answers to requests with Authorization
	// when the response says public or s-maxage. Default false.
	CacheAuthorized bool `yaml:"cache_authorized"`
	// IgnoreCookies caches requests that carry cookies. Default false.
	IgnoreCookies bool `yaml:"ignore_cookies"`
	// BypassPaths are never cached. Default: /healthz, /health, /livez,
	// /readyz, /status, /ping. A list given here replaces the default.
	BypassPaths []string `yaml:"bypass_paths"`
}

// Cache is the shared store's size.
type Cache struct {
	// MaxBytes bounds the whole store. Default 64MiB.
	MaxBytes Size `yaml:"max_bytes"`
	// MaxObjectBytes is the largest body kept; larger ones stream through.
	// Default 1MiB.
	MaxObjectBytes Size `yaml:"max_object_bytes"`
}

// Edge is request hygiene and access control, decided before any upstream
// attempt and never charged to a backend.
type Edge struct {
	// NonASCII is what happens to raw bytes >= 0x80 in the request target:
	// "reencode" (default: percent-encode them) or "reject" (400).
	NonASCII string `yaml:"non_ascii"`
	// Deny lists client CIDRs or addresses answered 403 at the edge.
	Deny []string `yaml:"deny"`
	// DenyFile names a file with one CIDR or address per line (# comments);
	// it is re-read on reload.
	DenyFile string `yaml:"deny_file"`
	// UntrustedHeaders are dropped from requests of peers that are not
	// trusted proxies: identity and URL fields frameworks believe.
	// Default: DefaultUntrustedHeaders. A list given here replaces it;
	// [] drops none (faults.go).
	UntrustedHeaders []string `yaml:"untrusted_headers"`
}

// DNS settings for pools whose hosts are names.
type DNS struct {
	// Refresh is how often names are resolved in the background. Default 30s.
	Refresh Duration `yaml:"refresh"`
	// Timeout bounds one lookup. Default 5s.
	Timeout Duration `yaml:"timeout"`
	// Hold bounds how long the last good addresses of a name stay in use
	// while lookups fail; after it the name has no addresses (a dns_expired
	// event) until a lookup succeeds. Default 1h.
	Hold Duration `yaml:"hold"`
	// Servers are the DNS servers to ask (host:port, like Consul's
	// 127.0.0.1:8600). Default: the system's resolver.
	Servers []string `yaml:"servers"`
}

// Degraded-answer defaults.
const (
	DefaultSorryStatus     = http.StatusServiceUnavailable
	DefaultRetryAfter      = 30 * time.Second
	DefaultStaleMax        = 15 * time.Minute
	DefaultCacheBytes      = 64 << 20
	DefaultCacheObject     = 1 << 20
	DefaultDNSRefresh      = 30 * time.Second
	DefaultDNSTimeout      = 5 * time.Second
	DefaultDNSHold         = time.Hour
	NonASCIIReencode       = "reencode"
	NonASCIIReject         = "reject"
	defaultSorryBodyFormat = "Service temporarily unavailable: route %q has no backend able to answer right now. Please retry in a moment.\n"
)

func (c *Config) setDegradedDefaults() {
	if c.Edge.NonASCII == "" {
		c.Edge.NonASCII = NonASCIIReencode
	}
	if c.Cache.MaxBytes == 0 {
		c.Cache.MaxBytes = DefaultCacheBytes
	}
	if c.Cache.MaxObjectBytes == 0 {
		c.Cache.MaxObjectBytes = DefaultCacheObject
	}
	setDefault(&c.DNS.Refresh, DefaultDNSRefresh)
	setDefault(&c.DNS.Timeout, DefaultDNSTimeout)
	setDefault(&c.DNS.Hold, DefaultDNSHold)
	for i := range c.Routes {
		r := &c.Routes[i]
		s := &r.Sorry
		if s.Status == 0 {
			s.Status = DefaultSorryStatus
		}
		setDefault(&s.RetryAfter, DefaultRetryAfter)
		rc := &r.Cache
		p := fmt.Sprintf("routes[%d].cache.", i)
		if rc.StaleIfErrorMax == 0 && !c.Has(p+"stale_if_error_max") {
			rc.StaleIfErrorMax = Duration(DefaultStaleMax)
		}
		if rc.StaleWhileRevalidateMax == 0 && !c.Has(p+"stale_while_revalidate_max") {
			rc.StaleWhileRevalidateMax = Duration(DefaultStaleMax)
		}
	}
}

func (v *validator) degraded(pools map[string]bool) {
	c := v.c
	switch c.Edge.NonASCII {
	case NonASCIIReencode, NonASCIIReject:
	default:
		v.errorf("edge.non_ascii", "unknown mode %q; expected reencode or reject", c.Edge.NonASCII)
	}
	for i, s := range c.Edge.Deny {
		if _, err := ParsePrefix(s); err != nil {
			v.errorf(fmt.Sprintf("edge.deny[%d]", i), "%v", err)
		}
	}
	for i := range c.Routes {
		r := &c.Routes[i]
		p := fmt.Sprintf("routes[%d]", i)
		if fp := r.Fallback.Pool; fp != "" {
			if !pools[fp] {
				v.errorf(p+".fallback.pool", "no pool named %q; %sdefine it under pools", fp, didYouMean(fp, v.poolNames()))
			} else if fp == r.Pool {
				v.errorf(p+".fallback.pool", "the fallback pool is the route's own pool; name a different one")
			}
		}
		if s := r.Sorry.Status; s < 500 || s > 599 {
			v.errorf(p+".sorry.status", "status %d; a sorry page answers with a 5xx, usually 503", s)
		}
		if r.Sorry.Body != "" && r.Sorry.BodyFile != "" {
			v.errorf(p+".sorry", "give body or body_file, not both")
		}
		if r.Limits.MaxInFlight < 0 {
			v.errorf(p+".limits.max_in_flight", "must not be negative; 0 means no limit")
		}
		for j, bp := range r.Cache.BypassPaths {
			if !strings.HasPrefix(bp, "/") {
				v.errorf(fmt.Sprintf("%s.cache.bypass_paths[%d]", p, j), "path %q must start with /", bp)
			}
		}
	}
}

// DefaultSorryBody is the sorry page of a route that configures none.
func DefaultSorryBody(route string) []byte { return fmt.Appendf(nil, defaultSorryBodyFormat, route) }

// ParseDenyList reads a deny file's content (named path in errors): one
// CIDR or address per line; blank lines and text after # are ignored.
// Errors name the line.
func ParseDenyList(b []byte, path string) ([]string, error) {
	var out []string
	for i, line := range strings.Split(string(b), "\n") {
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if _, err := ParsePrefix(line); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, i+1, err)
		}
		out = append(out, line)
	}
	return out, nil
}
