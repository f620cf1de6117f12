package kube

import (
	"fmt"
	"net/textproto"
	"regexp"
	"slices"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// lowerMatch is one HTTPRouteMatch as a sturdy match (docs/routing.md,
// "From Gateway API"); why says what sturdy cannot serve of it. The
// route table then ranks the routes as Gateway API does: exact path,
// the longest prefix, a method, more headers, more query parameters,
// then the order the translation writes them in.
func lowerMatch(m gwv1.HTTPRouteMatch) (rm config.RouteMatch, why string) {
	typ, value := gwv1.PathMatchPathPrefix, "/"
	if m.Path != nil {
		if m.Path.Type != nil {
			typ = *m.Path.Type
		}
		if m.Path.Value != nil {
			value = *m.Path.Value
		}
	}
	switch typ {
	case gwv1.PathMatchExact:
		rm.Path = &config.PathMatch{Exact: value}
	case gwv1.PathMatchPathPrefix:
		rm.Path = &config.PathMatch{Prefix: gatewayPrefix(value)}
	case gwv1.PathMatchRegularExpression:
		re, why := wholeRegex(value)
		if why != "" {
			return rm, "path " + why
		}
		rm.Path = &config.PathMatch{Regex: re}
	default:
		return rm, fmt.Sprintf("path match type %s is not supported", typ)
	}
	if typ != gwv1.PathMatchRegularExpression && !strings.HasPrefix(value, "/") {
		return rm, fmt.Sprintf("path %q does not start with /", value)
	}
	if m.Method != nil {
		rm.Methods = []string{string(*m.Method)}
	}
	// Gateway API: of several entries with an equivalent name, only the
	// first counts (header names ignore case, query names do not).
	seen := map[string]bool{}
	for _, h := range m.Headers {
		k := textproto.CanonicalMIMEHeaderKey(string(h.Name))
		if seen[k] {
			continue
		}
		seen[k] = true
		vm, why := valueMatch(string(h.Name), h.Type == nil || *h.Type == gwv1.HeaderMatchExact, h.Type != nil && *h.Type == gwv1.HeaderMatchRegularExpression, h.Value)
		if why != "" {
			return rm, "header " + why
		}
		rm.Headers = append(rm.Headers, vm)
	}
	seen = map[string]bool{}
	for _, q := range m.QueryParams {
		k := string(q.Name)
		if seen[k] {
			continue
		}
		seen[k] = true
		vm, why := valueMatch(k, q.Type == nil || *q.Type == gwv1.QueryParamMatchExact, q.Type != nil && *q.Type == gwv1.QueryParamMatchRegularExpression, q.Value)
		if why != "" {
			return rm, "query parameter " + why
		}
		rm.Query = append(rm.Query, vm)
	}
	return rm, ""
}

// gatewayPrefix is a PathPrefix value as a sturdy prefix: Gateway API
// ignores a trailing slash ("/foo/" matches "/foo"), sturdy's prefix
// ending in "/" would not.
func gatewayPrefix(v string) string {
	if v != "/" {
		v = strings.TrimRight(v, "/")
		if v == "" {
			v = "/"
		}
	}
	return v
}

// wholeRegex anchors a Gateway API regular expression so that it must
// match the whole value, as the common implementations do (sturdy's own
// regexes are found anywhere), and checks that RE2 takes it, so that a
// bad one drops its rule rather than failing the whole object's compile.
func wholeRegex(re string) (string, string) {
	if _, err := regexp.Compile(re); err != nil {
		return "", fmt.Sprintf("regular expression %q is not RE2 syntax: %v", re, err)
	}
	return "^(?:" + re + ")$", ""
}

func valueMatch(name string, exact, regex bool, value string) (config.ValueMatch, string) {
	vm := config.ValueMatch{Name: name}
	switch {
	case exact && value == "":
		vm.Regex = "^$"
	case exact:
		vm.Exact = value
	case regex:
		re, why := wholeRegex(value)
		if why != "" {
			return vm, name + ": " + why
		}
		vm.Regex = re
	default:
		return vm, name + ": the match type is not supported"
	}
	return vm, ""
}

// matchKey is what decides whether two routes on one listener and host
// are the same to the route table: their path condition and their
// other conditions, in a canonical order. A prefix ending in "/" is
// the route table's starts_with.
func matchKey(r *config.Route) (key string, coveredBy string) {
	kind, value := "prefix", r.Path
	if value == "" {
		value = "/"
	}
	var methods []string
	var hs, qs []string
	if m := r.Match; m != nil {
		if p := m.Path; p != nil {
			switch {
			case p.Exact != "":
				kind, value = "exact", p.Exact
			case p.StartsWith != "":
				kind, value = "starts_with", p.StartsWith
			case p.Regex != "":
				kind, value = "regex", p.Regex
				if p.CaseInsensitive {
					value = "(?i)" + value
				}
			default:
				value = p.Prefix
			}
			if p.BeforeRegex {
				kind += "^~"
			}
		}
		methods = slices.Sorted(slices.Values(m.Methods))
		for _, h := range m.Headers {
			hs = append(hs, textproto.CanonicalMIMEHeaderKey(h.Name)+"\x00"+valueKey(h))
		}
		for _, q := range m.Query {
			qs = append(qs, q.Name+"\x00"+valueKey(q))
		}
		slices.Sort(hs)
		slices.Sort(qs)
	}
	if kind == "prefix" && strings.HasSuffix(value, "/") {
		kind = "starts_with"
	}
	conds := "\x01" + strings.Join(methods, ",") + "\x01" + strings.Join(hs, "\x02") + "\x01" + strings.Join(qs, "\x02")
	key = kind + "\x00" + value + conds
	if kind == "prefix" {
		// A starts_with of the same characters matches all it does.
		coveredBy = "starts_with\x00" + value + conds
	}
	return key, coveredBy
}

func valueKey(v config.ValueMatch) string {
	switch {
	case v.Present != nil:
		return fmt.Sprint("present=", *v.Present)
	case v.Regex != "":
		return "regex=" + v.Regex
	}
	return "exact=" + v.Exact
}
