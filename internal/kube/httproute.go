package kube

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// rule is one HTTPRoute rule as sturdy config serves it: one route per
// match, each with the rule's filters and backends.
type rule struct {
	matches []config.RouteMatch
	// tmpl is every route key of the rule but its name, listeners, hosts
	// and match.
	tmpl config.Route
	// pools are the rule's own pools; Service pools are shared.
	pools   []*config.Pool
	dropped string // why the rule is not served; "" when it is
}

// hostSet is the hosts a route is served for on one sturdy listener.
type hostSet struct {
	any   bool
	names []string
}

func (h *hostSet) add(names []string, any bool) {
	h.any = h.any || any
	for _, n := range names {
		if !slices.Contains(h.names, n) {
			h.names = append(h.names, n)
		}
	}
}

func (t *translator) httpRoute(r *gwv1.HTTPRoute, byGateway map[Ref][]*glistener) {
	ref := refOf("HTTPRoute", r)
	gen := r.Generation
	type parent struct {
		ref gwv1.ParentReference
		ls  []*glistener
	}
	var parents []parent
	for _, pr := range r.Spec.ParentRefs {
		if (pr.Group != nil && *pr.Group != gatewayGroup) || (pr.Kind != nil && *pr.Kind != "Gateway") {
			continue
		}
		ns := r.Namespace
		if pr.Namespace != nil {
			ns = string(*pr.Namespace)
		}
		if ls, ours := byGateway[Ref{Kind: "Gateway", Namespace: ns, Name: string(pr.Name)}]; ours {
			parents = append(parents, parent{pr, ls})
		}
	}
	if len(parents) == 0 {
		return // not attached to a Gateway of ours: its status is not ours to write
	}
	t.res.Generations[ref] = gen
	excluded, isExcluded := t.in.Exclude[ref]
	rules := make([]rule, len(r.Spec.Rules))
	resolved := cond("ResolvedRefs", true, string(gwv1.RouteReasonResolvedRefs), "", gen)
	var dropped []string
	for i, rs := range r.Spec.Rules {
		ru, res := t.rule(r, i, rs)
		rules[i] = ru
		if res != nil && resolved.Status == metav1.ConditionTrue {
			resolved = *res
		}
		if ru.dropped != "" {
			dropped = append(dropped, fmt.Sprintf("%d (%s)", i, ru.dropped))
		}
	}
	st := &gwv1.HTTPRouteStatus{}
	served := map[*sport]*hostSet{}
	for _, p := range parents {
		ps := gwv1.RouteParentStatus{ParentRef: p.ref, ControllerName: gwv1.GatewayController(t.k.ControllerName)}
		accepted := t.attach(r, p.ref, p.ls, served)
		switch {
		case isExcluded:
			accepted = cond("Accepted", false, string(gwv1.RouteReasonUnsupportedValue), excluded, gen)
		case accepted.Status == metav1.ConditionTrue && len(dropped) == len(rules) && len(rules) > 0:
			accepted = cond("Accepted", false, string(gwv1.RouteReasonUnsupportedValue), "no rule can be served: "+strings.Join(dropped, "; "), gen)
		}
		accepted.ObservedGeneration = gen
		ps.Conditions = append(ps.Conditions, accepted, resolved)
		if len(dropped) > 0 && len(dropped) < len(rules) {
			ps.Conditions = append(ps.Conditions, cond(string(gwv1.RouteConditionPartiallyInvalid), true, string(gwv1.RouteReasonUnsupportedValue), "Dropped Rule(s) "+strings.Join(dropped, "; "), gen))
		}
		st.Parents = append(st.Parents, ps)
	}
	t.res.Routes[ref] = st
	if isExcluded {
		return
	}
	for sp, hosts := range served {
		for i, ru := range rules {
			if ru.dropped != "" {
				continue
			}
			for j := range ru.matches {
				rc := ru.tmpl
				rc.Name = fmt.Sprintf("httproute/%s/%s/%d/%d/%s", r.Namespace, r.Name, i, j, sp.name)
				rc.Listeners = []string{sp.name}
				rc.Match = &ru.matches[j]
				if rd := rc.Redirect; rd != nil && rd.Scheme == "" && rd.Port == 0 {
					// Gateway API: without a scheme, the port is the Gateway
					// listener's, not the one sturdy binds behind it.
					c := *rd
					c.Port = int(sp.number)
					rc.Redirect = &c
				}
				if !hosts.any {
					rc.Hosts = slices.Clone(hosts.names)
				}
				t.entries = append(t.entries, entry{origin: ref, obj: r, seq: i*1000 + j, route: rc, pools: ru.pools})
			}
		}
	}
}

// attach finds the listeners of one parent that take the route, adds the
// hosts it is served for on each, and says whether it was accepted.
func (t *translator) attach(r *gwv1.HTTPRoute, pr gwv1.ParentReference, ls []*glistener, served map[*sport]*hostSet) metav1.Condition {
	gen := r.Generation
	var matching, allowed []*glistener
	for _, gl := range ls {
		if pr.SectionName != nil && *pr.SectionName != gl.spec.Name {
			continue
		}
		if pr.Port != nil && *pr.Port != gl.spec.Port {
			continue
		}
		matching = append(matching, gl)
		if t.allows(gl, r.Namespace) {
			allowed = append(allowed, gl)
		}
	}
	if len(matching) == 0 {
		return cond("Accepted", false, string(gwv1.RouteReasonNoMatchingParent), "no listener of the Gateway matches the parentRef's sectionName and port", gen)
	}
	if len(allowed) == 0 {
		return cond("Accepted", false, string(gwv1.RouteReasonNotAllowedByListeners), "the Gateway's listeners do not allow routes from this namespace", gen)
	}
	attached := false
	for _, gl := range allowed {
		lh := ""
		if gl.spec.Hostname != nil {
			lh = strings.ToLower(string(*gl.spec.Hostname))
		}
		names, any, ok := intersect(lh, r.Spec.Hostnames)
		if !ok {
			continue
		}
		attached = true
		gl.status.AttachedRoutes++
		if gl.port == nil {
			continue
		}
		hs := served[gl.port]
		if hs == nil {
			hs = &hostSet{}
			served[gl.port] = hs
		}
		hs.add(names, any)
	}
	if !attached {
		return cond("Accepted", false, string(gwv1.RouteReasonNoMatchingListenerHostname), "no hostname of the route matches a listener's hostname", gen)
	}
	return cond("Accepted", true, string(gwv1.RouteReasonAccepted), "", gen)
}

// intersect is the hosts a route is served for on a listener: the
// listener's hostname lh ("" for any) meets the route's hostnames (none
// for any). any is true when every host is served.
func intersect(lh string, hostnames []gwv1.Hostname) (names []string, any, ok bool) {
	if len(hostnames) == 0 {
		if lh == "" {
			return nil, true, true
		}
		return []string{lh}, false, true
	}
	for _, h := range hostnames {
		rh := strings.ToLower(string(h))
		if lh == "" {
			names = append(names, rh)
			continue
		}
		if n, ok := hostMeet(rh, lh); ok {
			names = append(names, n)
		}
	}
	return names, false, len(names) > 0
}

// hostMeet is the more specific of two host patterns when one covers the
// other ("*.example.com" covers "a.example.com" and "*.a.example.com").
func hostMeet(a, b string) (string, bool) {
	switch {
	case a == b:
		return a, true
	case covers(b, a):
		return a, true
	case covers(a, b):
		return b, true
	}
	return "", false
}

func covers(pattern, host string) bool {
	suffix, wild := strings.CutPrefix(pattern, "*")
	return wild && strings.HasSuffix(host, suffix) && len(host) > len(suffix)
}

// backendRef resolves one backendRef to a Service port and its ready
// endpoints; c is a ResolvedRefs=False condition when it cannot be.
func (t *translator) backendRef(r *gwv1.HTTPRoute, br gwv1.BackendObjectReference) (backend, []config.Host, *metav1.Condition) {
	gen := r.Generation
	fail := func(reason, format string, args ...any) (backend, []config.Host, *metav1.Condition) {
		c := cond("ResolvedRefs", false, reason, fmt.Sprintf(format, args...), gen)
		return backend{}, nil, &c
	}
	if (br.Group != nil && *br.Group != "" && *br.Group != "core") || (br.Kind != nil && *br.Kind != "Service") {
		return fail(string(gwv1.RouteReasonInvalidKind), "backendRef %s is not a Service", br.Name)
	}
	ns := r.Namespace
	if br.Namespace != nil {
		ns = string(*br.Namespace)
	}
	if !t.x.granted(gatewayGroup, "HTTPRoute", r.Namespace, "", "Service", ns, string(br.Name)) {
		return fail(string(gwv1.RouteReasonRefNotPermitted), "Service %s/%s is in another namespace and no ReferenceGrant there allows it", ns, br.Name)
	}
	sref := Ref{Kind: "Service", Namespace: ns, Name: string(br.Name)}
	svc := t.x.services[sref]
	if svc == nil {
		return fail(string(gwv1.RouteReasonBackendNotFound), "Service %s/%s does not exist", ns, br.Name)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return fail(string(gwv1.RouteReasonUnsupportedProtocol), "Service %s/%s is an ExternalName Service; sturdy routes to endpoints", ns, br.Name)
	}
	if br.Port == nil {
		return fail(string(gwv1.RouteReasonBackendNotFound), "backendRef %s names no port", br.Name)
	}
	sp, err := servicePort(svc, *br.Port, "")
	if err != nil {
		return fail(string(gwv1.RouteReasonBackendNotFound), "%v", err)
	}
	if ap := sp.AppProtocol; ap != nil && *ap != "http" && *ap != "kubernetes.io/http" {
		return fail(string(gwv1.RouteReasonUnsupportedProtocol), "Service %s/%s port %d has appProtocol %s; sturdy speaks HTTP/1.1 to backends", ns, br.Name, sp.Port, *ap)
	}
	return backend{svc: sref, port: sp.Port}, t.x.endpoints(sref, sp), nil
}
