package kube

import (
	"fmt"
	"net"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// backend is one Service port that a rule sends to.
type backend struct {
	svc  Ref
	port int32 // the Service's port
}

// poolName names the pool of a Service port; the same Service port shares
// one pool (and one health model) across every route that uses it.
func (b backend) poolName() string {
	return "svc/" + b.svc.Namespace + "/" + b.svc.Name + "/" + strconv.Itoa(int(b.port))
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
		return nil, fmt.Errorf("Service %s/%s has no TCP port named %q", svc.Namespace, svc.Name, name)
	}
	return nil, fmt.Errorf("Service %s/%s has no TCP port %d", svc.Namespace, svc.Name, number)
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
