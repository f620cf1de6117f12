package kube

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sturdyproxy/sturdy/internal/config"
)

const gatewayGroup = gwv1.GroupName

// glistener is one Gateway listener as translated.
type glistener struct {
	gw     *gwv1.Gateway
	spec   gwv1.Listener
	port   *sport // nil when the listener is not usable
	kinds  []gwv1.RouteGroupKind
	status *gwv1.ListenerStatus
	claims []claim // the hosts each attached route took
}

// gateways translates every Gateway of this controller's classes and
// the HTTPRoutes and GRPCRoutes attached to them.
func (t *translator) gateways() {
	classes := map[string]bool{}
	for _, c := range t.in.Snap.GatewayClasses {
		if string(c.Spec.ControllerName) != t.k.ControllerName {
			continue
		}
		classes[c.Name] = true
		t.res.Generations[refOf("GatewayClass", c)] = c.Generation
		st := &gwv1.GatewayClassStatus{
			Conditions: []metav1.Condition{
				cond(string(gwv1.GatewayClassConditionStatusAccepted), true, string(gwv1.GatewayClassReasonAccepted), "sturdy serves the Gateways of this class", c.Generation),
				cond(string(gwv1.GatewayClassConditionStatusSupportedVersion), true, string(gwv1.GatewayClassReasonSupportedVersion), "", c.Generation),
			},
			SupportedFeatures: SupportedFeatures(),
		}
		if c.Spec.ParametersRef != nil {
			st.Conditions[0] = cond(string(gwv1.GatewayClassConditionStatusAccepted), false, string(gwv1.GatewayClassReasonInvalidParameters), "sturdy takes no parametersRef; its settings are in its config file", c.Generation)
			delete(classes, c.Name)
		}
		t.res.Classes[c.Name] = st
	}
	gws := slices.Clone(t.in.Snap.Gateways)
	slices.SortFunc(gws, func(a, b *gwv1.Gateway) int { return older(a, b) })
	byGateway := map[Ref][]*glistener{}
	for _, gw := range gws {
		if !classes[string(gw.Spec.GatewayClassName)] {
			continue
		}
		ref := refOf("Gateway", gw)
		t.res.Generations[ref] = gw.Generation
		byGateway[ref] = t.gateway(gw)
	}
	// Both kinds in one order, the oldest first: of an HTTPRoute and a
	// GRPCRoute sharing a host on a listener, the older one is accepted.
	type pending struct {
		obj  metav1.Object
		kind string
		run  func()
	}
	var routes []pending
	for _, r := range t.in.Snap.HTTPRoutes {
		routes = append(routes, pending{r, "HTTPRoute", func() { t.httpRoute(r, byGateway) }})
	}
	for _, r := range t.in.Snap.GRPCRoutes {
		routes = append(routes, pending{r, "GRPCRoute", func() { t.grpcRoute(r, byGateway) }})
	}
	slices.SortFunc(routes, func(a, b pending) int { return cmp.Or(older(a.obj, b.obj), cmp.Compare(a.kind, b.kind)) })
	for _, r := range routes {
		r.run()
	}
	for ref, ls := range byGateway {
		t.gatewayStatus(ref, ls)
	}
}

func (t *translator) gateway(gw *gwv1.Gateway) []*glistener {
	ref := refOf("Gateway", gw)
	var out []*glistener
	for _, l := range gw.Spec.Listeners {
		gl := &glistener{gw: gw, spec: l, status: &gwv1.ListenerStatus{Name: l.Name}}
		out = append(out, gl)
		gen := gw.Generation
		set := func(c metav1.Condition) { gl.status.Conditions = append(gl.status.Conditions, c) }
		kinds, kindsOK := routeKinds(l)
		gl.kinds = kinds
		gl.status.SupportedKinds = kinds
		why, bad := t.in.Exclude[ref]
		if len(gw.Spec.Addresses) > 0 {
			why, bad = "spec.addresses is not supported", true
		}
		if bad {
			set(cond("Accepted", false, string(gwv1.ListenerReasonUnsupportedValue), why, gen))
			set(cond("Programmed", false, string(gwv1.ListenerReasonInvalid), why, gen))
			continue
		}
		if l.Protocol != gwv1.HTTPProtocolType && l.Protocol != gwv1.HTTPSProtocolType {
			msg := fmt.Sprintf("protocol %s is not served; sturdy serves HTTP and HTTPS listeners", l.Protocol)
			set(cond("Accepted", false, string(gwv1.ListenerReasonUnsupportedProtocol), msg, gen))
			set(cond("Programmed", false, string(gwv1.ListenerReasonInvalid), msg, gen))
			set(cond("ResolvedRefs", true, string(gwv1.ListenerReasonResolvedRefs), "", gen))
			continue
		}
		p, same := t.port(l.Port, l.Protocol)
		host := ""
		if l.Hostname != nil {
			host = strings.ToLower(string(*l.Hostname))
		}
		if !same {
			msg := fmt.Sprintf("port %d is already an %s listener of another Gateway or of the Ingresses", l.Port, p.proto)
			set(cond("Conflicted", true, string(gwv1.ListenerReasonProtocolConflict), msg, gen))
			set(cond("Accepted", false, string(gwv1.ListenerReasonPortUnavailable), msg, gen))
			set(cond("Programmed", false, string(gwv1.ListenerReasonInvalid), msg, gen))
			set(cond("ResolvedRefs", true, string(gwv1.ListenerReasonResolvedRefs), "", gen))
			continue
		}
		if owner, dup := p.hostname[host]; dup && owner != ref {
			msg := fmt.Sprintf("port %d with hostname %q is already a listener of %s", l.Port, host, owner)
			set(cond("Conflicted", true, string(gwv1.ListenerReasonHostnameConflict), msg, gen))
			set(cond("Accepted", true, string(gwv1.ListenerReasonAccepted), "", gen))
			set(cond("Programmed", false, string(gwv1.ListenerReasonInvalid), msg, gen))
			set(cond("ResolvedRefs", true, string(gwv1.ListenerReasonResolvedRefs), "", gen))
			continue
		}
		p.hostname[host] = ref
		resolved, reason, msg := true, string(gwv1.ListenerReasonResolvedRefs), ""
		if !kindsOK {
			resolved, reason, msg = false, string(gwv1.ListenerReasonInvalidRouteKinds), "sturdy serves HTTPRoute and GRPCRoute only"
		}
		programmed := true
		if l.Protocol == gwv1.HTTPSProtocolType {
			n, why, r := t.listenerCerts(gw, l, p, host)
			if why != "" {
				resolved, reason, msg = false, r, why
			}
			if n == 0 {
				programmed = false
			}
		}
		set(cond("Accepted", true, string(gwv1.ListenerReasonAccepted), "", gen))
		set(cond("Conflicted", false, string(gwv1.ListenerReasonNoConflicts), "", gen))
		set(cond("ResolvedRefs", resolved, reason, msg, gen))
		if programmed {
			set(cond("Programmed", true, string(gwv1.ListenerReasonProgrammed), "", gen))
			gl.port = p
		} else {
			set(cond("Programmed", false, string(gwv1.ListenerReasonInvalid), "no usable certificate: "+msg, gen))
		}
	}
	return out
}

// routeKinds is what a listener's allowedRoutes.kinds leaves of the
// kinds sturdy serves, HTTPRoute and GRPCRoute; ok is false when a kind
// was named that it does not.
func routeKinds(l gwv1.Listener) ([]gwv1.RouteGroupKind, bool) {
	group := gwv1.Group(gatewayGroup)
	served := []gwv1.RouteGroupKind{{Group: &group, Kind: "HTTPRoute"}, {Group: &group, Kind: "GRPCRoute"}}
	if l.AllowedRoutes == nil || len(l.AllowedRoutes.Kinds) == 0 {
		return served, true
	}
	ok := true
	var out []gwv1.RouteGroupKind
	for _, k := range l.AllowedRoutes.Kinds {
		i := slices.IndexFunc(served, func(s gwv1.RouteGroupKind) bool { return s.Kind == k.Kind })
		switch {
		case i < 0 || (k.Group != nil && *k.Group != gatewayGroup):
			ok = false
		case !slices.ContainsFunc(out, func(o gwv1.RouteGroupKind) bool { return o.Kind == k.Kind }):
			out = append(out, served[i])
		}
	}
	return out, ok
}

// listenerCerts adds the certificates of an HTTPS listener to its port;
// n is how many were usable, why (with a listener reason) the first
// problem.
func (t *translator) listenerCerts(gw *gwv1.Gateway, l gwv1.Listener, p *sport, host string) (n int, why, reason string) {
	if l.TLS == nil || (l.TLS.Mode != nil && *l.TLS.Mode != gwv1.TLSModeTerminate) {
		return 0, "TLS passthrough is not supported; sturdy terminates TLS", string(gwv1.ListenerReasonInvalidCertificateRef)
	}
	for _, cr := range l.TLS.CertificateRefs {
		ns := gw.Namespace
		if cr.Namespace != nil {
			ns = string(*cr.Namespace)
		}
		if (cr.Group != nil && *cr.Group != "") || (cr.Kind != nil && *cr.Kind != "Secret") {
			why, reason = fmt.Sprintf("certificateRef %s is not a Secret", cr.Name), string(gwv1.ListenerReasonInvalidCertificateRef)
			continue
		}
		if !t.x.granted(gatewayGroup, "Gateway", gw.Namespace, "", "Secret", ns, string(cr.Name)) {
			why, reason = fmt.Sprintf("Secret %s/%s is in another namespace and no ReferenceGrant there allows it", ns, cr.Name), string(gwv1.ListenerReasonRefNotPermitted)
			continue
		}
		sref := Ref{Kind: "Secret", Namespace: ns, Name: string(cr.Name)}
		c, err := t.certificate(sref)
		if err != nil {
			why, reason = err.Error(), string(gwv1.ListenerReasonInvalidCertificateRef)
			continue
		}
		if host != "" {
			c.Names = []string{host}
		} else if !slices.ContainsFunc(p.certs, func(c config.Certificate) bool { return c.Default }) {
			c.Default = true
		}
		p.certs = append(p.certs, c)
		p.certFrom = append(p.certFrom, sref)
		n++
	}
	return n, why, reason
}

// certificate is a TLS Secret as an in-memory certificate; it is parsed
// here so that a bad Secret fails its listener, not the whole reload.
func (t *translator) certificate(ref Ref) (config.Certificate, error) {
	if why, bad := t.in.Exclude[ref]; bad {
		return config.Certificate{}, fmt.Errorf("%s: %s", ref, why)
	}
	s := t.x.secrets[ref]
	if s == nil {
		return config.Certificate{}, fmt.Errorf("%s does not exist", ref)
	}
	crt, key := s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
	if s.Type != corev1.SecretTypeTLS && (crt == nil || key == nil) {
		return config.Certificate{}, fmt.Errorf("%s is of type %s; expected kubernetes.io/tls with tls.crt and tls.key", ref, s.Type)
	}
	if _, err := tls.X509KeyPair(crt, key); err != nil {
		return config.Certificate{}, fmt.Errorf("%s holds no usable certificate and key: %v", ref, err)
	}
	name := "secret " + ref.Namespace + "/" + ref.Name
	return config.Certificate{Cert: name, Key: name, CertPEM: crt, KeyPEM: key}, nil
}

// allows reports whether a Gateway listener accepts routes of kind from
// the namespace ns.
func (t *translator) allows(gl *glistener, ns, kind string) bool {
	if !slices.ContainsFunc(gl.kinds, func(k gwv1.RouteGroupKind) bool { return string(k.Kind) == kind }) {
		return false
	}
	from := gwv1.NamespacesFromSame
	var sel *metav1.LabelSelector
	if ar := gl.spec.AllowedRoutes; ar != nil && ar.Namespaces != nil {
		if ar.Namespaces.From != nil {
			from = *ar.Namespaces.From
		}
		sel = ar.Namespaces.Selector
	}
	switch from {
	case gwv1.NamespacesFromAll:
		return true
	case gwv1.NamespacesFromSame:
		return ns == gl.gw.Namespace
	case gwv1.NamespacesFromSelector:
		s, err := metav1.LabelSelectorAsSelector(sel)
		n := t.x.namespaces[ns]
		return err == nil && sel != nil && n != nil && s.Matches(labels.Set(n.Labels))
	}
	return false
}

func (t *translator) gatewayStatus(ref Ref, ls []*glistener) {
	gw := ls0gw(ls)
	gen := t.res.Generations[ref]
	st := &gwv1.GatewayStatus{}
	valid, programmed := 0, 0
	for _, gl := range ls {
		st.Listeners = append(st.Listeners, *gl.status)
		if gl.port != nil {
			programmed++
		}
		if !slices.ContainsFunc(gl.status.Conditions, func(c metav1.Condition) bool {
			return c.Type == "Accepted" && c.Status == metav1.ConditionFalse
		}) {
			valid++
		}
	}
	switch {
	case gw != nil && len(gw.Spec.Addresses) > 0:
		st.Conditions = append(st.Conditions,
			cond("Accepted", false, string(gwv1.GatewayReasonUnsupportedAddress), "spec.addresses is not supported: the addresses are those of the Service in front of sturdy (kubernetes.publish_service)", gen),
			cond("Programmed", false, string(gwv1.GatewayReasonInvalid), "spec.addresses is not supported", gen))
	case valid < len(ls):
		st.Conditions = append(st.Conditions, cond("Accepted", valid > 0, string(gwv1.GatewayReasonListenersNotValid), "some listeners are not valid; see their conditions", gen))
	default:
		st.Conditions = append(st.Conditions, cond("Accepted", true, string(gwv1.GatewayReasonAccepted), "", gen))
	}
	if len(st.Conditions) == 1 {
		if programmed > 0 {
			st.Conditions = append(st.Conditions, cond("Programmed", true, string(gwv1.GatewayReasonProgrammed), "", gen))
		} else {
			st.Conditions = append(st.Conditions, cond("Programmed", false, string(gwv1.GatewayReasonInvalid), "no listener could be programmed", gen))
		}
	}
	t.res.Gateways[ref] = st
}

func ls0gw(ls []*glistener) *gwv1.Gateway {
	if len(ls) == 0 {
		return nil
	}
	return ls[0].gw
}
