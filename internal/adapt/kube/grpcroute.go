package kube

import (
	"fmt"
	"net/textproto"
	"regexp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// grpcRoute translates a GRPCRoute as an HTTPRoute is translated: a gRPC
// call is an HTTP/2 POST to /service/method, so its matches become path
// and header matches, its header modifiers header rules and its backends
// h2c pools (docs/kubernetes.md).
func (t *translator) grpcRoute(r *gwv1.GRPCRoute, byGateway map[Ref][]*glistener) {
	ro := routeObj{kind: "GRPCRoute", obj: r, parents: r.Spec.ParentRefs, hostnames: r.Spec.Hostnames}
	st := t.route(ro, byGateway, len(r.Spec.Rules), func(i int) (rule, *metav1.Condition) {
		ru, c := t.grpcRule(ro, i, r.Spec.Rules[i])
		ru.name = ruleName(r.Spec.Rules[i].Name)
		return ru, c
	})
	if st != nil {
		t.res.GRPCRoutes[ro.ref()] = &gwv1.GRPCRouteStatus{RouteStatus: *st}
	}
}

// grpcRule translates one GRPCRoute rule. res is a ResolvedRefs=False
// condition when a backend could not be resolved.
func (t *translator) grpcRule(ro routeObj, i int, rs gwv1.GRPCRouteRule) (ru rule, res *metav1.Condition) {
	drop := func(why string) (rule, *metav1.Condition) { return rule{dropped: why}, nil }
	if rs.SessionPersistence != nil {
		return drop("sessionPersistence is not supported")
	}
	var f filters
	add := func(fl gwv1.GRPCRouteFilter) string {
		if fl.Type == gwv1.GRPCRouteFilterRequestMirror {
			// sturdy copies a request whose body it can hold, of a known
			// length; a gRPC call's has none, so no copy would be sent.
			return "RequestMirror is not supported on a GRPCRoute: sturdy mirrors requests of a known length, and gRPC calls carry none"
		}
		return f.add(httpFilter(fl))
	}
	for _, fl := range rs.Filters {
		if why := add(fl); why != "" {
			return drop(why)
		}
	}
	for _, br := range rs.BackendRefs {
		if len(br.Filters) == 0 {
			continue
		}
		if len(rs.BackendRefs) > 1 {
			return drop("filters on one of several backendRefs: sturdy applies header rules to a route, not to one backend of a split")
		}
		for _, fl := range br.Filters {
			if why := add(fl); why != "" {
				return drop(why)
			}
		}
	}
	matches := rs.Matches
	if len(matches) == 0 {
		matches = []gwv1.GRPCRouteMatch{{}}
	}
	for _, m := range matches {
		rm, why := lowerGRPCMatch(m)
		if why != "" {
			return drop(why)
		}
		ru.matches = append(ru.matches, rm)
	}
	tm := &ru.tmpl
	tm.ResponseHeaders, tm.RequestHeaders, tm.HostHeader = f.response, f.request, f.hostHeader
	own := fmt.Sprintf("%s/%d", ro.prefix(), i)
	if f.fail500 != "" {
		ru.unresolved(ro.kind, own, f.fail500)
		return ru, nil
	}
	refs := make([]gwv1.BackendRef, len(rs.BackendRefs))
	for j, br := range rs.BackendRefs {
		refs[j] = br.BackendRef
	}
	res, why := t.backends(ro, own, &ru, refs, nil)
	if why != "" {
		return drop(why)
	}
	return ru, res
}

// httpFilter is a GRPCRoute filter as the HTTPRoute filter of the same
// name: their settings are the same types.
func httpFilter(fl gwv1.GRPCRouteFilter) gwv1.HTTPRouteFilter {
	return gwv1.HTTPRouteFilter{
		Type:                   gwv1.HTTPRouteFilterType(fl.Type),
		RequestHeaderModifier:  fl.RequestHeaderModifier,
		ResponseHeaderModifier: fl.ResponseHeaderModifier,
		RequestMirror:          fl.RequestMirror,
		ExtensionRef:           fl.ExtensionRef,
	}
}

// grpcAny is one segment of a gRPC path, a service or a method.
const grpcAny = "[^/]+"

// lowerGRPCMatch is one GRPCRouteMatch as a sturdy match: a call is a
// request for /service/method. A service and method match exactly is an
// exact path, a service alone a prefix (whole segments: /pkg.Svc matches
// /pkg.Svc/Method, not /pkg.Svc2/Method), anything else an anchored
// regular expression.
func lowerGRPCMatch(m gwv1.GRPCRouteMatch) (rm config.RouteMatch, why string) {
	rm.Path = &config.PathMatch{Prefix: "/"}
	if mm := m.Method; mm != nil {
		svc, meth := "", ""
		if mm.Service != nil {
			svc = *mm.Service
		}
		if mm.Method != nil {
			meth = *mm.Method
		}
		typ := gwv1.GRPCMethodMatchExact
		if mm.Type != nil {
			typ = *mm.Type
		}
		switch {
		case svc == "" && meth == "":
			return rm, "a method match names neither a service nor a method"
		case typ == gwv1.GRPCMethodMatchExact:
			switch {
			case svc != "" && meth != "":
				rm.Path = &config.PathMatch{Exact: "/" + svc + "/" + meth}
			case svc != "":
				rm.Path = &config.PathMatch{Prefix: "/" + svc}
			default:
				rm.Path = &config.PathMatch{Regex: "^/" + grpcAny + "/" + regexp.QuoteMeta(meth) + "$"}
			}
		case typ == gwv1.GRPCMethodMatchRegularExpression:
			re := "^/"
			for _, part := range []struct{ what, v string }{{"service", svc}, {"method", meth}} {
				if part.v == "" {
					re += grpcAny
				} else {
					if _, err := regexp.Compile(part.v); err != nil {
						return rm, fmt.Sprintf("%s regular expression %q is not RE2 syntax: %v", part.what, part.v, err)
					}
					re += "(?:" + part.v + ")"
				}
				if part.what == "service" {
					re += "/"
				}
			}
			rm.Path = &config.PathMatch{Regex: re + "$"}
		default:
			return rm, fmt.Sprintf("method match type %s is not supported", typ)
		}
	}
	seen := map[string]bool{}
	for _, h := range m.Headers {
		k := textproto.CanonicalMIMEHeaderKey(string(h.Name))
		if seen[k] {
			continue // Gateway API: only the first of equivalent names counts
		}
		seen[k] = true
		exact := h.Type == nil || *h.Type == gwv1.GRPCHeaderMatchExact
		regex := h.Type != nil && *h.Type == gwv1.GRPCHeaderMatchRegularExpression
		vm, why := valueMatch(string(h.Name), exact, regex, h.Value)
		if why != "" {
			return rm, "header " + why
		}
		rm.Headers = append(rm.Headers, vm)
	}
	return rm, ""
}
