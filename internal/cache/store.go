package cache

import (
	"net/http"
	"slices"
	"sync/atomic"

	"github.com/maypok86/otter/v2"
)

// store holds entries in an otter cache bounded by total weight, so memory
// is capped in bytes and eviction favours what is used (W-TinyLFU). Stale
// entries are not expired by time: a stale copy is still useful for
// revalidation and stale-if-error, and weight eviction reclaims what is not.
type store struct {
	c         *otter.Cache[string, *entry]
	gen       atomic.Uint64 // Vary marker generations
	evictions atomic.Uint64
}

func newStore(maxBytes int64) *store {
	s := &store{}
	s.c = otter.Must(&otter.Options[string, *entry]{
		MaximumWeight: uint64(maxBytes),
		Weigher:       func(_ string, e *entry) uint32 { return e.weight },
		OnAtomicDeletion: func(ev otter.DeletionEvent[string, *entry]) {
			if ev.WasEvicted() {
				s.evictions.Add(1)
			}
		},
	})
	return s
}

// lookup finds the stored response for r. key is where a response for r is
// (or would be) stored; uriMiss reports that nothing at all is stored for
// the URI, as opposed to a missing Vary variant.
func (s *store) lookup(r *http.Request, primary string) (e *entry, key string, uriMiss bool) {
	v, ok := s.c.GetIfPresent(primary)
	if !ok {
		return nil, primary, true
	}
	if !v.marker {
		return v, primary, false
	}
	key = variantKey(primary, v.gen, varyValues(r.Header, v.varyNames))
	e, _ = s.c.GetIfPresent(key)
	return e, key, false
}

// put stores e as the response for r's URI and returns the key used. A
// varying response goes under a marker; the marker is reused while the
// Vary names stay the same so that sibling variants survive.
func (s *store) put(primary string, e *entry) string {
	key := primary
	if len(e.varyNames) > 0 {
		m, ok := s.c.GetIfPresent(primary)
		if !ok || !m.marker || !slices.Equal(m.varyNames, e.varyNames) {
			m = &entry{marker: true, gen: s.gen.Add(1), varyNames: e.varyNames}
			m.weight = weigh(primary, m)
			s.c.Set(primary, m)
		}
		key = variantKey(primary, m.gen, e.varyValues)
	}
	e.weight = weigh(key, e)
	s.c.Set(key, e)
	return key
}

func (s *store) invalidate(key string) { s.c.Invalidate(key) }
