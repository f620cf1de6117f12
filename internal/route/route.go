// Package route chooses the route for a request from its Host and path.
//
// Matching is by host first, then by the longest path prefix among the
// routes of the most specific host group that has one: exact names, then
// wildcards ("*.example.com", the longest suffix first), then routes with no
// hosts. When nothing matches, the default route answers, if there is one.
// A path prefix ending in "/" matches anything below it; one without a
// trailing slash matches itself and anything below it as a segment, so
// "/api" matches "/api" and "/api/v1" but not "/apix".
package route

import (
	"sort"
	"strings"
)

// Entry is one route as the table sees it.
type Entry[T any] struct {
	Hosts   []string // lower-case; exact or "*.suffix"; empty means any host
	Path    string
	Default bool
	Value   T
}

type prefixes[T any] []*Entry[T] // longest path first

type wildcard[T any] struct {
	suffix string // ".example.com"
	routes prefixes[T]
}

// Table is an immutable routing table; build a new one on reload.
type Table[T any] struct {
	exact map[string]prefixes[T]
	wild  []wildcard[T] // longest suffix first
	any   prefixes[T]
	def   *Entry[T]
}

// New builds a table. Entries are not copied and must not change.
func New[T any](entries []*Entry[T]) *Table[T] {
	t := &Table[T]{exact: map[string]prefixes[T]{}}
	wild := map[string]prefixes[T]{}
	for _, e := range entries {
		if e.Default {
			t.def = e
		}
		if len(e.Hosts) == 0 {
			t.any = append(t.any, e)
		}
		for _, h := range e.Hosts {
			h = strings.ToLower(h)
			if s, ok := strings.CutPrefix(h, "*"); ok {
				wild[s] = append(wild[s], e)
			} else {
				t.exact[h] = append(t.exact[h], e)
			}
		}
	}
	for s, rs := range wild {
		t.wild = append(t.wild, wildcard[T]{s, sortPrefixes(rs)})
	}
	sort.Slice(t.wild, func(i, j int) bool { return len(t.wild[i].suffix) > len(t.wild[j].suffix) })
	for h, rs := range t.exact {
		t.exact[h] = sortPrefixes(rs)
	}
	t.any = sortPrefixes(t.any)
	return t
}

func sortPrefixes[T any](rs prefixes[T]) prefixes[T] {
	sort.SliceStable(rs, func(i, j int) bool { return len(rs[i].Path) > len(rs[j].Path) })
	return rs
}

// Match returns the route for host (a Host header, port allowed) and path.
func (t *Table[T]) Match(host, path string) (*Entry[T], bool) {
	host = normalizeHost(host)
	if rs, ok := t.exact[host]; ok {
		if e := rs.match(path); e != nil {
			return e, true
		}
	}
	for _, w := range t.wild {
		if len(host) > len(w.suffix) && strings.HasSuffix(host, w.suffix) {
			if e := w.routes.match(path); e != nil {
				return e, true
			}
		}
	}
	if e := t.any.match(path); e != nil {
		return e, true
	}
	if t.def != nil {
		return t.def, true
	}
	return nil, false
}

func (rs prefixes[T]) match(path string) *Entry[T] {
	for _, e := range rs {
		if pathMatches(e.Path, path) {
			return e
		}
	}
	return nil
}

func pathMatches(prefix, path string) bool {
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	return len(path) == len(prefix) || prefix[len(prefix)-1] == '/' || path[len(prefix)] == '/'
}

// normalizeHost lower-cases host and strips a port and a trailing dot
// without allocating when it is already clean.
func normalizeHost(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[i:], "]") {
		h = h[:i]
	}
	h = strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), ".")
	for i := 0; i < len(h); i++ {
		if c := h[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(h)
		}
	}
	return h
}
