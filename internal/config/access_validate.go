package config

// Validation of the access keys (access.go): no file is read here.

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

func (v *validator) access(pools map[string]bool) {
	c := v.c
	rz := v.zoneNames("rate_limit_zones", len(c.RateLimitZones), func(i int) (string, string, int) {
		z := c.RateLimitZones[i]
		return z.Name, z.Key, z.Size
	})
	cz := v.zoneNames("conn_limit_zones", len(c.ConnLimitZones), func(i int) (string, string, int) {
		z := c.ConnLimitZones[i]
		return z.Name, z.Key, z.Size
	})
	shared := false
	for i, z := range c.RateLimitZones {
		p := fmt.Sprintf("rate_limit_zones[%d]", i)
		if !z.Rate.Set() {
			v.errorf(p+".rate", "missing; expected a rate like 10r/s or 600r/m")
		}
		if a := z.Attributed; a != nil {
			if !a.Rate.Set() {
				v.errorf(p+".attributed.rate", "missing; expected a rate lower than the zone's, like 1r/s")
			} else if z.Rate.Set() && a.Rate.Interval() < z.Rate.Interval() {
				v.errorf(p+".attributed.rate", "%s is faster than the zone's %s; the limit for attributed clients should be stricter", a.Rate, z.Rate)
			}
			if a.Burst < 0 {
				v.errorf(p+".attributed.burst", "must not be negative")
			}
		}
		shared = shared || z.Shared
		if z.Shared && c.SharedLimits == nil {
			v.errorf(p+".shared", "no shared_limits store is configured; add shared_limits: { redis: HOST:PORT } or remove shared")
		}
	}
	if s := c.SharedLimits; s != nil {
		v.checkAddr("shared_limits.redis", s.Redis)
		if s.DB < 0 {
			v.errorf("shared_limits.db", "must not be negative")
		}
		if s.Timeout.D() > 5*time.Second {
			v.errorf("shared_limits.timeout", "%s is longer than 5s; every request of a shared zone could wait that long while Redis hangs", s.Timeout)
		}
		if !shared {
			v.errorf("shared_limits", "no rate_limit_zones entry has shared: true; remove shared_limits or share a zone")
		}
	}
	for i := range c.Routes {
		v.routeAccess(fmt.Sprintf("routes[%d]", i), &c.Routes[i], rz, cz, pools)
	}
}

// zoneNames checks names, keys and sizes of one zone list and returns the
// names defined.
func (v *validator) zoneNames(list string, n int, at func(int) (name, key string, size int)) map[string]bool {
	names := map[string]int{}
	for i := range n {
		name, key, size := at(i)
		p := fmt.Sprintf("%s[%d]", list, i)
		v.uniqueName(p, name, "zone", names, i)
		if _, _, err := ParseLimitKey(key); err != nil {
			v.errorf(p+".key", "%v", err)
		}
		if size < 1 || size > MaxZoneSize {
			v.errorf(p+".size", "size %d out of range; expected 1 to %d keys", size, MaxZoneSize)
		}
	}
	known := make(map[string]bool, len(names))
	for name := range names {
		known[name] = true
	}
	return known
}

func (v *validator) routeAccess(p string, r *Route, rz, cz, pools map[string]bool) {
	known := map[string]bool{}
	for _, m := range LimitExceptMethods {
		known[m] = true
	}
	for j, m := range r.Methods {
		if !known[m] {
			v.errorf(fmt.Sprintf("%s.methods[%d]", p, j), "unknown method %q; expected one of: %s", m, strings.Join(LimitExceptMethods, ", "))
		}
	}
	switch {
	case r.MethodsStatus != 0 && len(r.Methods) == 0:
		v.errorf(p+".methods_status", "set without methods; list the methods the route accepts, like methods: [GET]")
	case r.MethodsStatus != 0 && r.MethodsStatus != 403 && r.MethodsStatus != 405 && r.MethodsStatus != 444:
		v.errorf(p+".methods_status", "status %d; expected 405 (Method Not Allowed, with Allow), 403 (nginx's answer to limit_except) or 444 (close the connection without an answer, nginx's return 444)", r.MethodsStatus)
	}
	for j, a := range r.Access {
		ap := fmt.Sprintf("%s.access[%d]", p, j)
		set := 0
		for _, s := range []string{a.Allow, a.Deny, a.AllowFile, a.DenyFile} {
			if s != "" {
				set++
			}
		}
		if set != 1 {
			v.errorf(ap, "give exactly one of allow, deny, allow_file or deny_file in each rule, like { allow: 10.0.0.0/8 }")
			continue
		}
		key, s := "allow", a.Allow
		if a.Deny != "" {
			key, s = "deny", a.Deny
		}
		if s != "" && s != "all" {
			if _, err := ParsePrefix(s); err != nil {
				v.errorf(ap+"."+key, "%v (or all)", err)
			}
		}
	}
	seen := map[string]int{}
	for j, l := range r.RateLimit {
		lp := fmt.Sprintf("%s.rate_limit[%d]", p, j)
		if l.Zone == "" {
			v.errorf(lp+".zone", "missing; expected the name of a rate_limit_zones entry")
		} else if !rz[l.Zone] {
			v.errorf(lp+".zone", "no rate limit zone named %q; define it under rate_limit_zones", l.Zone)
		} else if k, dup := seen[l.Zone]; dup {
			v.errorf(lp+".zone", "zone %q is already used by rate_limit[%d] of this route", l.Zone, k)
		}
		seen[l.Zone] = j
		if l.Burst < 0 {
			v.errorf(lp+".burst", "must not be negative")
		}
		if l.Delay < 0 || l.Delay > l.Burst {
			v.errorf(lp+".delay", "delay %d out of range; expected 0 to burst (%d)", l.Delay, l.Burst)
		}
		if l.NoDelay && l.Delay > 0 {
			v.errorf(lp+".delay", "give nodelay or delay, not both")
		}
		v.checkStatus(lp+".status", l.Status)
	}
	clear(seen)
	for j, l := range r.ConnLimit {
		lp := fmt.Sprintf("%s.conn_limit[%d]", p, j)
		if l.Zone == "" {
			v.errorf(lp+".zone", "missing; expected the name of a conn_limit_zones entry")
		} else if !cz[l.Zone] {
			v.errorf(lp+".zone", "no conn limit zone named %q; define it under conn_limit_zones", l.Zone)
		} else if k, dup := seen[l.Zone]; dup {
			v.errorf(lp+".zone", "zone %q is already used by conn_limit[%d] of this route", l.Zone, k)
		}
		seen[l.Zone] = j
		if l.Max < 1 {
			v.errorf(lp+".max", "max %d; expected at least 1 request in flight per key", l.Max)
		}
		v.checkStatus(lp+".status", l.Status)
	}
	if b := r.BasicAuth; b != nil {
		if b.Htpasswd == "" {
			v.errorf(p+".basic_auth.htpasswd", "missing; expected an htpasswd file (htpasswd -cB FILE USER writes one)")
		}
		if strings.ContainsAny(b.Realm, "\"\\\r\n") {
			v.errorf(p+".basic_auth.realm", "realm %q holds quotes, backslashes or line breaks", b.Realm)
		}
		if b.FailureBurst < 0 {
			v.errorf(p+".basic_auth.failure_burst", "must not be negative; it counts the failures allowed in a row (default %d)", DefaultAuthFailureBurst)
		}
	}
	if f := r.ForwardAuth; f != nil {
		v.forwardAuth(p+".forward_auth", f, pools)
	}
}

func (v *validator) forwardAuth(p string, f *ForwardAuth, pools map[string]bool) {
	if f.URL == "" {
		v.errorf(p+".url", "missing; expected the auth endpoint, like http://127.0.0.1:4180/oauth2/auth")
	} else if u, err := url.Parse(f.URL); err != nil {
		v.errorf(p+".url", "invalid URL: %v", unwrapURLError(err))
	} else if u.Scheme != "http" && u.Scheme != "https" {
		v.errorf(p+".url", "scheme %q not supported; expected http or https", u.Scheme)
	} else if u.Host == "" {
		v.errorf(p+".url", "URL %q has no host", f.URL)
	}
	if f.Pool != "" && !pools[f.Pool] {
		v.errorf(p+".pool", "no pool named %q; %sdefine it under pools", f.Pool, didYouMean(f.Pool, v.poolNames()))
	}
	if f.Timeout.D() <= 0 {
		v.errorf(p+".timeout", "must be positive; a sub-request that may wait forever holds every request behind it")
	}
	for j, h := range f.RequestHeaders {
		if h != "*" && !validHeaderName(h) {
			v.errorf(fmt.Sprintf("%s.request_headers[%d]", p, j), "invalid header name %q", h)
		}
	}
	for j, h := range f.CopyHeaders {
		if !validHeaderName(h) {
			v.errorf(fmt.Sprintf("%s.copy_headers[%d]", p, j), "invalid header name %q", h)
		}
	}
	if h := f.HostHeader; h != "" && h != "$host" && h != "$http_host" && strings.ContainsAny(h, "$/@?# \t\r\n") {
		v.errorf(p+".host_header", "%q is not a host; expected $host, $http_host or a name like auth.internal", h)
	}
	if f.Statuses != "" && f.Statuses != ForwardAuthStatusesSturdy && f.Statuses != ForwardAuthStatusesNginx {
		v.errorf(p+".statuses", "%q is not a reading of the auth answer; expected sturdy or nginx", f.Statuses)
	}
}

func (v *validator) checkStatus(p string, s int) {
	if s < 400 || s > 599 {
		v.errorf(p, "status %d out of range; expected 400 to 599 (usually 429 or 503)", s)
	}
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}
