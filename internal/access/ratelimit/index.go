package ratelimit

// index maps a key's hash to its slot in a shard's entries: open
// addressing with linear probing over twice as many cells as entries, and
// backward-shift deletion, so that the constant churn of a full table
// (evict one key, add another) leaves no tombstones to slow lookups down.
// Go's map degrades under exactly that churn.
type index struct {
	cells []int32 // entry slot, or -1
	mask  uint64
	n     int
}

func newIndex(entries int) index {
	size := 2
	for size < 2*entries {
		size *= 2
	}
	cells := make([]int32, size)
	for i := range cells {
		cells[i] = -1
	}
	return index{cells: cells, mask: uint64(size - 1)}
}

// find returns the slot of key, or -1.
func (x *index) find(ents []entry, h uint64, key string) int32 {
	for p := h & x.mask; ; p = (p + 1) & x.mask {
		i := x.cells[p]
		if i < 0 {
			return -1
		}
		if e := &ents[i]; e.hash == h && e.key == key {
			return i
		}
	}
}

// add indexes slot i (whose key is not indexed yet).
func (x *index) add(ents []entry, i int32) {
	p := ents[i].hash & x.mask
	for x.cells[p] >= 0 {
		p = (p + 1) & x.mask
	}
	x.cells[p] = i
	x.n++
}

// remove drops slot i from the index and shifts the cells after it back,
// so that every remaining key stays reachable from its home cell.
func (x *index) remove(ents []entry, i int32) {
	p := ents[i].hash & x.mask
	for x.cells[p] != i {
		p = (p + 1) & x.mask
	}
	x.cells[p] = -1
	x.n--
	for q := (p + 1) & x.mask; x.cells[q] >= 0; q = (q + 1) & x.mask {
		home := ents[x.cells[q]].hash & x.mask
		// Move q's key into the hole at p unless its home lies in (p, q]
		// (cyclically): then it is already reachable.
		if (q-home)&x.mask >= (q-p)&x.mask {
			x.cells[p], x.cells[q] = x.cells[q], -1
			p = q
		}
	}
}
