package config

// The Kubernetes section: sturdy as a Gateway API and Ingress
// implementation (docs/kubernetes.md). The file keeps what Kubernetes
// objects do not say (admin, log, attribution, health, webhooks, ...);
// package kube translates Gateways, HTTPRoutes and Ingresses into more
// listeners, routes and pools of this same Config, which then goes through
// Finish and the compile step exactly like a file.

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Kubernetes configures the Kubernetes source of config.
type Kubernetes struct {
	// Kubeconfig is a kubeconfig file. Default: the pod's service account
	// (in-cluster), else $KUBECONFIG.
	Kubeconfig string `yaml:"kubeconfig"`
	// ControllerName is the GatewayClass spec.controllerName sturdy
	// implements. Default sturdyproxy.io/gateway-controller.
	ControllerName string `yaml:"controller_name"`
	// IngressClass is the ingressClassName of the Ingresses sturdy serves;
	// "" leaves Ingresses alone. Default "sturdy".
	IngressClass *string `yaml:"ingress_class"`
	// Namespaces restricts the watch to these namespaces. Default: all.
	Namespaces []string `yaml:"namespaces"`
	// Ports binds each Gateway listener port to a local address: a pod
	// without NET_BIND_SERVICE listens on 8080 for a Gateway's port 80.
	// A port not listed listens on BindAddress:port.
	Ports []PortMap `yaml:"ports"`
	// BindAddress is the address for ports not listed in ports. Default 0.0.0.0.
	BindAddress string `yaml:"bind_address"`
	// PublishService is the namespace/name of the Service in front of the
	// sturdy pods; its load-balancer addresses (else its cluster IP) are
	// written to Gateway status.addresses and Ingress status.loadBalancer.
	PublishService string `yaml:"publish_service"`
	// Addresses are written instead of PublishService's when set.
	Addresses []string `yaml:"addresses"`
	// GatewayAddresses is the pool of addresses (IPs, or CIDRs of at most
	// MaxGatewayAddresses) that Gateways get one each from: every Gateway
	// listener is bound on its Gateway's address, so that Gateways never
	// conflict over a port, and the address is the Gateway's
	// status.addresses. The addresses must be this host's (loopback,
	// aliases on the pod's interface, or what a load balancer announces
	// to it). Default: none; every Gateway shares bind_address and
	// addresses, and two Gateways' listeners on one port and hostname
	// conflict.
	GatewayAddresses []string `yaml:"gateway_addresses"`
	// Lease is the Lease that chooses the one replica that writes status;
	// every replica serves. Default namespace: the pod's (POD_NAMESPACE),
	// else "default"; default name: sturdy-status.
	Lease Lease `yaml:"lease"`
	// Debounce gathers changes that arrive together into one reload.
	// Default 200ms.
	Debounce Duration `yaml:"debounce"`

	// FileRoutes is how many of the config's routes are the file's (the
	// rest were translated); /readyz counts only those unless
	// admin.ready_routes names others. Set by the translation.
	FileRoutes int `yaml:"-"`
}

// PortMap binds one Gateway listener port to a local address.
type PortMap struct {
	// Port is the Gateway listener's port (1-65535). Required.
	Port int `yaml:"port"`
	// Listen is host:port to bind for it. Required.
	Listen string `yaml:"listen"`
}

// Lease names the leader-election lease of the status writer.
type Lease struct {
	Namespace string `yaml:"namespace"`
	Name      string `yaml:"name"`
	// Identity is this replica's name in the lease. Default: $POD_NAME,
	// else the host name.
	Identity string `yaml:"identity"`
}

// Kubernetes defaults. docs/kubernetes.md lists the same values.
const (
	DefaultControllerName = "sturdyproxy.io/gateway-controller"
	DefaultIngressClass   = "sturdy"
	DefaultBindAddress    = "0.0.0.0"
	DefaultLeaseName      = "sturdy-status"
	DefaultKubeDebounce   = 200 * time.Millisecond
	// MaxGatewayAddresses bounds gateway_addresses once CIDRs are
	// expanded.
	MaxGatewayAddresses = 4096
)

// GatewayPool is gateway_addresses expanded, in order, each address once;
// nil when unset or invalid (validation says why).
func (k *Kubernetes) GatewayPool() []netip.Addr {
	out, _ := expandAddresses(k.GatewayAddresses)
	return out
}

func expandAddresses(list []string) ([]netip.Addr, error) {
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	add := func(a netip.Addr) error {
		if seen[a] {
			return nil
		}
		if len(out) == MaxGatewayAddresses {
			return fmt.Errorf("more than %d addresses", MaxGatewayAddresses)
		}
		seen[a] = true
		out = append(out, a)
		return nil
	}
	for _, s := range list {
		if a, err := netip.ParseAddr(s); err == nil {
			if err := add(a.Unmap()); err != nil {
				return nil, err
			}
			continue
		}
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an IP address nor a CIDR", s)
		}
		for a := pfx.Masked().Addr(); pfx.Contains(a); a = a.Next() {
			if err := add(a); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// Listen is the local address for a Gateway listener port.
func (k *Kubernetes) Listen(port int) string {
	for _, p := range k.Ports {
		if p.Port == port {
			return p.Listen
		}
	}
	return net.JoinHostPort(k.BindAddress, strconv.Itoa(port))
}

// IngressClassName is the class of Ingresses to serve, "" for none.
func (k *Kubernetes) IngressClassName() string {
	if k.IngressClass == nil {
		return DefaultIngressClass
	}
	return *k.IngressClass
}

func (c *Config) setKubernetesDefaults() {
	k := c.Kubernetes
	if k == nil {
		return
	}
	if k.ControllerName == "" {
		k.ControllerName = DefaultControllerName
	}
	if k.BindAddress == "" {
		k.BindAddress = DefaultBindAddress
	}
	if k.Lease.Name == "" {
		k.Lease.Name = DefaultLeaseName
	}
	if k.Debounce == 0 {
		k.Debounce = Duration(DefaultKubeDebounce)
	}
}

func (v *validator) kubernetes() {
	k := v.c.Kubernetes
	if k == nil {
		return
	}
	if dom, path, ok := strings.Cut(k.ControllerName, "/"); !ok || !dnsSubdomain(dom) || path == "" || strings.ContainsAny(path, " \t") || len(k.ControllerName) > 253 {
		v.errorf("kubernetes.controller_name", "%q is not a domain-prefixed path like example.com/gateway-controller", k.ControllerName)
	}
	if n := k.IngressClassName(); n != "" {
		if !dnsSubdomain(n) {
			v.errorf("kubernetes.ingress_class", "%q is not a valid IngressClass name (lower-case letters, digits, - and .)", n)
		}
	}
	for i, ns := range k.Namespaces {
		if !dnsLabel(ns) {
			v.errorf(fmt.Sprintf("kubernetes.namespaces[%d]", i), "%q is not a namespace name (lower-case letters, digits and -)", ns)
		}
	}
	seen := map[int]int{}
	for i, p := range k.Ports {
		pp := fmt.Sprintf("kubernetes.ports[%d]", i)
		if p.Port < 1 || p.Port > 65535 {
			v.errorf(pp+".port", "port %d is out of range; expected 1-65535", p.Port)
		}
		if j, dup := seen[p.Port]; dup {
			v.errorf(pp+".port", "port %d is already mapped by kubernetes.ports[%d]", p.Port, j)
		}
		seen[p.Port] = i
		if p.Listen == "" {
			v.errorf(pp+".listen", "missing; expected host:port, like 0.0.0.0:8080")
		} else {
			v.checkAddr(pp+".listen", p.Listen)
		}
	}
	if net.ParseIP(k.BindAddress) == nil {
		v.errorf("kubernetes.bind_address", "%q is not an IP address", k.BindAddress)
	}
	if len(k.GatewayAddresses) > 0 {
		if _, err := expandAddresses(k.GatewayAddresses); err != nil {
			v.errorf("kubernetes.gateway_addresses", "%v; expected addresses like 127.0.0.2 or CIDRs like 10.0.5.0/28", err)
		}
		if ip := net.ParseIP(k.BindAddress); ip != nil && ip.IsUnspecified() {
			// Linux refuses 127.0.0.2:80 while 0.0.0.0:80 is bound.
			v.errorf("kubernetes.bind_address", "%s holds the port on every address, so no Gateway could have it on its own; with gateway_addresses, set bind_address to the address the Ingresses are served on (the pod's IP)", k.BindAddress)
		}
		for i, p := range k.Ports {
			if h, _, err := net.SplitHostPort(p.Listen); err == nil && h != "" {
				if ip := net.ParseIP(h); ip == nil || !ip.IsUnspecified() {
					continue
				}
			}
			v.errorf(fmt.Sprintf("kubernetes.ports[%d].listen", i), "%s holds the port on every address; with gateway_addresses, give the address the Ingresses are served on (a Gateway's listener takes only the port, on its own address)", p.Listen)
		}
	}
	if k.PublishService != "" {
		if ns, name, ok := cutNamespaced(k.PublishService); !ok || !dnsLabel(ns) || !dnsLabel(name) {
			v.errorf("kubernetes.publish_service", "%q is not namespace/name of a Service", k.PublishService)
		}
	}
	if k.Lease.Namespace != "" && !dnsLabel(k.Lease.Namespace) {
		v.errorf("kubernetes.lease.namespace", "%q is not a namespace name", k.Lease.Namespace)
	}
	if !dnsSubdomain(k.Lease.Name) {
		v.errorf("kubernetes.lease.name", "%q is not a valid Lease name", k.Lease.Name)
	}
}

func cutNamespaced(s string) (ns, name string, ok bool) {
	ns, name, ok = strings.Cut(s, "/")
	return ns, name, ok && ns != "" && name != ""
}

// dnsLabel is Kubernetes' DNS-1123 label: what namespace and Service
// names must be.
func dnsLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return false
		}
	}
	return true
}

// dnsSubdomain is Kubernetes' DNS-1123 subdomain: dot-separated labels.
func dnsSubdomain(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !dnsLabel(l) {
			return false
		}
	}
	return true
}

// Finish defaults and validates a config assembled in code (the
// Kubernetes source appends the listeners, routes and pools it
// translated to the file's), exactly as Parse does for a file: every
// check and every default applies. Finishing a config twice changes
// nothing the second time.
func (c *Config) Finish() error {
	c.setDefaults()
	if errs := c.validate(); len(errs) > 0 {
		return errs
	}
	return nil
}
