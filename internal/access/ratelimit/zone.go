package ratelimit

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"sync/atomic"
	"time"

	"github.com/sturdyproxy/sturdy/internal/access/limitkey"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// Zone is one compiled rate_limit_zones entry: its key and its buckets.
// Routes naming the zone share its buckets.
type Zone struct {
	name  string
	cfg   config.RateLimitZone
	key   limitkey.Key
	local *Table
	// strict holds the buckets of clients attribution holds responsible;
	// nil when the zone has no attributed limit.
	strict      *Table
	strictBurst int
	shared      *Shared // nil unless the zone is shared
}

// Name is the zone's name.
func (z *Zone) Name() string { return z.name }

// Zones are the compiled zones of one config, and the counters of every
// route that uses them.
type Zones struct {
	byName   map[string]*Zone
	counters map[statKey]*Counters
	shared   *Shared
}

type statKey struct{ route, zone string }

// CompileZones builds the zones of cfg. A zone of prev with the same name,
// key, rate, size and attributed limit keeps its buckets, so that a reload
// does not hand every limited client a fresh burst; counters carry on too.
// shared is the store of zones with shared: true (nil when none is).
func CompileZones(cfg []config.RateLimitZone, shared *Shared, prev *Zones) (*Zones, error) {
	zs := &Zones{byName: make(map[string]*Zone, len(cfg)), counters: map[statKey]*Counters{}, shared: shared}
	for i, zc := range cfg {
		key, err := limitkey.Parse(zc.Key)
		if err != nil {
			return nil, fmt.Errorf("rate_limit_zones[%d].key: %v", i, err)
		}
		if !zc.Rate.Set() {
			return nil, fmt.Errorf("rate_limit_zones[%d].rate: missing", i)
		}
		z := &Zone{name: zc.Name, cfg: zc, key: key}
		if p := prev.zone(zc.Name); p != nil && sameZone(p.cfg, zc) {
			z.local, z.strict = p.local, p.strict
		} else {
			z.local = NewTable(zc.Size, zc.Rate.Interval())
			if a := zc.Attributed; a != nil {
				z.strict = NewTable(min(zc.Size, max(zc.Size/16, 64)), a.Rate.Interval())
			}
		}
		if a := zc.Attributed; a != nil {
			z.strictBurst = a.Burst
		}
		if zc.Shared {
			if shared == nil {
				return nil, fmt.Errorf("rate_limit_zones[%d].shared: no shared_limits store", i)
			}
			z.shared = shared
		}
		zs.byName[zc.Name] = z
	}
	if prev != nil {
		for k, c := range prev.counters {
			zs.counters[k] = c
		}
	}
	return zs, nil
}

func sameZone(a, b config.RateLimitZone) bool {
	sa, sb := a.Attributed, b.Attributed
	return a.Key == b.Key && a.Rate == b.Rate && a.Size == b.Size &&
		(sa == nil) == (sb == nil) && (sa == nil || sa.Rate == sb.Rate)
}

func (zs *Zones) zone(name string) *Zone {
	if zs == nil {
		return nil
	}
	return zs.byName[name]
}

// Counters count one route's decisions in one zone since start; they
// survive reloads.
type Counters struct {
	Allowed   atomic.Uint64 // passed at once
	Delayed   atomic.Uint64 // passed after waiting for their slot
	Rejected  atomic.Uint64 // refused with the limit's status
	Strict    atomic.Uint64 // decided by the attributed (stricter) limit
	NoKey     atomic.Uint64 // not limited: the request had no value for the key
	Untracked atomic.Uint64 // passed untracked: the zone's table was full
	Fallback  atomic.Uint64 // decided locally because the shared store failed
}

// Limits are one route's compiled rate_limit entries, checked in order.
type Limits struct {
	route string
	ls    []limit
}

type limit struct {
	zone   *Zone
	burst  int
	delay  int // excess passed at once; -1 for nodelay
	status int
	c      *Counters
}

// Route compiles a route's rate_limit entries. It returns nil when there
// are none, so that a route without limits costs one nil check. path names
// the route in errors ("routes[3]").
func (zs *Zones) Route(path, route string, cfg []config.RateLimit) (*Limits, error) {
	if len(cfg) == 0 {
		return nil, nil
	}
	l := &Limits{route: route}
	for j, c := range cfg {
		z := zs.zone(c.Zone)
		if z == nil {
			return nil, fmt.Errorf("%s.rate_limit[%d].zone: no rate limit zone named %q", path, j, c.Zone)
		}
		k := statKey{route, c.Zone}
		cs := zs.counters[k]
		if cs == nil {
			cs = new(Counters)
			zs.counters[k] = cs
		}
		d := c.Delay
		if c.NoDelay {
			d = -1
		}
		status := c.Status
		if status == 0 {
			status = config.DefaultRateLimitStatus
		}
		l.ls = append(l.ls, limit{zone: z, burst: c.Burst, delay: d, status: status, c: cs})
	}
	return l, nil
}

// Client is what the proxy knows about a request's client.
type Client struct {
	// Addr is the client's address as the proxy decided it (behind trusted
	// proxies and the PROXY protocol), the client_ip key.
	Addr string
	// Attributed is true while attribution holds the client responsible
	// for its own failures; zones with an attributed limit then apply it.
	Attributed bool
}

// Result is a route's verdict on a request.
type Result struct {
	Decision
	// Status answers a rejected request (the limit's status).
	Status int
	// Zone names the zone that decided a rejection or the longest delay.
	Zone string
}

// Decide charges r against each of the route's limits. The first limit that
// rejects decides, and the limits before it are refunded; otherwise the
// longest delay wins (as in nginx). now must come from the clock the
// tables were made on.
func (l *Limits) Decide(r *http.Request, c Client, now time.Time) Result {
	var out Result
	for i := range l.ls {
		lim := &l.ls[i]
		key, ok := lim.zone.key.Of(r, c.Addr, l.route)
		if !ok {
			lim.c.NoKey.Add(1)
			continue
		}
		d := lim.take(r.Context(), key, c.Attributed, now)
		switch d.Verdict {
		case Reject:
			lim.c.Rejected.Add(1)
			for j := range i {
				l.ls[j].refund(r, c, l.route)
			}
			return Result{Decision: d, Status: lim.status, Zone: lim.zone.name}
		case Delay:
			lim.c.Delayed.Add(1)
			if d.Wait > out.Wait {
				out = Result{Decision: d, Zone: lim.zone.name}
			}
		default:
			lim.c.Allowed.Add(1)
		}
	}
	return out
}

func (lim *limit) take(ctx context.Context, key string, attributed bool, now time.Time) Decision {
	z := lim.zone
	t, burst := z.local, lim.burst
	if attributed && z.strict != nil {
		t, burst = z.strict, z.strictBurst
		lim.c.Strict.Add(1)
	}
	if z.shared != nil {
		d, err := z.shared.take(ctx, z.name, t == z.strict, key, t.interval, burst, lim.delay)
		if err == nil {
			return d
		}
		lim.c.Fallback.Add(1)
	}
	d, untracked := t.Take(key, now, burst, lim.delay)
	if untracked {
		lim.c.Untracked.Add(1)
	}
	return d
}

func (lim *limit) refund(r *http.Request, c Client, route string) {
	key, ok := lim.zone.key.Of(r, c.Addr, route)
	if !ok || lim.zone.shared != nil {
		return // a shared bucket is not refunded: one more round trip for a rare case
	}
	t := lim.zone.local
	if c.Attributed && lim.zone.strict != nil {
		t = lim.zone.strict
	}
	t.Refund(key)
}

// Stat is one route's counts in one zone.
type Stat struct {
	Route, Zone string
	KeyKind     string // client_ip, header, cookie or route
	Allowed     uint64
	Delayed     uint64
	Rejected    uint64
	Strict      uint64
	NoKey       uint64
	Untracked   uint64
	Fallback    uint64
}

// ZoneStat is one zone's table.
type ZoneStat struct {
	Zone    string
	KeyKind string
	TableStats
	Shared   bool
	SharedUp bool // the shared store answers; false while on local buckets
}

// Stats returns the counters of every route and zone, sorted by route and
// zone, and every zone's table, sorted by name: what metrics and the status
// page show.
func (zs *Zones) Stats() ([]Stat, []ZoneStat) {
	var out []Stat
	for k, c := range zs.counters {
		z := zs.byName[k.zone]
		if z == nil {
			continue // a zone of an earlier config
		}
		out = append(out, Stat{
			Route: k.route, Zone: k.zone, KeyKind: z.key.Kind(),
			Allowed: c.Allowed.Load(), Delayed: c.Delayed.Load(), Rejected: c.Rejected.Load(),
			Strict: c.Strict.Load(), NoKey: c.NoKey.Load(), Untracked: c.Untracked.Load(), Fallback: c.Fallback.Load(),
		})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Route != out[j].Route {
			return out[i].Route < out[j].Route
		}
		return out[i].Zone < out[j].Zone
	})
	var zones []ZoneStat
	for name, z := range zs.byName {
		st := z.local.Stats()
		if z.strict != nil {
			s := z.strict.Stats()
			st.Keys += s.Keys
			st.Size += s.Size
			st.Untracked += s.Untracked
			st.Evicted += s.Evicted
		}
		zones = append(zones, ZoneStat{Zone: name, KeyKind: z.key.Kind(), TableStats: st, Shared: z.shared != nil, SharedUp: z.shared != nil && z.shared.Up()})
	}
	sort.Slice(zones, func(i, j int) bool { return zones[i].Zone < zones[j].Zone })
	return out, zones
}
