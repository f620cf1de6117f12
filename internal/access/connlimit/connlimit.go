// Package connlimit bounds the requests in flight per key (nginx's
// limit_conn): a client address, a header, a cookie or the route. Counts
// live in a fixed-size sharded table. A key whose requests have all ended
// stays (so that a returning client costs no allocation) until its slot is
// needed: a new key on a full shard takes the slot of a key at zero.
//
// When a new key finds its shard full of keys with requests in flight, it
// is let through uncounted and counted as Untracked, for the reason
// ratelimit.Table gives: refusing it would make an attack from many
// addresses an outage for every new client.
package connlimit

import (
	"fmt"
	"hash/maphash"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/sturdyproxy/sturdy/internal/access/limitkey"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// Table counts requests in flight per key.
type Table struct {
	seed   maphash.Seed
	mask   uint64
	shards []shard
	size   int
}

type shard struct {
	mu        sync.Mutex // guards m and untracked
	m         map[string]int32
	max       int
	untracked uint64
	_         [64]byte // keeps neighbouring shards' locks off one cache line
}

// NewTable makes a table for size keys in flight at once.
func NewTable(size int) *Table {
	size = max(size, 1)
	n := 1
	for n < 64 && size/(n*2) >= 256 {
		n *= 2
	}
	per := (size + n - 1) / n
	t := &Table{seed: maphash.MakeSeed(), mask: uint64(n - 1), shards: make([]shard, n), size: per * n}
	for i := range t.shards {
		t.shards[i] = shard{m: make(map[string]int32, per), max: per}
	}
	return t
}

func (t *Table) shard(key string) *shard {
	if t.mask == 0 {
		return &t.shards[0]
	}
	return &t.shards[maphash.String(t.seed, key)&t.mask]
}

// acquire counts one more request of key unless limit are already in
// flight. untracked reports a full shard: the request passes uncounted.
func (t *Table) acquire(key string, limit int) (ok, untracked bool) {
	s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	n, known := s.m[key]
	switch {
	case known && int(n) >= limit:
		return false, false
	case known:
		s.m[key] = n + 1
	case len(s.m) >= s.max && !s.evictIdle():
		s.untracked++
		return true, true
	default:
		// The key usually points into the request: copy it.
		s.m[string([]byte(key))] = 1
	}
	return true, false
}

// evictScan is how many keys a full shard looks at for one at zero; map
// iteration starts at a random place, so repeated scans cover the shard.
const evictScan = 16

// evictIdle forgets one key with nothing in flight, if it finds one.
func (s *shard) evictIdle() bool {
	n := 0
	for k, c := range s.m {
		if c == 0 {
			delete(s.m, k)
			return true
		}
		if n++; n == evictScan {
			break
		}
	}
	return false
}

func (t *Table) release(key string) {
	s := t.shard(key)
	s.mu.Lock()
	if n := s.m[key]; n > 0 {
		s.m[key] = n - 1
	}
	s.mu.Unlock()
}

// InFlight is key's count now.
func (t *Table) InFlight(key string) int {
	s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	return int(s.m[key])
}

// Zone is one compiled conn_limit_zones entry.
type Zone struct {
	name string
	cfg  config.ConnLimitZone
	key  limitkey.Key
	t    *Table
}

// Zones are one config's zones and the counters of the routes using them.
type Zones struct {
	byName   map[string]*Zone
	counters map[statKey]*Counters
}

type statKey struct{ route, zone string }

// CompileZones builds the zones of cfg. A zone of prev with the same name,
// key and size keeps its table, so that requests in flight across a reload
// are still counted (and released into the table that counted them).
func CompileZones(cfg []config.ConnLimitZone, prev *Zones) (*Zones, error) {
	zs := &Zones{byName: make(map[string]*Zone, len(cfg)), counters: map[statKey]*Counters{}}
	for i, zc := range cfg {
		key, err := limitkey.Parse(zc.Key)
		if err != nil {
			return nil, fmt.Errorf("conn_limit_zones[%d].key: %v", i, err)
		}
		z := &Zone{name: zc.Name, cfg: zc, key: key}
		if prev != nil {
			if p := prev.byName[zc.Name]; p != nil && p.cfg.Key == zc.Key && p.cfg.Size == zc.Size {
				z.t = p.t
			}
		}
		if z.t == nil {
			z.t = NewTable(zc.Size)
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

// Counters count one route's decisions in one zone since start.
type Counters struct {
	Passed    atomic.Uint64
	Rejected  atomic.Uint64
	NoKey     atomic.Uint64 // not limited: no value for the key
	Untracked atomic.Uint64 // passed uncounted: the table was full
}

// Limits are a route's compiled conn_limit entries.
type Limits struct {
	route string
	ls    []limit
}

type limit struct {
	zone    *Zone
	max     int
	refusal Refusal // returned by pointer: no allocation per refusal
	c       *Counters
}

// Route compiles a route's conn_limit entries; nil when there are none.
func (zs *Zones) Route(path, route string, cfg []config.ConnLimit) (*Limits, error) {
	if len(cfg) == 0 {
		return nil, nil
	}
	l := &Limits{route: route}
	for j, c := range cfg {
		z := zs.byName[c.Zone]
		if z == nil {
			return nil, fmt.Errorf("%s.conn_limit[%d].zone: no conn limit zone named %q", path, j, c.Zone)
		}
		if c.Max < 1 {
			return nil, fmt.Errorf("%s.conn_limit[%d].max: must be at least 1", path, j)
		}
		k := statKey{route, c.Zone}
		cs := zs.counters[k]
		if cs == nil {
			cs = new(Counters)
			zs.counters[k] = cs
		}
		status := c.Status
		if status == 0 {
			status = config.DefaultConnLimitStatus
		}
		l.ls = append(l.ls, limit{zone: z, max: c.Max, refusal: Refusal{Status: status, Zone: c.Zone}, c: cs})
	}
	return l, nil
}

// Held is what a request holds until it ends; call Release exactly once.
// Its zero value holds nothing.
type Held struct {
	n     int
	inl   [2]hold
	extra []hold
}

type hold struct {
	t   *Table
	key string
}

func (h *Held) add(x hold) {
	if h.n < len(h.inl) {
		h.inl[h.n] = x
	} else {
		h.extra = append(h.extra, x)
	}
	h.n++
}

// Release ends the request in every zone that counted it.
func (h *Held) Release() {
	for i := range min(h.n, len(h.inl)) {
		h.inl[i].t.release(h.inl[i].key)
	}
	for _, x := range h.extra {
		x.t.release(x.key)
	}
	*h = Held{}
}

// Refusal says which limit refused a request. Acquire returns the limit's
// own Refusal (no allocation per refusal): do not modify it.
type Refusal struct {
	Status int
	Zone   string
}

// Acquire counts r in each of the route's zones. When one is full it
// releases what it took and returns the refusal; otherwise the caller
// must Release the Held when the request ends. client is the client's
// address as the proxy decided it.
func (l *Limits) Acquire(r *http.Request, client string) (Held, *Refusal) {
	var h Held
	for i := range l.ls {
		lim := &l.ls[i]
		key, ok := lim.zone.key.Of(r, client, l.route)
		if !ok {
			lim.c.NoKey.Add(1)
			continue
		}
		ok, untracked := lim.zone.t.acquire(key, lim.max)
		switch {
		case !ok:
			lim.c.Rejected.Add(1)
			h.Release()
			return Held{}, &lim.refusal
		case untracked:
			lim.c.Untracked.Add(1)
		default:
			lim.c.Passed.Add(1)
			h.add(hold{lim.zone.t, key})
		}
	}
	return h, nil
}

// Stat is one route's counts in one zone.
type Stat struct {
	Route, Zone, KeyKind string
	Passed, Rejected     uint64
	NoKey, Untracked     uint64
}

// Stats returns every route's counters per zone, sorted.
func (zs *Zones) Stats() []Stat {
	var out []Stat
	for k, c := range zs.counters {
		z := zs.byName[k.zone]
		if z == nil {
			continue
		}
		out = append(out, Stat{Route: k.route, Zone: k.zone, KeyKind: z.key.Kind(),
			Passed: c.Passed.Load(), Rejected: c.Rejected.Load(), NoKey: c.NoKey.Load(), Untracked: c.Untracked.Load()})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Route != out[j].Route {
			return out[i].Route < out[j].Route
		}
		return out[i].Zone < out[j].Zone
	})
	return out
}
