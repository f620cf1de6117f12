// Package ratelimit limits the request rate per key (a client address, a
// header, a cookie or the route) with nginx's limit_req semantics: a leaky
// bucket drained at the zone's rate, a burst accepted above it, excess
// requests delayed until their slot unless nodelay (or, with delay=N, after
// the first N), and requests beyond the burst refused with Retry-After.
//
// The buckets live in a fixed-size table, sharded so that the hot path
// takes only one shard's lock; a known key costs no allocation. What the
// table does when it is full is documented on Table.
package ratelimit

import (
	"hash/maphash"
	"sync"
	"time"
)

// Table holds one bucket per key: the bucket's theoretical arrival time
// (GCRA's TAT), which is nginx's "excess" expressed as time. A request at
// now moves it to max(now, tat+interval); the bucket's debt is then tat-now,
// and the request is beyond the burst when the debt exceeds burst×interval.
//
// Memory is bounded: at most Size keys (rounded up to whole shards). A key
// is idle once tat+interval <= now: its bucket has drained, and forgetting
// it changes no future decision. A new key takes a free slot, or else the
// slot of the least recently used idle key of its shard (the last
// evictScan keys of the LRU order are looked at). When none of those is
// idle, every key there is still being limited, and the new key is let
// through untracked and counted (Counters.Untracked): refusing it would turn
// an attack from more addresses than the table holds into an outage for
// every new, innocent client, while letting it through keeps every key
// already limited in check, keeps memory bounded, and leaves the route's
// in-flight and connection limits in force. A zone whose Untracked count
// grows is too small for its traffic.
type Table struct {
	interval int64 // ns per request
	epoch    time.Time
	seed     maphash.Seed
	mask     uint64
	shards   []shard
	size     int
}

// evictScan is how many of the least recently used keys of a shard are
// looked at for an idle one.
const evictScan = 8

type shard struct {
	mu   sync.Mutex // guards everything below
	idx  index
	ents []entry
	// head is the most recently used slot, tail the least; -1 when empty.
	head, tail int32
	free       int32 // next never-used slot, up to len(ents)
	untracked  uint64
	evicted    uint64
	_          [64]byte // keeps neighbouring shards' locks off one cache line
}

type entry struct {
	key        string
	hash       uint64
	tat        int64
	prev, next int32
}

// NewTable makes a table for size keys at one request per interval. The
// table's clock starts now; every later now must come from the same clock
// (time.Now, or synctest's fake time when the table is made in a bubble).
func NewTable(size int, interval time.Duration) *Table {
	size = max(size, 1)
	n := 1
	for n < 64 && size/(n*2) >= 256 {
		n *= 2
	}
	per := (size + n - 1) / n
	t := &Table{interval: max(int64(interval), 1), epoch: time.Now(), seed: maphash.MakeSeed(), mask: uint64(n - 1), shards: make([]shard, n), size: per * n}
	for i := range t.shards {
		s := &t.shards[i]
		s.idx = newIndex(per)
		s.ents = make([]entry, per)
		s.head, s.tail = -1, -1
	}
	return t
}

// Interval is the time one request costs in this table's buckets.
func (t *Table) Interval() time.Duration { return time.Duration(t.interval) }

// Size is how many keys the table holds at most.
func (t *Table) Size() int { return t.size }

// Decision is the verdict on one request.
type Decision struct {
	Verdict Verdict
	// Wait is, for Delay, how long to hold the request before passing it
	// on; for Reject, how long until a retry could be accepted (the
	// Retry-After). Zero for Allow.
	Wait time.Duration
}

// Verdict is what to do with a request.
type Verdict uint8

const (
	// Allow passes the request on at once.
	Allow Verdict = iota
	// Delay passes it on after Decision.Wait.
	Delay
	// Reject refuses it, with Retry-After: Decision.Wait.
	Reject
)

func (v Verdict) String() string {
	switch v {
	case Allow:
		return "allow"
	case Delay:
		return "delay"
	}
	return "reject"
}

// Take charges one request of key at now against a bucket that accepts
// burst requests above the rate, of which the first delay pass at once
// (delay < 0: all of them, nginx's nodelay). A rejected request is not
// charged. untracked reports that the table was full and the key is not
// remembered.
func (t *Table) Take(key string, now time.Time, burst, delay int) (d Decision, untracked bool) {
	n := int64(now.Sub(t.epoch))
	h, s := t.shard(key)
	s.mu.Lock()
	i := s.idx.find(s.ents, h, key)
	if i < 0 {
		if i = s.insert(key, h, n, t.interval); i < 0 {
			s.untracked++
			s.mu.Unlock()
			return Decision{}, true // let through: see Table
		}
		s.mu.Unlock()
		return Decision{}, false // a new bucket is empty: nginx passes its first request
	}
	e := &s.ents[i]
	s.touch(i)
	tat := max(n, e.tat+t.interval)
	debt := tat - n
	if debt > int64(burst)*t.interval {
		retry := e.tat + t.interval - int64(burst)*t.interval - n
		s.mu.Unlock()
		return Decision{Verdict: Reject, Wait: time.Duration(retry)}, false
	}
	e.tat = tat
	s.mu.Unlock()
	if delay >= 0 {
		if wait := debt - int64(delay)*t.interval; wait > 0 {
			return Decision{Verdict: Delay, Wait: time.Duration(wait)}, false
		}
	}
	return Decision{}, false
}

// Refund gives back one request of key taken at the same instant, for a
// request a later limit refused (nginx charges no zone for a refused
// request).
func (t *Table) Refund(key string) {
	h, s := t.shard(key)
	s.mu.Lock()
	if i := s.idx.find(s.ents, h, key); i >= 0 {
		s.ents[i].tat -= t.interval
	}
	s.mu.Unlock()
}

// Blocked reports whether Take(key, now, burst, -1) would reject, without
// charging anything, and when a retry could be accepted.
func (t *Table) Blocked(key string, now time.Time, burst int) (bool, time.Duration) {
	n := int64(now.Sub(t.epoch))
	h, s := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.idx.find(s.ents, h, key)
	if i < 0 {
		return false, 0
	}
	tat := s.ents[i].tat
	if max(n, tat+t.interval)-n <= int64(burst)*t.interval {
		return false, 0
	}
	return true, time.Duration(tat + t.interval - int64(burst)*t.interval - n)
}

// Len is how many keys the table remembers now.
func (t *Table) Len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += s.idx.n
		s.mu.Unlock()
	}
	return n
}

// TableStats are a table's totals since it was made.
type TableStats struct {
	Keys      int    // remembered now
	Size      int    // at most
	Untracked uint64 // new keys let through untracked because the table was full
	Evicted   uint64 // idle keys forgotten to make room
}

// Stats returns the table's totals.
func (t *Table) Stats() TableStats {
	st := TableStats{Size: t.size}
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		st.Keys += s.idx.n
		st.Untracked += s.untracked
		st.Evicted += s.evicted
		s.mu.Unlock()
	}
	return st
}

// shard hashes key once: the top bits choose the shard, the others the
// slot in its index.
func (t *Table) shard(key string) (uint64, *shard) {
	h := maphash.String(t.seed, key)
	return h, &t.shards[(h>>58)&t.mask]
}

// insert remembers a new key with an empty bucket (tat = now) and returns
// its slot, or -1 when the shard is full of keys still being limited.
func (s *shard) insert(key string, h uint64, now, interval int64) int32 {
	var i int32
	switch {
	case int(s.free) < len(s.ents):
		i = s.free
		s.free++
	default:
		i = s.tail
		for range evictScan {
			if i < 0 {
				return -1
			}
			if s.ents[i].tat+interval <= now {
				break
			}
			i = s.ents[i].prev
		}
		if i < 0 || s.ents[i].tat+interval > now {
			return -1
		}
		s.unlink(i)
		s.idx.remove(s.ents, i)
		s.evicted++
	}
	// The key usually points into the request (a header, RemoteAddr):
	// copy it so the table does not keep the request's memory alive.
	s.ents[i] = entry{key: string([]byte(key)), hash: h, tat: now, prev: -1, next: -1}
	s.idx.add(s.ents, i)
	s.pushFront(i)
	return i
}

func (s *shard) touch(i int32) {
	if s.head == i {
		return
	}
	s.unlink(i)
	s.pushFront(i)
}

func (s *shard) unlink(i int32) {
	e := &s.ents[i]
	if e.prev >= 0 {
		s.ents[e.prev].next = e.next
	} else {
		s.head = e.next
	}
	if e.next >= 0 {
		s.ents[e.next].prev = e.prev
	} else {
		s.tail = e.prev
	}
	e.prev, e.next = -1, -1
}

func (s *shard) pushFront(i int32) {
	e := &s.ents[i]
	e.prev, e.next = -1, s.head
	if s.head >= 0 {
		s.ents[s.head].prev = i
	}
	s.head = i
	if s.tail < 0 {
		s.tail = i
	}
}
