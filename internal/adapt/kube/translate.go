package kube

import (
	"cmp"
	"net"
	"slices"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// Input is what one translation reads.
type Input struct {
	// Base is the file's config, as config.Load returned it; it must have
	// a kubernetes section. Translate copies nothing into it.
	Base *config.Config
	// Snap is the objects to translate.
	Snap *Snapshot
	// Exclude lists objects a previous compile refused, with its words:
	// they are left out and their status says why.
	Exclude map[Ref]string
}

// Result is one translation: the config to compile, and what every
// object's status should say once it is applied.
type Result struct {
	// Config is Base with the translated listeners, routes and pools
	// appended, not yet finished (config.Finish defaults and validates it).
	Config *config.Config
	// Origins maps the key path of every translated entry ("routes[7]",
	// "listeners[2].tls.certificates[0]") to the object it came from, so
	// that a compile error can be laid at that object's door.
	Origins map[string]Ref
	// Classes are the GatewayClasses of this controller, with their status.
	Classes map[string]*gwv1.GatewayClassStatus
	// Gateways and Routes are the Gateway API objects of those classes.
	Gateways map[Ref]*gwv1.GatewayStatus
	Routes   map[Ref]*gwv1.HTTPRouteStatus
	// GRPCRoutes are the GRPCRoutes attached to those Gateways.
	GRPCRoutes map[Ref]*gwv1.GRPCRouteStatus
	// Ingresses are the Ingresses of the ingress class, with the events
	// their translation raised.
	Ingresses map[Ref]*IngressResult
	// Generations are each object's metadata.generation as translated,
	// for the conditions' observedGeneration.
	Generations map[Ref]int64
}

// IngressResult is what became of one Ingress.
type IngressResult struct {
	// Events are warnings about what could not be translated.
	Events []string
	// Served is false when the whole Ingress was refused.
	Served bool
}

// sport is one sturdy listener: every Gateway listener (and the Ingress
// listener) on one port shares it, with certificates chosen by SNI.
type sport struct {
	number   int32
	addr     string // the Gateway's own address (gateway_addresses); "" for the shared one
	proto    gwv1.ProtocolType
	name     string
	certs    []config.Certificate
	certFrom []Ref
	hostname map[string]Ref
}

// entry is one translated route before de-duplication.
type entry struct {
	origin Ref
	obj    metav1.Object
	seq    int // order within the object (rule, match)
	route  config.Route
	// pools are built with the route; shared Service pools are not here.
	pools []*config.Pool
}

type translator struct {
	in    Input
	k     *config.Kubernetes
	x     *index
	res   *Result
	ports map[portKey]*sport
	// addrs are the Gateways' own addresses from gateway_addresses, and
	// why a Gateway got none.
	addrs   map[Ref]string
	noAddr  map[Ref]noAddress
	pooled  bool // kubernetes.gateway_addresses is set
	pools   map[string]*config.Pool
	entries []entry
	zones   []config.RateLimitZone
}

// Translate turns a snapshot into sturdy config. It is pure: it reads
// nothing but its input and changes none of it.
func Translate(in Input) *Result {
	t := &translator{
		in: in, k: in.Base.Kubernetes, x: newIndex(in.Snap),
		ports: map[portKey]*sport{}, pools: map[string]*config.Pool{},
		res: &Result{
			Origins:     map[string]Ref{},
			Classes:     map[string]*gwv1.GatewayClassStatus{},
			Gateways:    map[Ref]*gwv1.GatewayStatus{},
			Routes:      map[Ref]*gwv1.HTTPRouteStatus{},
			GRPCRoutes:  map[Ref]*gwv1.GRPCRouteStatus{},
			Ingresses:   map[Ref]*IngressResult{},
			Generations: map[Ref]int64{},
		},
	}
	t.gateways()
	t.ingresses()
	t.assemble()
	return t.res
}

// portKey is one sturdy listener: a port on the shared address (addr
// "") or on one Gateway's own.
type portKey struct {
	addr string
	n    int32
}

// port returns the sturdy listener for a port on addr ("" for the shared
// address, else a Gateway's own, named by gw), claiming it for proto; ok
// is false when it is already claimed for the other protocol.
func (t *translator) port(addr string, gw Ref, n int32, proto gwv1.ProtocolType) (*sport, bool) {
	k := portKey{addr, n}
	p := t.ports[k]
	if p == nil {
		name := "port-" + strconv.Itoa(int(n))
		if addr != "" {
			name = "gateway/" + gw.Namespace + "/" + gw.Name + "/" + name
		}
		p = &sport{number: n, addr: addr, proto: proto, name: name, hostname: map[string]Ref{}}
		t.ports[k] = p
	}
	return p, p.proto == proto
}

// listen is the local address of a sturdy listener: kubernetes.ports's
// (else bind_address) for the shared address; a Gateway's own address
// with the port kubernetes.ports maps its port to.
func (t *translator) listen(p *sport) string {
	l := t.k.Listen(int(p.number))
	if p.addr == "" {
		return l
	}
	_, port, err := net.SplitHostPort(l)
	if err != nil {
		port = strconv.Itoa(int(p.number))
	}
	return net.JoinHostPort(p.addr, port)
}

// assemble writes the listeners, routes and pools into a copy of Base.
func (t *translator) assemble() {
	base := t.in.Base
	cfg := *base
	cfg.Listeners = slices.Clone(base.Listeners)
	cfg.Routes = slices.Clone(base.Routes)
	cfg.Pools = slices.Clone(base.Pools)
	cfg.RateLimitZones = slices.Clone(base.RateLimitZones)

	keys := make([]portKey, 0, len(t.ports))
	for k, p := range t.ports {
		if p.proto == gwv1.HTTPSProtocolType && len(p.certs) == 0 {
			continue // no valid certificate: no handshake could complete
		}
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b portKey) int { return cmp.Or(cmp.Compare(a.addr, b.addr), cmp.Compare(a.n, b.n)) })
	served := map[string]bool{}
	for _, k := range keys {
		p := t.ports[k]
		// A plain port speaks h2c beside HTTP/1.1, as Gateway API asks of
		// an HTTP listener that takes GRPCRoutes (prior knowledge), and
		// on every plain port, so that a GRPCRoute or a backend-protocol
		// GRPC Ingress that arrives later changes no listener.
		l := config.Listener{Name: p.name, Listen: t.listen(p), H2C: p.proto == gwv1.HTTPProtocolType}
		path := "listeners[" + itoa(len(cfg.Listeners)) + "]"
		if p.proto == gwv1.HTTPSProtocolType {
			l.TLS = &config.TLS{Certificates: p.certs}
			for j, from := range p.certFrom {
				t.res.Origins[path+".tls.certificates["+itoa(j)+"]"] = from
			}
		}
		cfg.Listeners = append(cfg.Listeners, l)
		served[p.name] = true
	}

	// The oldest object wins a host and match that two claim, as Gateway
	// API's conflict rules say; the loser's duplicate is left out (the
	// compile step would refuse it: it could never be chosen).
	slices.SortStableFunc(t.entries, func(a, b entry) int {
		return cmp.Or(older(a.obj, b.obj), cmp.Compare(a.origin.Kind, b.origin.Kind), cmp.Compare(a.seq, b.seq))
	})
	type key struct{ listener, host, match string }
	taken := map[key]bool{}
	poolFrom := map[string]Ref{}
	for _, e := range t.entries {
		r := e.route
		r.Listeners = slices.DeleteFunc(slices.Clone(r.Listeners), func(l string) bool { return !served[l] })
		if len(r.Listeners) == 0 {
			continue
		}
		hosts := r.Hosts
		if len(hosts) == 0 {
			hosts = []string{""}
		}
		mk, coveredBy := matchKey(&r)
		fresh := false
		for _, l := range r.Listeners {
			for _, h := range hosts {
				if !taken[key{l, h, mk}] && (coveredBy == "" || !taken[key{l, h, coveredBy}]) {
					fresh = true
				}
			}
		}
		if !fresh {
			continue
		}
		for _, l := range r.Listeners {
			for _, h := range hosts {
				taken[key{l, h, mk}] = true
			}
		}
		for _, p := range e.pools {
			t.pools[p.Name] = p
		}
		for _, p := range routePools(&r) {
			if _, ok := poolFrom[p]; !ok {
				poolFrom[p] = e.origin
			}
		}
		t.res.Origins["routes["+itoa(len(cfg.Routes))+"]"] = e.origin
		cfg.Routes = append(cfg.Routes, r)
	}

	used := map[string]bool{}
	for i := range cfg.Routes {
		r := &cfg.Routes[i]
		for _, rl := range r.RateLimit {
			used["zone:"+rl.Zone] = true
		}
		for _, p := range routePools(r) {
			used[p] = true
		}
	}
	names := make([]string, 0, len(t.pools))
	for n := range t.pools {
		if used[n] {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		t.res.Origins["pools["+itoa(len(cfg.Pools))+"]"] = poolFrom[n]
		cfg.Pools = append(cfg.Pools, *t.pools[n])
	}
	for _, z := range t.zones {
		if used["zone:"+z.Name] {
			cfg.RateLimitZones = append(cfg.RateLimitZones, z)
		}
	}
	k := *base.Kubernetes
	k.FileRoutes = len(base.Routes)
	cfg.Kubernetes = &k
	cfg.File = base.File + " + Kubernetes"
	t.res.Config = &cfg
}

// routePools names every pool a route uses.
func routePools(r *config.Route) []string {
	var out []string
	if r.Pool != "" {
		out = append(out, r.Pool)
	}
	for _, b := range r.Backends {
		out = append(out, b.Pool)
	}
	if r.Mirror != nil {
		out = append(out, r.Mirror.Pool)
	}
	if r.ForwardAuth != nil && r.ForwardAuth.Pool != "" {
		out = append(out, r.ForwardAuth.Pool)
	}
	return out
}

// servicePool is the shared pool of one Service port, made once.
func (t *translator) servicePool(b backend, hosts []config.Host) string {
	name := b.poolName()
	if t.pools[name] == nil {
		t.pools[name] = &config.Pool{Name: name, Hosts: hosts, Discovered: true, Protocol: b.proto}
	}
	return name
}

func cond(typ string, ok bool, reason, msg string, gen int64) metav1.Condition {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen}
}
