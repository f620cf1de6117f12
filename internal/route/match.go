package route

import (
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// PathKind is how a route matches the path.
type PathKind uint8

// Path kinds.
const (
	Prefix     PathKind = iota // whole segments: Gateway API's PathPrefix
	Exact                      // the path exactly: nginx "location =", Gateway API's Exact
	StartsWith                 // characters: an nginx prefix location
	Regex                      // an RE2 expression, unanchored unless it says ^ or $
)

func (k PathKind) String() string {
	return [...]string{"prefix", "exact", "starts_with", "regex"}[k]
}

// PathMatch is a route's path condition.
type PathMatch struct {
	Kind PathKind
	// Value is the path or prefix; for Regex, the expression as written.
	Value string
	// Re is the compiled expression of a Regex (with "(?i)" when the route
	// matches case-insensitively).
	Re *regexp.Regexp
	// BeforeRegex makes a prefix, when it is the longest that matches,
	// win over regular expressions (nginx's "location ^~").
	BeforeRegex bool
}

func (p *PathMatch) matches(path string) bool {
	switch p.Kind {
	case Exact:
		return path == p.Value
	case Regex:
		return p.Re.MatchString(path)
	case StartsWith:
		return strings.HasPrefix(path, p.Value)
	}
	return PrefixMatches(p.Value, path)
}

// PrefixMatches reports whether a Prefix matches path by whole segments.
func PrefixMatches(prefix, path string) bool {
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	return len(path) == len(prefix) || prefix[len(prefix)-1] == '/' || path[len(prefix)] == '/'
}

// ValueKind is how a header or query condition matches.
type ValueKind uint8

// Value kinds.
const (
	ValueExact   ValueKind = iota // the value exactly (case-sensitive)
	ValueRegex                    // an RE2 expression, unanchored unless it says ^ or $
	ValuePresent                  // the field is there, whatever its value
	ValueAbsent                   // the field is not there
)

// ValueMatch is one condition on a value.
type ValueMatch struct {
	Kind  ValueKind
	Value string
	Re    *regexp.Regexp
}

// Matches reports whether a field with values vv (nil: not sent) matches.
// Several values are matched joined by ",", as one field (RFC 9110 5.3).
func (m *ValueMatch) Matches(vv []string) bool {
	switch m.Kind {
	case ValuePresent:
		return len(vv) > 0
	case ValueAbsent:
		return len(vv) == 0
	}
	if len(vv) == 0 {
		return false
	}
	v := vv[0]
	if len(vv) > 1 {
		v = strings.Join(vv, ",")
	}
	return m.MatchString(v)
}

// MatchString reports whether one present value matches.
func (m *ValueMatch) MatchString(v string) bool {
	switch m.Kind {
	case ValueExact:
		return v == m.Value
	case ValueRegex:
		return m.Re.MatchString(v)
	case ValueAbsent:
		return false
	}
	return true
}

// implies reports whether every value m accepts, o accepts too.
func (m *ValueMatch) implies(o *ValueMatch) bool {
	switch {
	case o.Kind == ValuePresent:
		return m.Kind != ValueAbsent
	case m.Kind != o.Kind:
		return false
	case m.Kind == ValueRegex:
		return m.Re.String() == o.Re.String()
	}
	return m.Value == o.Value
}

// Header is a condition on a request header; Name is in canonical form.
type Header struct {
	Name string
	ValueMatch
}

// Query is a condition on a query parameter: its first value, decoded.
type Query struct {
	Name string
	ValueMatch
}

// Match is everything a route asks of a request besides its host.
type Match struct {
	Path    PathMatch
	Methods []string // upper case; empty means any method
	Headers []Header
	Query   []Query
}

// rank is what orders routes equal on path: Gateway API's order.
type rank struct{ method, headers, query int }

func (m *Match) rank() rank {
	r := rank{headers: len(m.Headers), query: len(m.Query)}
	if len(m.Methods) > 0 {
		r.method = 1
	}
	return r
}

func (a rank) compare(b rank) int {
	switch {
	case a.method != b.method:
		return a.method - b.method
	case a.headers != b.headers:
		return a.headers - b.headers
	}
	return a.query - b.query
}

// request is what matching reads of a request.
type request struct {
	host, path, method string
	header             http.Header
	rawQuery           string
	slash              bool // look for a SlashRedirect route (Resolve)
}

func (m *Match) conditions(q *request) bool {
	if len(m.Methods) > 0 && !slices.Contains(m.Methods, q.method) {
		return false
	}
	for i := range m.Headers {
		h := &m.Headers[i]
		if !h.Matches(q.header[h.Name]) {
			return false
		}
	}
	for i := range m.Query {
		c := &m.Query[i]
		v, ok := QueryValue(q.rawQuery, c.Name)
		switch {
		case c.Kind == ValueAbsent:
			if ok {
				return false
			}
		case !ok || !c.MatchString(v):
			return false
		}
	}
	return true
}

// QueryValue returns the first value of parameter name in a raw query,
// decoded, and whether the parameter is there. It allocates only when the
// query is percent- or plus-encoded.
func QueryValue(raw, name string) (string, bool) {
	for raw != "" {
		var kv string
		kv, raw, _ = strings.Cut(raw, "&")
		k, v, _ := strings.Cut(kv, "=")
		if k != name {
			if !strings.ContainsAny(k, "%+") {
				continue
			}
			if dk, err := url.QueryUnescape(k); err != nil || dk != name {
				continue
			}
		}
		if strings.ContainsAny(v, "%+") {
			if dv, err := url.QueryUnescape(v); err == nil {
				return dv, true
			}
		}
		return v, true
	}
	return "", false
}
