package kube

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// port80 is a Gateway of class sturdy with one port-80 listener without
// a hostname, and a route to svc attached to it.
func port80(snap *Snapshot, name string, age int, svc string) *gwv1.Gateway {
	gw := &gwv1.Gateway{ObjectMeta: objMeta("infra", name, age), Spec: gwv1.GatewaySpec{GatewayClassName: "sturdy",
		Listeners: []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}}}}
	snap.Gateways = append(snap.Gateways, gw)
	snap.HTTPRoutes = append(snap.HTTPRoutes, &gwv1.HTTPRoute{ObjectMeta: objMeta("infra", name, age), Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: gwv1.ObjectName(name)}}},
		Rules:           []gwv1.HTTPRouteRule{{BackendRefs: to(svc)}}}})
	snap.Services = append(snap.Services, service("infra", svc, 80))
	snap.EndpointSlices = append(snap.EndpointSlices, slice("infra", svc, ep("10.0.9.1", true, true, false)))
	return gw
}

func classSnap() *Snapshot {
	return &Snapshot{GatewayClasses: []*gwv1.GatewayClass{{ObjectMeta: objMeta("", "sturdy", 0), Spec: gwv1.GatewayClassSpec{ControllerName: config.DefaultControllerName}}}}
}

func pooledBase(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(`admin: { listen: 127.0.0.1:0 }
kubernetes:
  bind_address: 127.0.0.1
  ports: [ { port: 80, listen: 127.0.0.1:0 } ]
  gateway_addresses: [127.0.0.10, 127.0.0.11/32, 127.0.0.12]
`), "sturdy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestGatewaysOnOnePortGetAddressesOfTheirOwn(t *testing.T) {
	snap := classSnap()
	port80(snap, "a", 0, "sa")
	b := port80(snap, "b", 1, "sb")
	port80(snap, "c", 2, "sc")
	port80(snap, "d", 3, "sd")
	// b already has .12 (its status says so): it keeps it, and the
	// others take the lowest free ones, oldest first.
	b.Status.Addresses = []gwv1.GatewayStatusAddress{{Type: ptr(gwv1.IPAddressType), Value: "127.0.0.12"}}
	res := Translate(Input{Base: pooledBase(t), Snap: snap})
	rt := finish(t, res)

	want := map[string]string{"a": "127.0.0.10", "b": "127.0.0.12", "c": "127.0.0.11"}
	for name, addr := range want {
		ref := Ref{"Gateway", "infra", name}
		st := res.Gateways[ref]
		if len(st.Addresses) != 1 || st.Addresses[0].Value != addr {
			t.Errorf("%s: status.addresses = %+v; want %s", ref, st.Addresses, addr)
		}
		if c := condOf(st.Conditions, "Programmed"); c.Status != metav1.ConditionTrue {
			t.Errorf("%s: Programmed = %+v", ref, c)
		}
		if c := condOf(st.Listeners[0].Conditions, "Conflicted"); c.Status != metav1.ConditionFalse {
			t.Errorf("%s: listener Conflicted = %+v", ref, c)
		}
		if st.Listeners[0].AttachedRoutes != 1 {
			t.Errorf("%s: attachedRoutes = %d; want 1", ref, st.Listeners[0].AttachedRoutes)
		}
		l := rt.Listener("gateway/infra/" + name + "/port-80")
		if l == nil {
			t.Fatalf("%s has no listener of its own", ref)
		}
		if got := findListener(res.Config, "gateway/infra/"+name+"/port-80").Listen; got != addr+":0" {
			t.Errorf("%s listens on %s; want its own address, with the port kubernetes.ports maps 80 to", ref, got)
		}
		r := findRoute(res.Config, "httproute/infra/"+name+"/0/0/gateway/infra/"+name+"/port-80")
		if r == nil || r.Pool != "svc/infra/s"+name+"/80" {
			t.Errorf("%s's route = %+v; want it on its own listener, to its own Service", ref, r)
		}
	}
	// d finds the pool used up: not programmed, its route not accepted
	// (nothing would answer it), and nothing bound for it.
	d := res.Gateways[Ref{"Gateway", "infra", "d"}]
	if c := condOf(d.Conditions, "Programmed"); c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.GatewayReasonAddressNotAssigned) {
		t.Errorf("d: Programmed = %+v; want False AddressNotAssigned", c)
	}
	if len(d.Addresses) != 0 || d.Listeners[0].AttachedRoutes != 0 {
		t.Errorf("d: addresses %+v attachedRoutes %d; want none and 0", d.Addresses, d.Listeners[0].AttachedRoutes)
	}
	if c := condOf(res.Routes[Ref{"HTTPRoute", "infra", "d"}].Parents[0].Conditions, "Accepted"); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "no address") {
		t.Errorf("d's route Accepted = %+v; want False, saying the Gateway has no address", c)
	}
	if findListener(res.Config, "gateway/infra/d/port-80") != nil {
		t.Error("d got a listener")
	}
}

func TestGatewayAddressRequests(t *testing.T) {
	snap := classSnap()
	a := port80(snap, "a", 0, "sa")
	b := port80(snap, "b", 1, "sb")
	c := port80(snap, "c", 2, "sc")
	a.Spec.Addresses = []gwv1.GatewaySpecAddress{{Type: ptr(gwv1.IPAddressType), Value: "127.0.0.11"}}
	b.Spec.Addresses = []gwv1.GatewaySpecAddress{{Value: "192.0.2.7"}}
	c.Spec.Addresses = []gwv1.GatewaySpecAddress{{Type: ptr(gwv1.HostnameAddressType), Value: "gw.example.com"}}
	res := Translate(Input{Base: pooledBase(t), Snap: snap})
	finish(t, res)
	if st := res.Gateways[Ref{"Gateway", "infra", "a"}]; len(st.Addresses) != 1 || st.Addresses[0].Value != "127.0.0.11" {
		t.Errorf("a: addresses %+v; want the one it asked for", st.Addresses)
	}
	bs := res.Gateways[Ref{"Gateway", "infra", "b"}]
	if c := condOf(bs.Conditions, "Programmed"); c.Reason != string(gwv1.GatewayReasonAddressNotUsable) || condOf(bs.Conditions, "Accepted").Status != metav1.ConditionTrue {
		t.Errorf("b (an address outside the pool): %+v; want Accepted, Programmed=False AddressNotUsable", bs.Conditions)
	}
	cs := res.Gateways[Ref{"Gateway", "infra", "c"}]
	if c := condOf(cs.Conditions, "Accepted"); c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.GatewayReasonUnsupportedAddress) {
		t.Errorf("c (a Hostname address): Accepted = %+v; want False UnsupportedAddress", c)
	}
}

// Without gateway_addresses, Gateways share the port: the younger one's
// listener conflicts, and its route is neither accepted nor counted.
func TestSharedPortConflictLeavesRoutesUnaccepted(t *testing.T) {
	snap := classSnap()
	port80(snap, "a", 0, "sa")
	port80(snap, "b", 1, "sb")
	res := Translate(Input{Base: base(t), Snap: snap})
	finish(t, res)
	b := res.Gateways[Ref{"Gateway", "infra", "b"}]
	if c := condOf(b.Listeners[0].Conditions, "Conflicted"); c.Status != metav1.ConditionTrue {
		t.Fatalf("b's listener Conflicted = %+v", c)
	}
	if b.Listeners[0].AttachedRoutes != 0 {
		t.Errorf("b's listener counts %d routes; it serves none", b.Listeners[0].AttachedRoutes)
	}
	if c := condOf(res.Routes[Ref{"HTTPRoute", "infra", "b"}].Parents[0].Conditions, "Accepted"); c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.RouteReasonNoMatchingParent) {
		t.Errorf("b's route Accepted = %+v; want False NoMatchingParent", c)
	}
	if c := condOf(res.Routes[Ref{"HTTPRoute", "infra", "a"}].Parents[0].Conditions, "Accepted"); c.Status != metav1.ConditionTrue {
		t.Errorf("a's route Accepted = %+v", c)
	}
}

// A route's entries of sturdy's are removed when none of its parents is
// sturdy's any more; other controllers' entries stay.
func TestRouteStatusDropsStaleEntries(t *testing.T) {
	c := &Controller{k: &config.Kubernetes{ControllerName: config.DefaultControllerName}}
	ours := gwv1.RouteParentStatus{ParentRef: gwv1.ParentReference{Name: "old"}, ControllerName: config.DefaultControllerName,
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"}}}
	theirs := gwv1.RouteParentStatus{ParentRef: gwv1.ParentReference{Name: "x"}, ControllerName: "example.com/other"}
	st := c.routeStatus(gwv1.RouteStatus{Parents: []gwv1.RouteParentStatus{ours, theirs}}, gwv1.RouteStatus{})
	if st == nil || len(st.Parents) != 1 || st.Parents[0].ControllerName != "example.com/other" {
		t.Fatalf("status = %+v; want only the other controller's entry", st)
	}
	if st := c.routeStatus(gwv1.RouteStatus{Parents: []gwv1.RouteParentStatus{ours}}, gwv1.RouteStatus{}); st == nil || st.Parents == nil || len(st.Parents) != 0 {
		t.Errorf("status = %+v; want an empty list (never null: the CRD requires it)", st)
	}
	if st := c.routeStatus(gwv1.RouteStatus{Parents: []gwv1.RouteParentStatus{theirs}}, gwv1.RouteStatus{}); st != nil {
		t.Errorf("a route with no entry of sturdy's was rewritten: %+v", st)
	}
}

func findListener(cfg *config.Config, name string) *config.Listener {
	for i := range cfg.Listeners {
		if cfg.Listeners[i].Name == name {
			return &cfg.Listeners[i]
		}
	}
	return nil
}

func findRoute(cfg *config.Config, name string) *config.Route {
	for i := range cfg.Routes {
		if cfg.Routes[i].Name == name {
			return &cfg.Routes[i]
		}
	}
	return nil
}
