package proxy

import (
	"net/http"

	"github.com/sturdyproxy/sturdy/internal/route/subst"
)

// HeaderRules change a header map: remove, then set, then add. Names are
// canonical. Rules without variables allocate nothing when applied, except
// add onto a header that is already there (its values grow).
type HeaderRules struct {
	Remove []string
	Set    []HeaderValue
	Add    []HeaderValue
}

// HeaderValue is one header and its value.
type HeaderValue struct {
	Name  string
	Value *subst.Template
	// static is the value of a template without variables, shared by
	// every request: len == cap, so that an append elsewhere copies.
	static []string
}

// NewHeaderValue makes a rule value.
func NewHeaderValue(name string, t *subst.Template) HeaderValue {
	hv := HeaderValue{Name: name, Value: t}
	if s, ok := t.Static(); ok {
		hv.static = []string{s}
		hv.static = hv.static[:1:1]
	}
	return hv
}

// Dynamic reports whether a value has variables: Apply needs Vars.
func (hr *HeaderRules) Dynamic() bool {
	for _, l := range [][]HeaderValue{hr.Set, hr.Add} {
		for i := range l {
			if l[i].static == nil {
				return true
			}
		}
	}
	return false
}

// Apply changes h; v may be nil when no value has variables.
func (hr *HeaderRules) Apply(h http.Header, v *subst.Vars) {
	for _, k := range hr.Remove {
		delete(h, k)
	}
	// A value whose variables expand to nothing sets no header, as nginx
	// passes no header whose value is empty ($cookie_session without the
	// cookie): set removes the header, add adds nothing.
	for i := range hr.Set {
		hv := &hr.Set[i]
		if hv.static != nil {
			h[hv.Name] = hv.static
		} else if val := hv.Value.Expand(v); val != "" {
			h[hv.Name] = []string{val}
		} else {
			delete(h, hv.Name)
		}
	}
	for i := range hr.Add {
		hv := &hr.Add[i]
		val := ""
		if hv.static != nil {
			val = hv.static[0]
		} else if val = hv.Value.Expand(v); val == "" {
			continue
		}
		prior := h[hv.Name]
		if len(prior) == 0 && hv.static != nil {
			h[hv.Name] = hv.static
			continue
		}
		if len(prior) == 0 {
			h[hv.Name] = []string{val}
			continue
		}
		h[hv.Name] = append(prior[:len(prior):len(prior)], val)
	}
}
