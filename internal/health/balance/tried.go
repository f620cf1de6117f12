package balance

// Tried is the set of hosts a request has already been sent to, by the
// host's index in its pool. The zero value is empty; it does not allocate
// for pools of up to 64 hosts, so a request's set stays on its stack.
type Tried struct {
	bits uint64
	more map[int]bool
}

// Add marks index i as tried.
func (t *Tried) Add(i int) {
	if i < 64 {
		t.bits |= 1 << uint(i)
		return
	}
	if t.more == nil {
		t.more = map[int]bool{}
	}
	t.more[i] = true
}

// Has reports whether index i was tried.
func (t *Tried) Has(i int) bool {
	if i < 64 {
		return t.bits&(1<<uint(i)) != 0
	}
	return t.more[i]
}

// Len is the number of indexes tried.
func (t *Tried) Len() int {
	n := len(t.more)
	for b := t.bits; b != 0; b &= b - 1 {
		n++
	}
	return n
}
