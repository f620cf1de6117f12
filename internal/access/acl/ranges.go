package acl

import (
	"net/netip"
	"sort"
)

// Addresses are 128-bit numbers: IPv6 as is, IPv4 in the IPv4-mapped range
// ::ffff:0:0/96 (the families have ranges of their own).
type u128 struct{ hi, lo uint64 }

func (a u128) less(b u128) bool { return a.hi < b.hi || a.hi == b.hi && a.lo < b.lo }

func (a u128) next() u128 {
	if a.lo == ^uint64(0) {
		return u128{a.hi + 1, 0}
	}
	return u128{a.hi, a.lo + 1}
}

func fromAddr(a netip.Addr) u128 {
	b := a.Unmap().As16()
	var x u128
	for i := range 8 {
		x.hi = x.hi<<8 | uint64(b[i])
		x.lo = x.lo<<8 | uint64(b[i+8])
	}
	return x
}

// hostMask is the mask of the host bits of a prefix of bits (of 128).
func hostMask(bits int) u128 {
	switch {
	case bits <= 0:
		return u128{^uint64(0), ^uint64(0)}
	case bits < 64:
		return u128{^uint64(0) >> bits, ^uint64(0)}
	case bits < 128:
		return u128{0, ^uint64(0) >> (bits - 64)}
	}
	return u128{}
}

// item is one prefix of one rule.
type item struct {
	start, end u128 // inclusive
	order      int  // the rule's position: lower wins
	act        Action
}

func newItem(p netip.Prefix, order int, act Action) item {
	p = p.Masked()
	bits := p.Bits()
	if p.Addr().Is4() {
		bits += 96
	}
	s := fromAddr(p.Addr())
	m := hostMask(bits)
	return item{start: s, end: u128{s.hi | m.hi, s.lo | m.lo}, order: order, act: act}
}

// build turns prefixes into disjoint ranges. CIDR prefixes are nested or
// disjoint, never overlapping otherwise, so the prefixes covering an
// address form a chain: a sweep in address order with a stack of the
// open prefixes, each carrying the lowest rule order of itself and its
// parents, gives every range its first matching rule.
func build(items []item) ranges {
	sort.Slice(items, func(i, j int) bool {
		a, b := items[i], items[j]
		if a.start != b.start {
			return a.start.less(b.start)
		}
		if a.end != b.end {
			return b.end.less(a.end) // wider first
		}
		return a.order < b.order
	})
	l := ranges{starts: []u128{{}}, acts: []Action{NoMatch}}
	emit := func(at u128, act Action) {
		n := len(l.starts)
		if l.starts[n-1] == at {
			l.starts, l.acts = l.starts[:n-1], l.acts[:n-1] // overridden at the same address
			n--
		}
		if n > 0 && l.acts[n-1] == act {
			return
		}
		l.starts, l.acts = append(l.starts, at), append(l.acts, act)
	}
	type open struct {
		end   u128
		order int
		act   Action
	}
	var stack []open
	current := func() Action {
		if len(stack) == 0 {
			return NoMatch
		}
		return stack[len(stack)-1].act
	}
	closeBefore := func(at u128, all bool) {
		for len(stack) > 0 && (all || stack[len(stack)-1].end.less(at)) {
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if f.end != (u128{^uint64(0), ^uint64(0)}) {
				emit(f.end.next(), current())
			}
		}
	}
	for i, it := range items {
		if i > 0 && it.start == items[i-1].start && it.end == items[i-1].end {
			continue // the same prefix again: the earlier rule already won
		}
		closeBefore(it.start, false)
		o := open{end: it.end, order: it.order, act: it.act}
		if n := len(stack); n > 0 && stack[n-1].order < o.order {
			o.order, o.act = stack[n-1].order, stack[n-1].act
		}
		stack = append(stack, o)
		emit(it.start, o.act)
	}
	closeBefore(u128{}, true)
	if len(l.starts) == 0 || l.starts[0] != (u128{}) {
		l.starts = append([]u128{{}}, l.starts...)
		l.acts = append([]Action{NoMatch}, l.acts...)
	}
	return l
}

// ranges are disjoint address ranges, each with its verdict.
type ranges struct {
	starts []u128 // ascending; starts[0] is 0
	acts   []Action
}

func (r *ranges) lookup(x u128) Action {
	// The last range starting at or below x.
	i := sort.Search(len(r.starts), func(i int) bool { return x.less(r.starts[i]) }) - 1
	return r.acts[i]
}
