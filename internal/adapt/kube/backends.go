package kube

import (
	"fmt"
	"net"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// backend is one Service port that a rule sends to.
type backend struct {
	svc   Ref
	port  int32  // the Service's port
	proto string // the pool's protocol: "" for HTTP/1.1, or config.ProtocolH2C
}

// poolName names the pool of a Service port; the same Service port shares
// one pool (and one health model) across every route that uses it.
func (b backend) poolName() string {
	name := "svc/" + b.svc.Namespace + "/" + b.svc.Name + "/" + strconv.Itoa(int(b.port))
	if b.proto != "" {
		// Another protocol is other connections: its own pool.
		name += "+" + b.proto
	}
	return name
}

// servicePort finds the port of svc named by a backend reference: by
// number (Gateway API, Ingress) or by name (Ingress).
func servicePort(svc *corev1.Service, number int32, name string) (*corev1.ServicePort, error) {
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
			continue
		}
		if (number != 0 && p.Port == number) || (name != "" && p.Name == name) {
			return p, nil
		}
	}
	if name != "" {
		return nil, fmt.Errorf("service %s/%s has no TCP port named %q", svc.Namespace, svc.Name, name)
	}
	return nil, fmt.Errorf("service %s/%s has no TCP port %d", svc.Namespace, svc.Name, number)
}

// endpoints are the hosts of one Service port, from its EndpointSlices.
// Ready endpoints serve; an endpoint that is not ready (starting, failing
// its readiness probe, or terminating) is left out, so that a reload
// drains it: requests in flight on it finish, new ones go elsewhere. When
// no endpoint is ready but some still serve while terminating, those
// serve rather than none (as kube-proxy does).
func (x *index) endpoints(svcRef Ref, sp *corev1.ServicePort) []config.Host {
	var ready, serving []string
	for _, sl := range x.slices[svcRef] {
		if sl.AddressType != discoveryv1.AddressTypeIPv4 && sl.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		port := slicePort(sl, sp)
		if port == 0 {
			continue
		}
		for _, ep := range sl.Endpoints {
			c := ep.Conditions
			isReady := c.Ready == nil || *c.Ready
			isServing := c.Serving == nil && isReady || c.Serving != nil && *c.Serving
			for _, a := range ep.Addresses {
				if net.ParseIP(a) == nil {
					continue
				}
				addr := net.JoinHostPort(a, strconv.Itoa(int(port)))
				switch {
				case isReady && !(c.Terminating != nil && *c.Terminating):
					ready = append(ready, addr)
				case isServing:
					serving = append(serving, addr)
				}
			}
		}
	}
	list := ready
	if len(list) == 0 {
		list = serving
	}
	slices.Sort(list)
	list = slices.Compact(list)
	hosts := make([]config.Host, len(list))
	for i, a := range list {
		hosts[i] = config.Host{Addr: a, Weight: 1}
	}
	return hosts
}

// slicePort is the endpoint port of a slice for a Service port: the
// slice's ports carry the Service port's name, not its number.
func slicePort(sl *discoveryv1.EndpointSlice, sp *corev1.ServicePort) int32 {
	for _, p := range sl.Ports {
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		if name == sp.Name && p.Port != nil && (p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP) {
			return *p.Port
		}
	}
	return 0
}

// backendRef resolves one backendRef of a route to a Service port and its
// ready endpoints; c is a ResolvedRefs=False condition when it cannot be.
// The protocol sturdy speaks to the port is its appProtocol's: HTTP/1.1
// (none, http, kubernetes.io/http, kubernetes.io/ws: WebSocket is an
// HTTP/1.1 Upgrade) or h2c (kubernetes.io/h2c); a
// GRPCRoute's backends are gRPC, so h2c unless the port says otherwise.
func (t *translator) backendRef(ro routeObj, br gwv1.BackendObjectReference) (backend, []config.Host, *metav1.Condition) {
	gen := ro.obj.GetGeneration()
	fail := func(reason, format string, args ...any) (backend, []config.Host, *metav1.Condition) {
		c := cond("ResolvedRefs", false, reason, fmt.Sprintf(format, args...), gen)
		return backend{}, nil, &c
	}
	if (br.Group != nil && *br.Group != "" && *br.Group != "core") || (br.Kind != nil && *br.Kind != "Service") {
		return fail(string(gwv1.RouteReasonInvalidKind), "backendRef %s is not a Service", br.Name)
	}
	ns := ro.obj.GetNamespace()
	if br.Namespace != nil {
		ns = string(*br.Namespace)
	}
	if !t.x.granted(gatewayGroup, ro.kind, ro.obj.GetNamespace(), "", "Service", ns, string(br.Name)) {
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
	proto, ok := backendProtocol(ro.kind, sp.AppProtocol)
	if !ok {
		return fail(string(gwv1.RouteReasonUnsupportedProtocol), "Service %s/%s port %d has appProtocol %s; sturdy speaks %s to the backends of a %s", ns, br.Name, sp.Port, *sp.AppProtocol, protocolsFor(ro.kind), ro.kind)
	}
	return backend{svc: sref, port: sp.Port, proto: proto}, t.x.endpoints(sref, sp), nil
}

// backendProtocol is the pool protocol for a Service port's appProtocol
// on a route of kind; ok is false when sturdy cannot speak it there.
func backendProtocol(kind string, ap *string) (proto string, ok bool) {
	a := ""
	if ap != nil {
		a = *ap
	}
	if kind == "GRPCRoute" {
		switch a {
		case "", "kubernetes.io/h2c", "h2c", "grpc":
			return config.ProtocolH2C, true
		}
		return "", false
	}
	switch a {
	case "", "http", "kubernetes.io/http", "kubernetes.io/ws":
		// WebSocket is an HTTP/1.1 Upgrade, which sturdy passes through.
		return "", true
	case "kubernetes.io/h2c":
		return config.ProtocolH2C, true
	}
	return "", false
}

func protocolsFor(kind string) string {
	if kind == "GRPCRoute" {
		return "HTTP/2 without TLS (h2c: no appProtocol, kubernetes.io/h2c, h2c or grpc)"
	}
	return "HTTP/1.1 (no appProtocol, http, kubernetes.io/http, kubernetes.io/ws) or h2c (kubernetes.io/h2c)"
}
