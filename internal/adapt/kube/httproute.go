package kube

import (
	"fmt"
	"slices"
	"strings"

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
	name    string // the rule's name, if it has one (status messages)
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

// routeObj is what attachment and status read of a route, whatever its
// kind.
type routeObj struct {
	kind      string // "HTTPRoute", "GRPCRoute"
	obj       metav1.Object
	parents   []gwv1.ParentReference
	hostnames []gwv1.Hostname
}

func (ro routeObj) ref() Ref { return refOf(ro.kind, ro.obj) }

// prefix starts the names of the route's sturdy routes and own pools
// ("httproute/NS/NAME").
func (ro routeObj) prefix() string {
	return strings.ToLower(ro.kind) + "/" + ro.obj.GetNamespace() + "/" + ro.obj.GetName()
}

func (t *translator) httpRoute(r *gwv1.HTTPRoute, byGateway map[Ref][]*glistener) {
	ro := routeObj{kind: "HTTPRoute", obj: r, parents: r.Spec.ParentRefs, hostnames: r.Spec.Hostnames}
	st := t.route(ro, byGateway, len(r.Spec.Rules), func(i int) (rule, *metav1.Condition) {
		ru, c := t.rule(ro, i, r.Spec.Rules[i])
		ru.name = ruleName(r.Spec.Rules[i].Name)
		return ru, c
	})
	if st != nil {
		t.res.Routes[ro.ref()] = &gwv1.HTTPRouteStatus{RouteStatus: *st}
	}
}

// route attaches a route of any kind to the listeners of sturdy's
// Gateways and writes one entry per match of each rule it serves; rule
// translates rule i. The status is nil when no parent of the route is a
// Gateway of sturdy's: that status is not sturdy's to write.
func (t *translator) route(ro routeObj, byGateway map[Ref][]*glistener, n int, translate func(i int) (rule, *metav1.Condition)) *gwv1.RouteStatus {
	ref := ro.ref()
	gen := ro.obj.GetGeneration()
	type parent struct {
		ref gwv1.ParentReference
		ls  []*glistener
	}
	var parents []parent
	for _, pr := range ro.parents {
		if (pr.Group != nil && *pr.Group != gatewayGroup) || (pr.Kind != nil && *pr.Kind != "Gateway") {
			continue
		}
		ns := ro.obj.GetNamespace()
		if pr.Namespace != nil {
			ns = string(*pr.Namespace)
		}
		if ls, ours := byGateway[Ref{Kind: "Gateway", Namespace: ns, Name: string(pr.Name)}]; ours {
			parents = append(parents, parent{pr, ls})
		}
	}
	if len(parents) == 0 {
		return nil
	}
	t.res.Generations[ref] = gen
	excluded, isExcluded := t.in.Exclude[ref]
	rules := make([]rule, n)
	resolved := cond("ResolvedRefs", true, string(gwv1.RouteReasonResolvedRefs), "", gen)
	var dropped []string
	for i := range n {
		ru, res := translate(i)
		rules[i] = ru
		if res != nil && resolved.Status == metav1.ConditionTrue {
			resolved = *res
		}
		if ru.dropped != "" {
			// A rule is named by its index, and by its name when it has one.
			dropped = append(dropped, strings.TrimSpace(fmt.Sprintf("%d %s", i, ru.name))+" ("+ru.dropped+")")
		}
	}
	st := &gwv1.RouteStatus{}
	served := map[*sport]*hostSet{}
	for _, p := range parents {
		ps := gwv1.RouteParentStatus{ParentRef: p.ref, ControllerName: gwv1.GatewayController(t.k.ControllerName)}
		accepted := t.attach(ro, p.ref, p.ls, served)
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
	if isExcluded {
		return st
	}
	for sp, hosts := range served {
		for i, ru := range rules {
			if ru.dropped != "" {
				continue
			}
			for j := range ru.matches {
				rc := ru.tmpl
				rc.Name = fmt.Sprintf("%s/%d/%d/%s", ro.prefix(), i, j, sp.name)
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
				t.entries = append(t.entries, entry{origin: ref, obj: ro.obj, seq: i*1000 + j, route: rc, pools: ru.pools})
			}
		}
	}
	return st
}

// attach finds the listeners of one parent that take the route, adds the
// hosts it is served for on each, and says whether it was accepted.
func (t *translator) attach(ro routeObj, pr gwv1.ParentReference, ls []*glistener, served map[*sport]*hostSet) metav1.Condition {
	gen := ro.obj.GetGeneration()
	var matching, allowed []*glistener
	for _, gl := range ls {
		if pr.SectionName != nil && *pr.SectionName != gl.spec.Name {
			continue
		}
		if pr.Port != nil && *pr.Port != gl.spec.Port {
			continue
		}
		matching = append(matching, gl)
		if t.allows(gl, ro.obj.GetNamespace(), ro.kind) {
			allowed = append(allowed, gl)
		}
	}
	if len(matching) == 0 {
		return cond("Accepted", false, string(gwv1.RouteReasonNoMatchingParent), "no listener of the Gateway matches the parentRef's sectionName and port", gen)
	}
	if len(allowed) == 0 {
		return cond("Accepted", false, string(gwv1.RouteReasonNotAllowedByListeners), "the Gateway's listeners do not allow "+ro.kind+"s from this namespace", gen)
	}
	attached := false
	var conflict *claim
	var down *glistener
	for _, gl := range allowed {
		lh := ""
		if gl.spec.Hostname != nil {
			lh = strings.ToLower(string(*gl.spec.Hostname))
		}
		names, any, ok := intersect(lh, ro.hostnames)
		if !ok {
			continue
		}
		if gl.down != "" {
			down = gl
			continue
		}
		if c := gl.conflict(ro.kind, names, any); c != nil {
			conflict = c
			continue
		}
		gl.claims = append(gl.claims, claim{kind: ro.kind, route: ro.ref(), names: names, any: any})
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
	if !attached && conflict != nil {
		// Gateway API: of an HTTPRoute and a GRPCRoute with hostnames in
		// common on one listener, exactly one is accepted, the older.
		return cond("Accepted", false, string(gwv1.RouteReasonNotAllowedByListeners), fmt.Sprintf("the older %s has hostnames in common with this route on every listener it could attach to; Gateway API accepts only one of the two kinds there", conflict.route), gen)
	}
	if !attached && down != nil {
		// Counted nowhere and accepted by no one: requests for it would
		// find no listener.
		return cond("Accepted", false, string(gwv1.RouteReasonNoMatchingParent), fmt.Sprintf("listener %s of the Gateway serves nothing: %s", down.spec.Name, down.down), gen)
	}
	if !attached {
		return cond("Accepted", false, string(gwv1.RouteReasonNoMatchingListenerHostname), "no hostname of the route matches a listener's hostname", gen)
	}
	return cond("Accepted", true, string(gwv1.RouteReasonAccepted), "", gen)
}

// claim is the hosts a route took on a listener.
type claim struct {
	kind  string
	route Ref
	names []string
	any   bool
}

// conflict is the claim of a route of the other kind (an HTTPRoute for
// a GRPCRoute, and back) that shares a host with names on the listener.
func (gl *glistener) conflict(kind string, names []string, any bool) *claim {
	for i := range gl.claims {
		c := &gl.claims[i]
		if c.kind == kind {
			continue
		}
		if c.any || any {
			return c
		}
		for _, a := range names {
			for _, b := range c.names {
				if _, ok := hostMeet(a, b); ok {
					return c
				}
			}
		}
	}
	return nil
}

func ruleName(n *gwv1.SectionName) string {
	if n == nil {
		return ""
	}
	return string(*n)
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
