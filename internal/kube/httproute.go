package kube

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// rule is one HTTPRoute rule as sturdy config can serve it.
type rule struct {
	paths    []string // one per match: path prefixes
	pool     *config.Pool
	poolName string
	redirect *config.RedirectHTTPS // the rule only redirects to HTTPS
	timeouts config.Timeouts
	dropped  string // why the rule is not served; "" when it is
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
			if ru.redirect != nil {
				if sp.proto == gwv1.HTTPProtocolType {
					sp.redirect = ru.redirect
					t.redirects = append(t.redirects, redirectClaim{sp, ref, i})
				}
				continue
			}
			sp.plain++
			for j, path := range ru.paths {
				rc := config.Route{
					Name:      fmt.Sprintf("httproute/%s/%s/%d/%d/%s", r.Namespace, r.Name, i, j, sp.name),
					Listeners: []string{sp.name},
					Path:      path,
					Pool:      ru.poolName,
					Timeouts:  ru.timeouts,
				}
				if !hosts.any {
					rc.Hosts = slices.Clone(hosts.names)
				}
				t.entries = append(t.entries, entry{origin: ref, obj: r, seq: i*1000 + j, route: rc, pool: ru.pool})
			}
		}
	}
}

// redirectClaim is a rule that asked for its HTTP listener to redirect
// to HTTPS.
type redirectClaim struct {
	port  *sport
	route Ref
	rule  int
}

// settleRedirects reports the HTTPS redirects that could not be served:
// today a redirect is a whole listener's, so one that shares its port
// with routes that serve is left out, and its route says so.
func (t *translator) settleRedirects() {
	for _, c := range t.redirects {
		if c.port.plain == 0 {
			continue
		}
		c.port.redirect = nil
		st := t.res.Routes[c.route]
		if st == nil {
			continue
		}
		msg := fmt.Sprintf("Dropped Rule(s) %d (a redirect to HTTPS of only some requests of port %d needs route-level redirects, not supported yet)", c.rule, c.port.number)
		for i := range st.Parents {
			st.Parents[i].Conditions = append(st.Parents[i].Conditions, cond(string(gwv1.RouteConditionPartiallyInvalid), true, string(gwv1.RouteReasonUnsupportedValue), msg, t.res.Generations[c.route]))
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

// rule translates one HTTPRoute rule. res is a ResolvedRefs=False
// condition when a backend could not be resolved.
func (t *translator) rule(r *gwv1.HTTPRoute, i int, rs gwv1.HTTPRouteRule) (rule, *metav1.Condition) {
	var ru rule
	if why := unsupportedRule(rs); why != "" {
		ru.dropped = why
		return ru, nil
	}
	if red, ok := httpsRedirect(rs); ok {
		ru.redirect = red
		return ru, nil
	}
	if len(rs.Filters) > 0 {
		ru.dropped = "filter " + string(rs.Filters[0].Type) + " is not supported yet"
		return ru, nil
	}
	matches := rs.Matches
	if len(matches) == 0 {
		matches = []gwv1.HTTPRouteMatch{{}}
	}
	for _, m := range matches {
		path, why := lowerMatch(m)
		if why != "" {
			ru.dropped = why
			return ru, nil
		}
		ru.paths = append(ru.paths, path)
	}
	if to := rs.Timeouts; to != nil && to.Request != nil {
		d, err := time.ParseDuration(string(*to.Request))
		if err != nil {
			ru.dropped = fmt.Sprintf("timeouts.request %q is not a duration", *to.Request)
			return ru, nil
		}
		ru.timeouts.Total = config.Duration(d)
	}
	var parts [][]config.Host
	var weights []int32
	var live []backend
	var res *metav1.Condition
	for _, br := range rs.BackendRefs {
		b, hosts, c := t.backendRef(r, br)
		if c != nil {
			if res == nil {
				res = c
			}
			continue
		}
		if b.weight > 0 {
			live = append(live, b)
			parts = append(parts, hosts)
			weights = append(weights, b.weight)
		}
	}
	own := fmt.Sprintf("httproute/%s/%s/%d", r.Namespace, r.Name, i)
	switch {
	case len(live) == 1 && res == nil:
		ru.poolName = t.servicePool(live[0], parts[0])
	case len(live) == 0:
		// Nothing to send to: the empty-pool chain answers 503.
		ru.pool = &config.Pool{Name: own, Discovered: true}
	default:
		ru.pool = &config.Pool{Name: own, Hosts: weighted(parts, weights), Discovered: true}
	}
	if ru.pool != nil {
		ru.poolName = ru.pool.Name
	}
	return ru, res
}

// unsupportedRule says which part of a rule today's config cannot serve.
func unsupportedRule(rs gwv1.HTTPRouteRule) string {
	switch {
	case rs.Retry != nil:
		return "retry is not supported yet; sturdy retries by its own policy"
	case rs.SessionPersistence != nil:
		return "sessionPersistence is not supported yet"
	case rs.Timeouts != nil && rs.Timeouts.BackendRequest != nil:
		return "timeouts.backendRequest is not supported yet"
	}
	for _, br := range rs.BackendRefs {
		if len(br.Filters) > 0 {
			return "filters on a backendRef are not supported yet"
		}
	}
	return ""
}

// lowerMatch is a match as a path prefix. Exact and regular-expression
// paths, headers, query parameters and methods need issue 15's matching.
func lowerMatch(m gwv1.HTTPRouteMatch) (string, string) {
	path := "/"
	if m.Path != nil {
		if m.Path.Type != nil && *m.Path.Type != gwv1.PathMatchPathPrefix {
			return "", "path match " + string(*m.Path.Type) + " is not supported yet"
		}
		if m.Path.Value != nil {
			path = *m.Path.Value
		}
	}
	switch {
	case len(m.Headers) > 0:
		return "", "header matches are not supported yet"
	case len(m.QueryParams) > 0:
		return "", "query parameter matches are not supported yet"
	case m.Method != nil:
		return "", "method matches are not supported yet"
	}
	return path, ""
}

// httpsRedirect recognises the one redirect today's config serves: a rule
// that sends every request of an HTTP listener to HTTPS, as a listener's
// redirect_https.
func httpsRedirect(rs gwv1.HTTPRouteRule) (*config.RedirectHTTPS, bool) {
	if len(rs.Filters) != 1 || rs.Filters[0].Type != gwv1.HTTPRouteFilterRequestRedirect || len(rs.BackendRefs) > 0 {
		return nil, false
	}
	f := rs.Filters[0].RequestRedirect
	if f == nil || f.Scheme == nil || *f.Scheme != "https" || f.Hostname != nil || f.Path != nil {
		return nil, false
	}
	for _, m := range rs.Matches {
		if p, why := lowerMatch(m); why != "" || p != "/" {
			return nil, false
		}
	}
	red := &config.RedirectHTTPS{Status: 302, Port: 443}
	if f.StatusCode != nil {
		red.Status = *f.StatusCode
	}
	if f.Port != nil {
		red.Port = int(*f.Port)
	}
	return red, true
}

// backendRef resolves one backendRef to a Service port and its ready
// endpoints; c is a ResolvedRefs=False condition when it cannot be.
func (t *translator) backendRef(r *gwv1.HTTPRoute, br gwv1.HTTPBackendRef) (backend, []config.Host, *metav1.Condition) {
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
	w := int32(1)
	if br.Weight != nil {
		w = *br.Weight
	}
	return backend{svc: sref, port: sp.Port, weight: w}, t.x.endpoints(sref, sp), nil
}
