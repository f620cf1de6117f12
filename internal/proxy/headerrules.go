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

func (hv *HeaderValue) values(v *subst.Vars) []string {
	if hv.static != nil {
		return hv.static
	}
	return []string{hv.Value.Expand(v)}
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
	for i := range hr.Set {
		hv := &hr.Set[i]
		h[hv.Name] = hv.values(v)
	}
	for i := range hr.Add {
		hv := &hr.Add[i]
		prior := h[hv.Name]
		if len(prior) == 0 {
			h[hv.Name] = hv.values(v)
			continue
		}
		val := ""
		if hv.static != nil {
			val = hv.static[0]
		} else {
			val = hv.Value.Expand(v)
		}
		h[hv.Name] = append(prior[:len(prior):len(prior)], val)
	}
}
