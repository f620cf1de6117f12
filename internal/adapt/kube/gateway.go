package kube

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"net/netip"
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
	// down says why the listener takes no route (refused, conflicted):
	// a route that could attach only there is not accepted, since
	// nothing serves it. An HTTPS listener without a usable certificate
	// is not down: its routes attach, as Gateway API counts them, and
	// its own conditions say why it is not programmed.
	down string
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
	gws = slices.DeleteFunc(gws, func(gw *gwv1.Gateway) bool { return !classes[string(gw.Spec.GatewayClassName)] })
	t.assign(gws)
	byGateway := map[Ref][]*glistener{}
	for _, gw := range gws {
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
		own, pooled := t.addrs[ref]
		if len(gw.Spec.Addresses) > 0 && !t.pooled {
			why, bad = "spec.addresses is not supported without kubernetes.gateway_addresses", true
		}
		if na, none := t.noAddr[ref]; none && !bad {
			gl.down = "the Gateway has no address: " + na.msg
			set(cond("Accepted", !na.unsupported, string(gwv1.ListenerReasonAccepted), "", gen))
			set(cond("Programmed", false, string(gwv1.ListenerReasonPending), gl.down, gen))
			set(cond("ResolvedRefs", true, string(gwv1.ListenerReasonResolvedRefs), "", gen))
			continue
		}
		if bad {
			gl.down = why
			set(cond("Accepted", false, string(gwv1.ListenerReasonUnsupportedValue), why, gen))
			set(cond("Programmed", false, string(gwv1.ListenerReasonInvalid), why, gen))
			continue
		}
		if l.Protocol != gwv1.HTTPProtocolType && l.Protocol != gwv1.HTTPSProtocolType {
			msg := fmt.Sprintf("protocol %s is not served; sturdy serves HTTP and HTTPS listeners", l.Protocol)
			gl.down = msg
			// No route kind attaches to a protocol nothing serves.
			gl.kinds, gl.status.SupportedKinds = nil, []gwv1.RouteGroupKind{}
			set(cond("Accepted", false, string(gwv1.ListenerReasonUnsupportedProtocol), msg, gen))
			set(cond("Programmed", false, string(gwv1.ListenerReasonInvalid), msg, gen))
			set(cond("ResolvedRefs", true, string(gwv1.ListenerReasonResolvedRefs), "", gen))
			continue
		}
		if !pooled {
			own = ""
		}
		p, same := t.port(own, ref, int32(l.Port), l.Protocol)
		host := ""
		if l.Hostname != nil {
			host = strings.ToLower(string(*l.Hostname))
		}
		if !same {
			msg := fmt.Sprintf("port %d is already an %s listener of another Gateway or of the Ingresses", l.Port, p.proto)
			gl.down = msg
			set(cond("Conflicted", true, string(gwv1.ListenerReasonProtocolConflict), msg, gen))
			set(cond("Accepted", false, string(gwv1.ListenerReasonPortUnavailable), msg, gen))
			set(cond("Programmed", false, string(gwv1.ListenerReasonInvalid), msg, gen))
			set(cond("ResolvedRefs", true, string(gwv1.ListenerReasonResolvedRefs), "", gen))
			continue
		}
		if owner, dup := p.hostname[host]; dup && owner != ref {
			msg := fmt.Sprintf("port %d with hostname %q is already a listener of %s", l.Port, host, owner)
			gl.down = msg
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
		// Only TLS Secrets are watched (watch.go): one of another type is
		// not seen at all.
		return config.Certificate{}, fmt.Errorf("%s does not exist, or is not of type kubernetes.io/tls (sturdy reads only those)", ref)
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
	na, none := t.noAddr[ref]
	if a, ok := t.addrs[ref]; ok {
		st.Addresses = []gwv1.GatewayStatusAddress{{Type: ptrTo(gwv1.IPAddressType), Value: a}}
	}
	switch {
	case gw != nil && len(gw.Spec.Addresses) > 0 && !t.pooled:
		st.Conditions = append(st.Conditions,
			cond("Accepted", false, string(gwv1.GatewayReasonUnsupportedAddress), "spec.addresses is not supported without kubernetes.gateway_addresses: the addresses are those of the Service in front of sturdy (kubernetes.publish_service)", gen),
			cond("Programmed", false, string(gwv1.GatewayReasonInvalid), "spec.addresses is not supported", gen))
	case none && na.unsupported:
		st.Conditions = append(st.Conditions,
			cond("Accepted", false, string(gwv1.GatewayReasonUnsupportedAddress), na.msg, gen),
			cond("Programmed", false, na.reason, na.msg, gen))
	case none:
		st.Conditions = append(st.Conditions,
			cond("Accepted", true, string(gwv1.GatewayReasonAccepted), "", gen),
			cond("Programmed", false, na.reason, na.msg, gen))
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

// noAddress is why a Gateway got no address of gateway_addresses.
type noAddress struct {
	reason      string // the Gateway's Programmed reason
	msg         string
	unsupported bool // spec.addresses asks for what sturdy never gives
}

// assign gives each Gateway (gws, oldest first) its own address from
// kubernetes.gateway_addresses: the one its spec.addresses asks for,
// else the one its status already says, so that an address never moves
// while its Gateway lives, whatever other Gateways come and go (every
// replica reads the same status, and comes to the same answer), else
// the lowest free one.
func (t *translator) assign(gws []*gwv1.Gateway) {
	t.addrs, t.noAddr = map[Ref]string{}, map[Ref]noAddress{}
	pool := t.k.GatewayPool()
	t.pooled = len(pool) > 0
	if !t.pooled {
		return
	}
	in := map[string]bool{}
	for _, a := range pool {
		in[a.String()] = true
	}
	taken := map[string]Ref{}
	claim := func(ref Ref, a string) bool {
		if _, dup := taken[a]; dup || !in[a] {
			return false
		}
		taken[a] = ref
		t.addrs[ref] = a
		return true
	}
	wants := map[Ref]string{}
	var rest []*gwv1.Gateway
	for _, gw := range gws {
		ref := refOf("Gateway", gw)
		want, na := requested(gw, in)
		if na != nil {
			t.noAddr[ref] = *na
			continue
		}
		wants[ref] = want
		had := ""
		for _, a := range gw.Status.Addresses {
			if v := canonIP(a.Value); (a.Type == nil || *a.Type == gwv1.IPAddressType) && in[v] {
				had = v
				break
			}
		}
		if had != "" && (want == "" || want == had) && claim(ref, had) {
			continue
		}
		rest = append(rest, gw)
	}
	for _, gw := range rest {
		ref := refOf("Gateway", gw)
		if want := wants[ref]; want != "" && !claim(ref, want) {
			t.noAddr[ref] = noAddress{reason: string(gwv1.GatewayReasonAddressNotUsable), msg: fmt.Sprintf("spec.addresses asks for %s, which %s already has", want, taken[want])}
		}
	}
	next := 0
	for _, gw := range rest {
		ref := refOf("Gateway", gw)
		if wants[ref] != "" {
			continue
		}
		for ; next < len(pool) && !claim(ref, pool[next].String()); next++ {
		}
		if _, ok := t.addrs[ref]; !ok {
			t.noAddr[ref] = noAddress{reason: string(gwv1.GatewayReasonAddressNotAssigned), msg: fmt.Sprintf("every one of the %d addresses of kubernetes.gateway_addresses is another Gateway's; add more", len(pool))}
		}
	}
}

// requested is the address a Gateway's spec.addresses asks for ("" for
// any), or why sturdy cannot give it.
func requested(gw *gwv1.Gateway, in map[string]bool) (string, *noAddress) {
	as := gw.Spec.Addresses
	switch {
	case len(as) == 0:
		return "", nil
	case len(as) > 1:
		return "", &noAddress{reason: string(gwv1.GatewayReasonAddressNotUsable), msg: fmt.Sprintf("spec.addresses asks for %d addresses; sturdy gives a Gateway one", len(as)), unsupported: true}
	case as[0].Type != nil && *as[0].Type != gwv1.IPAddressType:
		return "", &noAddress{reason: string(gwv1.GatewayReasonAddressNotUsable), msg: fmt.Sprintf("spec.addresses asks for a %s address; sturdy gives IPAddress ones, from kubernetes.gateway_addresses", *as[0].Type), unsupported: true}
	case as[0].Value == "":
		return "", nil
	}
	v := canonIP(as[0].Value)
	if !in[v] {
		return "", &noAddress{reason: string(gwv1.GatewayReasonAddressNotUsable), msg: fmt.Sprintf("spec.addresses asks for %s, which is not in kubernetes.gateway_addresses", as[0].Value)}
	}
	return v, nil
}

// canonIP is an IP address as netip writes it, or "" for what is none.
func canonIP(s string) string {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return ""
	}
	return a.Unmap().String()
}

func ptrTo[T any](v T) *T { return &v }
