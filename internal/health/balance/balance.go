// Package balance holds the balancing policies. A policy is built over the
// hosts that are in rotation (the health model rebuilds it when that set
// changes) and turns a request into the member to try next; it never sees a
// host that is out.
//
// Picking takes no lock and allocates nothing: per-request conditions (hosts
// already tried, connection caps, slow start) come in as a function, and the
// load of each member as another, so that policies stay free of host state.
// A member the function turns down gives its share to the others by
// weight, never to its neighbour in the order.
package balance

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

// Member is one host a policy balances over.
type Member struct {
	// Key identifies the host stably across processes (its address): the
	// hash ring places it by this key.
	Key string
	// Weight is the host's share relative to the others; values below 1
	// count as 1.
	Weight int
}

// Policy picks among the members it was built over. It is safe for
// concurrent use.
type Policy struct {
	kind    string
	weights []int

	schedule []int32       // round_robin, least_conn: nginx's smooth sequence, precomputed
	next     atomic.Uint64 // round_robin, least_conn: where the walk starts

	points []uint64 // hash: the ring
	owners []int32
}

// New builds a policy of the given kind over members.
func New(kind string, members []Member) (*Policy, error) {
	p := &Policy{kind: kind, weights: make([]int, len(members))}
	for i, m := range members {
		p.weights[i] = max(m.Weight, 1)
	}
	switch kind {
	case RoundRobin, "":
		p.kind = RoundRobin
		p.buildSchedule()
	case LeastConn:
		p.buildSchedule() // whose turn it is among equally loaded members
	case RandomTwo:
	case Hash:
		p.buildRing(members)
	default:
		return nil, fmt.Errorf("unknown balance policy %q; expected round_robin, least_conn, random_two or hash", kind)
	}
	return p, nil
}

// Len is the number of members.
func (p *Policy) Len() int { return len(p.weights) }

// Pick returns the index of the member to try, or -1 when no member is
// usable. usable reports whether a member may take this request; load is
// its number of requests in flight (least_conn, random_two). key feeds
// hash balancing; the other policies ignore it.
func (p *Policy) Pick(key uint64, usable func(i int) bool, load func(i int) int64) int {
	if len(p.weights) == 0 {
		return -1
	}
	switch p.kind {
	case RoundRobin:
		return p.pickRoundRobin(usable)
	case LeastConn:
		return p.pickLeastConn(usable, load)
	case RandomTwo:
		return p.pickRandomTwo(usable, load)
	}
	return p.pickHash(key, usable)
}

// buildSchedule computes nginx's smooth weighted round robin once, so that
// picking is one atomic add instead of a locked update of every member's
// current weight. Because the policy is built over the hosts in rotation
// only, a host that leaves gives its share to all others in proportion to
// their weights, not to its neighbour in the sequence.
func (p *Policy) buildSchedule() {
	total := 0
	for _, w := range p.weights {
		total += w
	}
	cur := make([]int, len(p.weights))
	p.schedule = make([]int32, 0, total)
	for range total {
		best := 0
		for i, w := range p.weights {
			cur[i] += w
			if cur[i] > cur[best] {
				best = i
			}
		}
		cur[best] -= total
		p.schedule = append(p.schedule, int32(best))
	}
	// Start at a random place so that many sturdy instances, or a reload,
	// do not all send their first requests to the first host.
	if total > 0 {
		p.next.Store(rand.Uint64N(uint64(total)))
	}
}

func (p *Policy) pickRoundRobin(usable func(int) bool) int {
	n := uint64(len(p.schedule))
	pos := p.next.Add(1)
	if m := int(p.schedule[pos%n]); usable(m) {
		return m
	}
	// The slot's member may not take this request (slow start, its
	// connection cap, tried already). The next slot belongs to its
	// neighbour in the sequence, which would get the whole share; other
	// slots drawn at random spread it over every member in proportion to
	// its weight, as nginx's smooth round robin does among the peers it
	// has left.
	if m := p.redraw(usable); m >= 0 {
		return m
	}
	for i := range n {
		if m := int(p.schedule[(pos+i)%n]); usable(m) {
			return m
		}
	}
	return -1
}

// redraws bounds the random draws before a pick falls back to a walk:
// enough that the walk's bias only shows when nearly every member is
// unusable for the request.
const redraws = 8

// redraw picks a random member by weight that is usable, or -1 after
// redraws misses. A member whose usable filter is itself a coin (slow
// start) then gets its weight times its chance: its effective weight.
func (p *Policy) redraw(usable func(int) bool) int {
	n := uint64(len(p.schedule))
	for range redraws {
		if m := int(p.schedule[rand.Uint64N(n)]); usable(m) {
			return m
		}
	}
	return -1
}

// pickLeastConn takes the member with the fewest requests in flight per
// unit of weight; ties go to the member whose turn it is in the smooth
// round robin, so that idle pools spread by weight. When that member may
// not take the request, ties go to a member drawn by weight instead of to
// the next one in the walk.
func (p *Policy) pickLeastConn(usable func(int) bool, load func(int) int64) int {
	n := len(p.weights)
	start := int(p.schedule[p.next.Add(1)%uint64(len(p.schedule))])
	best, bestLoad := -1, int64(0)
	tieWeight := 0 // the weights of the members tied with best, when drawing
	draw := false
	for i := range n {
		m := (start + i) % n
		if !usable(m) {
			draw = draw || i == 0
			continue
		}
		l := load(m)
		switch {
		case best < 0 || l*int64(p.weights[best]) < bestLoad*int64(p.weights[m]):
			best, bestLoad, tieWeight = m, l, p.weights[m]
		case draw && l*int64(p.weights[best]) == bestLoad*int64(p.weights[m]):
			// Weighted reservoir sampling among the tied members.
			tieWeight += p.weights[m]
			if rand.IntN(tieWeight) < p.weights[m] {
				best, bestLoad = m, l
			}
		}
	}
	return best
}

// pickRandomTwo samples two members by weight and keeps the less loaded
// one ("power of two choices"): nearly least_conn's balance without a scan
// of loads.
func (p *Policy) pickRandomTwo(usable func(int) bool, load func(int) int64) int {
	a, b := p.weightedRandom(usable), p.weightedRandom(usable)
	switch {
	case a < 0:
		return b
	case b < 0:
		return a
	case load(b)*int64(p.weights[a]) < load(a)*int64(p.weights[b]):
		return b
	}
	return a
}

func (p *Policy) weightedRandom(usable func(int) bool) int {
	// usable is asked once per member: its answer may be a coin (slow
	// start), and asking twice would move the share of a member that said
	// yes, then no, to its neighbour. Up to 64 members the answers are kept
	// in a bit set on the stack.
	total := 0
	var yes uint64
	for i, w := range p.weights {
		if usable(i) {
			total += w
			if i < 64 {
				yes |= 1 << uint(i)
			}
		}
	}
	if total == 0 {
		return -1
	}
	r := rand.IntN(total)
	for i, w := range p.weights {
		if i < 64 && yes&(1<<uint(i)) == 0 || i >= 64 && !usable(i) {
			continue
		}
		if r -= w; r < 0 {
			return i
		}
	}
	return -1
}

// vnodesPerWeight is how many ring points one unit of weight gets.
const vnodesPerWeight = 160

// buildRing places each member on the ring by its key. A request key maps
// to the first point at or after its hash; when that member may not take
// the request the walk goes on clockwise. Members are placed by key, not
// by index, so a ring built over fewer members (a host left rotation)
// keeps every other member's keys where they were: only the departed
// host's keys move (nginx's ip_hash remaps far more).
func (p *Policy) buildRing(members []Member) {
	type pt struct {
		h     uint64
		owner int32
	}
	var pts []pt
	for i, m := range members {
		for v := range p.weights[i] * vnodesPerWeight {
			pts = append(pts, pt{HashString(m.Key + "#" + strconv.Itoa(v)), int32(i)})
		}
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].h < pts[j].h })
	p.points, p.owners = make([]uint64, len(pts)), make([]int32, len(pts))
	for i, q := range pts {
		p.points[i], p.owners[i] = q.h, q.owner
	}
}

func (p *Policy) pickHash(key uint64, usable func(int) bool) int {
	n := len(p.points)
	i, _ := slices.BinarySearch(p.points, key)
	for j := range n {
		if m := int(p.owners[(i+j)%n]); usable(m) {
			return m
		}
	}
	return -1
}

// HashString is 64-bit FNV-1a followed by a finalizer that spreads short
// keys (like IPv4 addresses) over the whole ring. It is stable across
// processes, so several sturdy instances agree on where a key goes.
func HashString(s string) uint64 { return HashStrings(s) }

// HashStrings is HashString of the strings' concatenation, without
// making it.
func HashStrings(ss ...string) uint64 {
	h := uint64(14695981039346656037)
	for _, s := range ss {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= 1099511628211
		}
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
