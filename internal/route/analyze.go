package route

import (
	"slices"
	"strings"
)

// Shadow is a route that can never be chosen for one host pattern because
// another route ranks above it and matches every request it matches.
type Shadow[T any] struct {
	Entry *Entry[T]
	By    *Entry[T]
	Host  string // the host pattern; "" for routes with no hosts
}

// Shadows lists, per host pattern, the entries another entry hides. Only
// what can be decided exactly is reported: the same path condition (or a
// StartsWith that covers a Prefix of the same value), and conditions that
// imply the other's, at the same rank and earlier in the config. Two
// different regular expressions are never compared.
func (t *Table[T]) Shadows() []Shadow[T] {
	var out []Shadow[T]
	scan := func(host string, g *group[T]) {
		for _, es := range g.exact {
			out = appendShadows(out, host, es)
		}
		out = appendShadows(out, host, g.prefixes)
		out = appendShadows(out, host, g.regexes)
	}
	hosts := make([]string, 0, len(t.exact))
	for h := range t.exact {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	for _, h := range hosts {
		scan(h, t.exact[h])
	}
	for _, w := range t.wild {
		scan("*"+w.suffix, w.g)
	}
	scan("", t.any)
	return out
}

func appendShadows[T any](out []Shadow[T], host string, es []*Entry[T]) []Shadow[T] {
	for i, b := range es {
		for _, a := range es[:i] { // a ranks above b
			if hides(&a.Match, &b.Match) {
				out = append(out, Shadow[T]{Entry: b, By: a, Host: host})
				break
			}
		}
	}
	return out
}

// hides reports whether a, ranked above b, matches every request b does.
func hides(a, b *Match) bool {
	if a.rank() != b.rank() || !pathCovers(&a.Path, &b.Path) {
		return false
	}
	if len(a.Methods) > 0 {
		for _, m := range b.Methods {
			if !slices.Contains(a.Methods, m) {
				return false
			}
		}
	}
	for i := range a.Headers {
		h := &a.Headers[i]
		j := slices.IndexFunc(b.Headers, func(o Header) bool { return strings.EqualFold(o.Name, h.Name) })
		if j < 0 || !b.Headers[j].implies(&h.ValueMatch) {
			return false
		}
	}
	for i := range a.Query {
		q := &a.Query[i]
		j := slices.IndexFunc(b.Query, func(o Query) bool { return o.Name == q.Name })
		if j < 0 || !b.Query[j].implies(&q.ValueMatch) {
			return false
		}
	}
	return true
}

// pathCovers reports whether a's path condition accepts every path b's does.
func pathCovers(a, b *PathMatch) bool {
	if a.Value != b.Value {
		return false
	}
	ak, bk := a.Kind, b.Kind
	// A prefix ending in "/" matches characters: it is a StartsWith.
	if ak == Prefix && strings.HasSuffix(a.Value, "/") {
		ak = StartsWith
	}
	if bk == Prefix && strings.HasSuffix(b.Value, "/") {
		bk = StartsWith
	}
	switch {
	case ak == bk && ak == Regex:
		return a.Re.String() == b.Re.String()
	case ak == bk:
		return true
	}
	return ak == StartsWith && bk == Prefix
}
