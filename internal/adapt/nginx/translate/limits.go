package translate

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// Rate and concurrency limits: limit_req_zone and limit_conn_zone become
// top-level zones (only those a route uses), limit_req and limit_conn the
// route's rate_limit and conn_limit, with nginx's refusal status (503
// unless limit_req_status or limit_conn_status say otherwise).

// zones are the limit zones the routes use, in the order first used.
type zones struct {
	rate  []config.RateLimitZone
	conn  []config.ConnLimitZone
	names map[string]string // "req:NAME" or "conn:NAME" -> sturdy name
	taken map[string]bool
}

// limitKey maps an nginx zone key to sturdy's, "" when there is none.
func limitKey(v string) string {
	switch {
	case v == "$binary_remote_addr" || v == "$remote_addr" || v == "$realip_remote_addr":
		return config.KeyClientIP
	case v == "$server_name" || v == "$host":
		return config.KeyRoute
	case strings.HasPrefix(v, "$http_") && !strings.ContainsAny(v[6:], "$ "):
		return "header:" + headerName(v[6:])
	case strings.HasPrefix(v, "$cookie_") && !strings.ContainsAny(v[8:], "$ "):
		return "cookie:" + v[8:]
	}
	return ""
}

// zoneDef finds the limit_req_zone or limit_conn_zone named name and
// reads its key, size (bytes) and, for requests, rate.
func (t *translator) zoneDef(directive, name string) (d *nginx.Directive, key string, size int64, rate string) {
	if t.site.HTTP == nil {
		return nil, "", 0, ""
	}
	for _, z := range t.site.HTTP.Local(directive) {
		found := false
		for _, a := range z.Args[min(1, len(z.Args)):] {
			if v, ok := strings.CutPrefix(a, "zone="); ok {
				n, sz, _ := strings.Cut(v, ":")
				found = n == name
				size, _ = nginx.ParseSize(sz)
			}
		}
		if !found {
			continue
		}
		for _, a := range z.Args {
			if v, ok := strings.CutPrefix(a, "rate="); ok {
				rate = v
			}
		}
		return z, z.Arg(0), size, rate
	}
	return nil, "", 0, ""
}

// zoneSize turns nginx's shared-memory size into a count of keys: nginx
// keeps about 16000 states per megabyte (64 bytes each).
func zoneSize(bytes int64) int {
	n := bytes / 64
	if n <= 0 {
		return 0 // sturdy's default
	}
	return int(min(n, config.MaxZoneSize))
}

func (t *translator) zoneName(kind, zone string) (string, bool) {
	if t.zones.names == nil {
		t.zones.names, t.zones.taken = map[string]string{}, map[string]bool{}
	}
	n, ok := t.zones.names[kind+":"+zone]
	if !ok {
		n = name(t.zones.taken, zone)
		t.zones.names[kind+":"+zone] = n
	}
	return n, ok
}

// limitReq applies limit_req (every one in effect applies).
func (t *translator) limitReq(c *locCtx, ds []*nginx.Directive) {
	status := 503
	if d := c.scope().Get1("limit_req_status"); d != nil {
		t.use(d)
		if n, err := strconv.Atoi(d.Arg(0)); err == nil && n >= 400 && n <= 599 {
			status = n
		}
	}
	if d := c.scope().Get1("limit_req_dry_run"); d != nil && d.Arg(0) == "on" {
		t.use(d)
		return
	}
	for _, d := range ds {
		rl := config.RateLimit{Status: status}
		var zone string
		for _, a := range d.Args {
			switch {
			case strings.HasPrefix(a, "zone="):
				zone = a[5:]
			case strings.HasPrefix(a, "burst="):
				rl.Burst, _ = strconv.Atoi(a[6:])
			case a == "nodelay":
				rl.NoDelay = true
			case strings.HasPrefix(a, "delay="):
				rl.Delay, _ = strconv.Atoi(a[6:])
			}
		}
		zd, key, size, rate := t.zoneDef("limit_req_zone", zone)
		var r config.Rate
		skey := limitKey(key)
		switch {
		case zd == nil:
			c.differs.add(NeedRateLimits, "limit_req zone=%s (%s): no limit_req_zone defines it", zone, d.Pos())
			continue
		case skey == "":
			c.differs.add(NeedRateLimits, "limit_req zone=%s (%s) is not translated: its key %s is not one sturdy can limit by (client address, header, cookie)", zone, d.Pos(), key)
			continue
		case rateOf(&r, rate) != nil:
			c.differs.add(NeedRateLimits, "limit_req zone=%s (%s) is not translated: rate %q", zone, d.Pos(), rate)
			continue
		}
		t.use(zd)
		if rl.Delay > rl.Burst || rl.Burst < 0 {
			rl.Delay = 0
		}
		if rl.NoDelay {
			rl.Delay = 0
		}
		n, seen := t.zoneName("req", zone)
		if !seen {
			t.zones.rate = append(t.zones.rate, config.RateLimitZone{Name: n, Key: skey, Rate: r, Size: zoneSize(size)})
			if key == "$server_name" || key == "$host" {
				c.differs.add(NeedRateLimits, "limit_req_zone %s %s (%s) counted per server name; sturdy counts per route (key: route)", key, zone, zd.Pos())
			}
		}
		rl.Zone = n
		c.r.rateLimit = append(c.r.rateLimit, rl)
	}
}

func rateOf(r *config.Rate, s string) error {
	num, unit, ok := strings.Cut(s, "r/")
	n, err := strconv.ParseInt(num, 10, 64)
	if !ok || err != nil || n < 1 || n > 1_000_000 || unit != "s" && unit != "m" {
		return fmt.Errorf("invalid rate %q", s)
	}
	r.N, r.Per = n, time.Second
	if unit == "m" {
		r.Per = time.Minute
	}
	return nil
}

// limitConn applies limit_conn.
func (t *translator) limitConn(c *locCtx, ds []*nginx.Directive) {
	status := 503
	if d := c.scope().Get1("limit_conn_status"); d != nil {
		t.use(d)
		if n, err := strconv.Atoi(d.Arg(0)); err == nil && n >= 400 && n <= 599 {
			status = n
		}
	}
	if d := c.scope().Get1("limit_conn_dry_run"); d != nil && d.Arg(0) == "on" {
		t.use(d)
		return
	}
	for _, d := range ds {
		zone := d.Arg(0)
		max, err := strconv.Atoi(d.Arg(1))
		zd, key, size, _ := t.zoneDef("limit_conn_zone", zone)
		skey := limitKey(key)
		switch {
		case err != nil || max < 1:
			c.differs.add(NeedRateLimits, "limit_conn %s (%s): unreadable limit", strings.Join(d.Args, " "), d.Pos())
			continue
		case zd == nil:
			c.differs.add(NeedRateLimits, "limit_conn %s (%s): no limit_conn_zone defines it", zone, d.Pos())
			continue
		case skey == "":
			c.differs.add(NeedRateLimits, "limit_conn %s (%s) is not translated: its key %s is not one sturdy can limit by", zone, d.Pos(), key)
			continue
		}
		t.use(zd)
		n, seen := t.zoneName("conn", zone)
		if !seen {
			t.zones.conn = append(t.zones.conn, config.ConnLimitZone{Name: n, Key: skey, Size: zoneSize(size)})
		}
		c.r.connLimit = append(c.r.connLimit, config.ConnLimit{Zone: n, Max: max, Status: status})
	}
}
