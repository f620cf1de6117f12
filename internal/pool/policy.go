package pool

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"sync/atomic"
)

// Policy names, as in the config.
const (
	RoundRobin = "round_robin"
	LeastConn  = "least_conn"
	RandomTwo  = "random_two"
	Hash       = "hash"
)

// Spec describes one host when building a pool.
type Spec struct {
	Addr   string
	Weight int
}

// New builds a pool. state returns the runtime state to use for an address
// (so that hosts kept across a reload keep theirs); nil means fresh state.
func New(name, balance string, specs []Spec, state func(addr string) *State) (*Pool, error) {
	p := &Pool{Name: name, Hosts: make([]*Host, len(specs))}
	for i, s := range specs {
		var st *State
		if state != nil {
			st = state(s.Addr)
		}
		if st == nil {
			st = new(State)
		}
		w := s.Weight
		if w < 1 {
			w = 1
		}
		p.Hosts[i] = &Host{Addr: s.Addr, Weight: w, Index: i, State: st}
	}
	switch balance {
	case RoundRobin, "":
		p.policy = newRoundRobin(p.Hosts)
	case LeastConn:
		p.policy = &leastConn{}
	case RandomTwo:
		p.policy = randomTwo{}
	case Hash:
		p.policy = newRing(p.Hosts)
	default:
		return nil, fmt.Errorf("pool %s: unknown balance policy %q", name, balance)
	}
	return p, nil
}

// roundRobin is nginx's smooth weighted round robin, computed once into a
// schedule so that picking is one atomic add instead of a locked update of
// every host's current weight. A host that is unavailable or tried is
// skipped by stepping along the schedule, which spreads its share over the
// others in proportion to their weights.
type roundRobin struct {
	schedule []int32
	next     atomic.Uint64
}

func newRoundRobin(hosts []*Host) *roundRobin {
	total := 0
	for _, h := range hosts {
		total += h.Weight
	}
	cur := make([]int, len(hosts))
	rr := &roundRobin{schedule: make([]int32, 0, total)}
	for range total {
		best := 0
		for i, h := range hosts {
			cur[i] += h.Weight
			if cur[i] > cur[best] {
				best = i
			}
		}
		cur[best] -= total
		rr.schedule = append(rr.schedule, int32(best))
	}
	// Start at a random place so that many sturdy instances, or a reload,
	// do not all send their first requests to the first host.
	rr.next.Store(rand.Uint64N(uint64(len(rr.schedule))))
	return rr
}

func (rr *roundRobin) pick(p *Pool, _ uint64, t Tried) *Host {
	n := uint64(len(rr.schedule))
	start := rr.next.Add(1)
	for i := range n {
		h := p.Hosts[rr.schedule[(start+i)%n]]
		if p.usable(h, t) {
			return h
		}
	}
	return nil
}

// leastConn picks the host with the fewest in-flight requests per unit of
// weight; ties go round robin so idle pools spread evenly.
type leastConn struct{ next atomic.Uint64 }

func (lc *leastConn) pick(p *Pool, _ uint64, t Tried) *Host {
	n := len(p.Hosts)
	start := int(lc.next.Add(1) % uint64(n))
	var best *Host
	for i := range n {
		h := p.Hosts[(start+i)%n]
		if !p.usable(h, t) {
			continue
		}
		if best == nil || h.InFlight()*int64(best.Weight) < best.InFlight()*int64(h.Weight) {
			best = h
		}
	}
	return best
}

// randomTwo samples two hosts by weight and keeps the less loaded one
// ("power of two choices"): nearly least_conn's balance without scanning.
type randomTwo struct{}

func (randomTwo) pick(p *Pool, _ uint64, t Tried) *Host {
	a, b := weightedRandom(p, t), weightedRandom(p, t)
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case b.InFlight()*int64(a.Weight) < a.InFlight()*int64(b.Weight):
		return b
	}
	return a
}

func weightedRandom(p *Pool, t Tried) *Host {
	total := 0
	for _, h := range p.Hosts {
		if p.usable(h, t) {
			total += h.Weight
		}
	}
	if total == 0 {
		return nil
	}
	r := rand.IntN(total)
	for _, h := range p.Hosts {
		if !p.usable(h, t) {
			continue
		}
		if r -= h.Weight; r < 0 {
			return h
		}
	}
	return nil
}

// ring is consistent hashing with virtual nodes. A key maps to the first
// point at or after its hash; when that host is unavailable the walk goes on
// clockwise, so removing a host moves only that host's keys (nginx's ip_hash
// remaps far more).
type ring struct {
	points []uint64
	owners []int32
}

const vnodesPerWeight = 160

func newRing(hosts []*Host) *ring {
	type pt struct {
		h     uint64
		owner int32
	}
	var pts []pt
	for i, h := range hosts {
		for v := range h.Weight * vnodesPerWeight {
			pts = append(pts, pt{HashString(h.Addr + "#" + strconv.Itoa(v)), int32(i)})
		}
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].h < pts[j].h })
	r := &ring{points: make([]uint64, len(pts)), owners: make([]int32, len(pts))}
	for i, p := range pts {
		r.points[i], r.owners[i] = p.h, p.owner
	}
	return r
}

func (r *ring) pick(p *Pool, key uint64, t Tried) *Host {
	n := len(r.points)
	i, _ := slices.BinarySearch(r.points, key)
	for j := range n {
		h := p.Hosts[r.owners[(i+j)%n]]
		if p.usable(h, t) {
			return h
		}
	}
	return nil
}

// HashString is 64-bit FNV-1a followed by a finalizer that spreads short
// keys (like IPv4 addresses) over the whole ring. It is stable across
// processes, so several sturdy instances agree on where a key goes.
func HashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
