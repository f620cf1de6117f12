// Package route chooses the route for a request: by host, then by path,
// then by the route's other conditions (method, headers, query), then by
// config order. docs/routing.md states the same rules for operators.
//
// Host: routes whose hosts name the request's host exactly come first, then
// wildcards ("*.example.com", the longest suffix first), then routes with
// no hosts. A group whose routes all fail to match falls through to the
// next; when nothing matches, the default route answers, if there is one.
//
// Path, within one host group, the most specific match wins:
//
//  1. an exact path;
//  2. the longest matching prefix, when it is marked BeforeRegex (nginx's
//     "location ^~");
//  3. the first matching regular expression;
//  4. the longest matching prefix.
//
// A Prefix matches whole segments ("/api" matches "/api" and "/api/v1",
// not "/apix"; a prefix ending in "/" matches anything below it), as
// Gateway API's PathPrefix does. A StartsWith prefix matches characters, as
// an nginx prefix location does ("/api" matches "/apix").
//
// Among routes equal on path, the other conditions decide, compared as
// Gateway API compares them: a method condition first, then more header
// conditions, then more query conditions; then config order. Gateway API's
// HTTPRoute precedence (exact path, longest prefix, method, headers, query,
// then the order of rules) is therefore a route list in that order.
package route

import (
	"cmp"
	"net/http"
	"slices"
	"strings"
)

// Entry is one route as the table sees it.
type Entry[T any] struct {
	Hosts []string // lower-case; exact or "*.suffix"; empty means any host
	// Path is a prefix, kept for routes written before Match: it is used
	// when Match.Path.Value is empty.
	Path    string
	Match   Match
	Default bool
	// SlashRedirect makes a Prefix or StartsWith route whose path ends in
	// "/" (not "/" itself) answer its path without the slash ("/admin"
	// for "/admin/") with a redirect to it, as nginx does for a prefix
	// location ending in "/" (see Resolve).
	SlashRedirect bool
	Value         T

	order int // config order, set by New
}

// group is the routes of one host pattern, in the order they are tried.
type group[T any] struct {
	exact    map[string][]*Entry[T] // by path; conditions, then config order
	prefixes []*Entry[T]            // longest first; conditions, then config order
	regexes  []*Entry[T]            // conditions, then config order
	// slashed holds the SlashRedirect routes by their path without its
	// trailing slash; conditions, then config order.
	slashed map[string][]*Entry[T]
}

type wildcard[T any] struct {
	suffix string // ".example.com"
	g      *group[T]
}

// Table is an immutable routing table; build a new one on reload.
type Table[T any] struct {
	exact map[string]*group[T]
	wild  []wildcard[T] // longest suffix first
	any   *group[T]
	def   *Entry[T]
	all   []*Entry[T]
}

// New builds a table. Entries are not copied and must not change; their
// order in the slice is their config order.
func New[T any](entries []*Entry[T]) *Table[T] {
	t := &Table[T]{exact: map[string]*group[T]{}, any: &group[T]{}, all: entries}
	wild := map[string]*group[T]{}
	for i, e := range entries {
		e.order = i
		if e.Match.Path.Value == "" {
			e.Match.Path.Kind, e.Match.Path.Value = Prefix, e.Path
			if e.Match.Path.Value == "" {
				e.Match.Path.Value = "/"
			}
		}
		if e.Default && t.def == nil {
			t.def = e
		}
		if len(e.Hosts) == 0 {
			t.any.add(e)
		}
		for _, h := range e.Hosts {
			h = strings.ToLower(h)
			if s, ok := strings.CutPrefix(h, "*"); ok {
				if wild[s] == nil {
					wild[s] = &group[T]{}
				}
				wild[s].add(e)
			} else {
				if t.exact[h] == nil {
					t.exact[h] = &group[T]{}
				}
				t.exact[h].add(e)
			}
		}
	}
	for s, g := range wild {
		t.wild = append(t.wild, wildcard[T]{s, g})
	}
	slices.SortFunc(t.wild, func(a, b wildcard[T]) int {
		return cmp.Or(cmp.Compare(len(b.suffix), len(a.suffix)), strings.Compare(a.suffix, b.suffix))
	})
	for _, g := range t.exact {
		g.sort()
	}
	for _, w := range t.wild {
		w.g.sort()
	}
	t.any.sort()
	return t
}

func (g *group[T]) add(e *Entry[T]) {
	switch e.Match.Path.Kind {
	case Exact:
		if g.exact == nil {
			g.exact = map[string][]*Entry[T]{}
		}
		g.exact[e.Match.Path.Value] = append(g.exact[e.Match.Path.Value], e)
	case Regex:
		g.regexes = append(g.regexes, e)
	default:
		g.prefixes = append(g.prefixes, e)
		if v := e.Match.Path.Value; e.SlashRedirect && len(v) > 1 && v[len(v)-1] == '/' {
			if g.slashed == nil {
				g.slashed = map[string][]*Entry[T]{}
			}
			g.slashed[v[:len(v)-1]] = append(g.slashed[v[:len(v)-1]], e)
		}
	}
}

func (g *group[T]) sort() {
	for _, es := range g.exact {
		slices.SortStableFunc(es, byConditions)
	}
	slices.SortStableFunc(g.prefixes, func(a, b *Entry[T]) int {
		return cmp.Or(cmp.Compare(len(b.Match.Path.Value), len(a.Match.Path.Value)), byConditions(a, b))
	})
	slices.SortStableFunc(g.regexes, byConditions)
	for _, es := range g.slashed {
		slices.SortStableFunc(es, byConditions)
	}
}

// byConditions orders entries equal on path: more specific conditions
// first, then config order.
func byConditions[T any](a, b *Entry[T]) int {
	return cmp.Or(-a.Match.rank().compare(b.Match.rank()), cmp.Compare(a.order, b.order))
}

// Match returns the route for host (a Host header, port allowed) and path,
// for a GET without headers or query: for tests and tools. Requests go
// through MatchRequest.
func (t *Table[T]) Match(host, path string) (*Entry[T], bool) {
	return t.match(&request{host: host, path: path, method: http.MethodGet})
}

// MatchRequest returns the route for r: its Host, its path (decoded, as
// r.URL.Path holds it), method, headers and query.
func (t *Table[T]) MatchRequest(r *http.Request) (*Entry[T], bool) {
	e, _, ok := t.resolve(&request{host: r.Host, path: r.URL.Path, method: r.Method, header: r.Header, rawQuery: r.URL.RawQuery})
	return e, ok
}

// Resolve is MatchRequest for a request about to be answered. When r's
// path is a SlashRedirect route's path without its trailing slash
// ("/admin" for "/admin/") and no route matches the path itself more
// closely (an exact path, a regex, a prefix at least as long: "/admin"
// is then served, not redirected), it returns that route and slash
// true: the answer is a redirect to the path with the slash.
func (t *Table[T]) Resolve(r *http.Request) (e *Entry[T], slash, found bool) {
	return t.resolve(&request{host: r.Host, path: r.URL.Path, method: r.Method, header: r.Header, rawQuery: r.URL.RawQuery, slash: true})
}

func (t *Table[T]) match(q *request) (*Entry[T], bool) {
	e, _, ok := t.resolve(q)
	return e, ok
}

// resolve walks the host groups: a group's close match is the answer; a
// weak one (a shorter prefix), or none, gives way to a redirect of that
// group or, failing one, of a later group.
func (t *Table[T]) resolve(q *request) (e *Entry[T], slash, found bool) {
	var redirect *Entry[T]
	try := func(g *group[T]) *Entry[T] {
		e, r := g.match(q)
		if r != nil && redirect == nil {
			redirect = r
		}
		if e != nil && (redirect == nil || !weak(e, q.path)) {
			return e
		}
		return nil
	}
	host := normalizeHost(q.host)
	if g, ok := t.exact[host]; ok {
		if e := try(g); e != nil {
			return e, false, true
		}
	}
	if redirect == nil {
		for _, w := range t.wild {
			if len(host) > len(w.suffix) && strings.HasSuffix(host, w.suffix) {
				if e := try(w.g); e != nil {
					return e, false, true
				}
			}
		}
	}
	if redirect == nil {
		if e := try(t.any); e != nil {
			return e, false, true
		}
	}
	if redirect != nil {
		return redirect, true, true
	}
	if t.def != nil {
		return t.def, false, true
	}
	return nil, false, false
}

// weak reports whether e matches path only as a shorter prefix: a
// redirect to the path with a slash serves the client better.
func weak[T any](e *Entry[T], path string) bool {
	k := e.Match.Path.Kind
	return (k == Prefix || k == StartsWith) && len(e.Match.Path.Value) < len(path)
}

// match returns the group's route for q and, when q asks for redirects
// and the route is none or weak, the group's SlashRedirect route for it.
func (g *group[T]) match(q *request) (*Entry[T], *Entry[T]) {
	e := g.route(q)
	if !q.slash || g.slashed == nil || e != nil && !weak(e, q.path) {
		return e, nil
	}
	for _, r := range g.slashed[q.path] {
		if r.Match.conditions(q) {
			return e, r
		}
	}
	return e, nil
}

func (g *group[T]) route(q *request) *Entry[T] {
	if g.exact != nil {
		for _, e := range g.exact[q.path] {
			if e.Match.conditions(q) {
				return e
			}
		}
	}
	var longest *Entry[T]
	for _, e := range g.prefixes {
		if e.Match.Path.matches(q.path) && e.Match.conditions(q) {
			longest = e
			break
		}
	}
	if longest != nil && longest.Match.Path.BeforeRegex {
		return longest
	}
	for _, e := range g.regexes {
		if e.Match.Path.Re.MatchString(q.path) && e.Match.conditions(q) {
			return e
		}
	}
	return longest
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

// NormalizeHost is the host as routes match it: lower case, without port,
// brackets or a trailing dot (nginx's $host).
func NormalizeHost(h string) string { return normalizeHost(h) }
