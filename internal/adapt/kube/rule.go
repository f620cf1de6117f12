package kube

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// rule translates one HTTPRoute rule. res is a ResolvedRefs=False
// condition when a backend could not be resolved.
func (t *translator) rule(ro routeObj, i int, rs gwv1.HTTPRouteRule) (ru rule, res *metav1.Condition) {
	drop := func(why string) (rule, *metav1.Condition) { return rule{dropped: why}, nil }
	if why := unsupportedRule(rs); why != "" {
		return drop(why)
	}
	var f filters
	for _, fl := range rs.Filters {
		if why := f.add(fl); why != "" {
			return drop(why)
		}
	}
	// A backendRef's filters are the rule's when it is the only one;
	// sturdy has no header rules per backend of a split.
	for _, br := range rs.BackendRefs {
		if len(br.Filters) == 0 {
			continue
		}
		if len(rs.BackendRefs) > 1 {
			return drop("filters on one of several backendRefs: sturdy applies header rules to a route, not to one backend of a split")
		}
		for _, fl := range br.Filters {
			if why := f.add(fl); why != "" {
				return drop(why)
			}
		}
	}
	matches := rs.Matches
	if len(matches) == 0 {
		matches = []gwv1.HTTPRouteMatch{{}}
	}
	prefixReplaced := f.redirect != nil && f.redirect.Prefix != nil || f.rewrite != nil && f.rewrite.Prefix != nil
	for _, m := range matches {
		rm, why := lowerMatch(m)
		if why != "" {
			return drop(why)
		}
		if prefixReplaced && rm.Path.Prefix == "" {
			return drop("ReplacePrefixMatch with a match that is not a PathPrefix")
		}
		ru.matches = append(ru.matches, rm)
	}
	tm := &ru.tmpl
	tm.ResponseHeaders = f.response
	own := fmt.Sprintf("%s/%d", ro.prefix(), i)
	if f.fail500 != "" {
		// Before a redirect too: the filter may not be skipped.
		ru.unresolved(ro.kind, own, f.fail500)
		return ru, nil
	}
	if f.redirect != nil {
		if f.rewrite != nil {
			return drop("RequestRedirect and URLRewrite on one rule")
		}
		// The redirect is the answer: backendRefs and request rules are
		// never used.
		tm.Redirect = f.redirect
		return ru, nil
	}
	tm.RequestHeaders, tm.HostHeader, tm.Rewrite = f.request, f.hostHeader, f.rewrite
	if to := rs.Timeouts; to != nil && to.Request != nil {
		d, err := time.ParseDuration(string(*to.Request))
		if err != nil {
			return drop(fmt.Sprintf("timeouts.request %q is not a duration", *to.Request))
		}
		if d > 0 {
			tm.Timeouts.Total = config.Duration(d)
			tm.Timeouts.Connect = config.Duration(min(d, config.DefaultConnectTimeout))
		}
	}
	refs := make([]gwv1.BackendRef, len(rs.BackendRefs))
	for j, br := range rs.BackendRefs {
		refs[j] = br.BackendRef
	}
	res, why := t.backends(ro, own, &ru, refs, f.mirror)
	if why != "" {
		return drop(why)
	}
	return ru, res
}

// unresolved makes every answer of the rule an error, because nothing
// it names can serve: Gateway API answers an invalid backendRef with
// 500. An HTTPRoute's rule answers a fixed 500 that says why, with no
// Retry-After and no empty pool behind it: waiting resolves nothing,
// the route's status does. A GRPCRoute's answers UNAVAILABLE, sturdy's
// sorry page of a gRPC call, through an empty pool.
func (ru *rule) unresolved(kind, own, why string) {
	if kind != "HTTPRoute" {
		ru.fail(kind, own, why)
		return
	}
	tm := &ru.tmpl
	tm.Pool, tm.Backends, tm.Mirror, tm.Rewrite, tm.RequestHeaders, tm.HostHeader = "", nil, nil, nil, nil, ""
	tm.Respond = &config.Respond{Status: http.StatusInternalServerError, Body: "500 Internal Server Error: unresolved backend: " + why + ".\n"}
}

// fail sends the unresolved share of a rule to a pool without hosts: an
// HTTPRoute's answers the fixed 500 of an unresolved pool (the others'
// share goes on as it would); a GRPCRoute's is an empty pool whose sorry
// page is a 500, UNAVAILABLE for a gRPC call.
func (ru *rule) fail(kind, own, why string) {
	p := &config.Pool{Name: own + "/unresolved", Discovered: true}
	if kind == "HTTPRoute" {
		p.Unresolved = why
	}
	ru.pools = append(ru.pools, p)
	tm := &ru.tmpl
	tm.Sorry.Status = http.StatusInternalServerError
	if tm.Pool == "" && tm.Backends == nil {
		tm.Pool = p.Name
	}
}

// backends writes a rule's weighted backendRefs and its mirror into its
// route template; res is the first backendRef that did not resolve, why
// says what sturdy cannot serve.
func (t *translator) backends(ro routeObj, own string, ru *rule, refs []gwv1.BackendRef, mirror *gwv1.HTTPRequestMirrorFilter) (res *metav1.Condition, why string) {
	tm := &ru.tmpl
	var shares []config.Backend
	unresolved := 0
	for _, br := range refs {
		w := 1
		if br.Weight != nil {
			w = int(*br.Weight)
		}
		b, hosts, c := t.backendRef(ro, br.BackendObjectReference)
		if c != nil {
			if res == nil {
				res = c
			}
			unresolved += w
			continue
		}
		if w == 0 {
			continue
		}
		name := t.servicePool(b, hosts)
		if j := slices.IndexFunc(shares, func(s config.Backend) bool { return s.Pool == name }); j >= 0 {
			shares[j].Weight = min(shares[j].Weight+w, config.MaxBackendWeight)
		} else {
			shares = append(shares, config.Backend{Pool: name, Weight: w})
		}
	}
	switch {
	case len(shares) == 1 && unresolved == 0:
		tm.Pool = shares[0].Pool
	case len(shares) == 0:
		why := "the rule has no backendRefs"
		switch {
		case res != nil:
			why = res.Message
		case len(refs) > 0:
			why = "every backendRef of the rule has weight 0"
		}
		ru.unresolved(ro.kind, own, why)
		return res, ""
	default:
		tm.Backends = shares
		if unresolved > 0 {
			ru.fail(ro.kind, own, res.Message)
			tm.Backends = append(tm.Backends, config.Backend{Pool: own + "/unresolved", Weight: min(unresolved, config.MaxBackendWeight)})
		}
	}
	if m := mirror; m != nil {
		b, hosts, c := t.backendRef(ro, m.BackendRef)
		if c != nil {
			// The copies go nowhere; the answers are the same.
			if res == nil {
				res = c
			}
			return res, ""
		}
		name := t.servicePool(b, hosts)
		if tm.Pool == name || slices.ContainsFunc(tm.Backends, func(s config.Backend) bool { return s.Pool == name }) {
			return nil, "RequestMirror to a Service the rule also sends to: the copies would load it twice and count in its health"
		}
		mc := &config.Mirror{Pool: name}
		switch {
		case m.Percent != nil:
			mc.Share = config.Share{Num: uint64(min(max(*m.Percent, 0), 100)), Den: 100}
		case m.Fraction != nil:
			den := int32(100)
			if m.Fraction.Denominator != nil {
				den = *m.Fraction.Denominator
			}
			if den <= 0 || m.Fraction.Numerator < 0 || m.Fraction.Numerator > den {
				return nil, fmt.Sprintf("RequestMirror fraction %d/%d is not a share", m.Fraction.Numerator, den)
			}
			mc.Share = config.Share{Num: uint64(m.Fraction.Numerator), Den: uint64(den)}
		}
		tm.Mirror = mc
	}
	return res, ""
}

// unsupportedRule says which part of a rule sturdy cannot serve.
func unsupportedRule(rs gwv1.HTTPRouteRule) string {
	switch {
	case rs.Retry != nil:
		return "retry is not supported; sturdy retries by its own policy"
	case rs.SessionPersistence != nil:
		return "sessionPersistence is not supported"
	case rs.Timeouts != nil && rs.Timeouts.BackendRequest != nil:
		return "timeouts.backendRequest is not supported"
	}
	return ""
}
