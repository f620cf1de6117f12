package kube

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

// gatewayFixture is a namespace with a GatewayClass of its own and
// Services whose one endpoint each answers with the Service's name.
type gatewayFixture struct {
	t   *testing.T
	ns  string
	gc  gwclient.Interface
	ctx context.Context
}

func newGatewayFixture(t *testing.T, f *fleet, prefix string, services map[string]string) *gatewayFixture {
	c := env.Cluster(t)
	ns := c.Namespace(t, prefix)
	ctx := context.Background()
	gc := must(gwclient.NewForConfig(c.Config))
	for name, addr := range services {
		f.backend(t, addr+":8080", name)
		must(c.Client.CoreV1().Services(ns).Create(ctx, svcObj(ns, name), metav1.CreateOptions{}))
		must(c.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, sliceObj(ns, name, addr), metav1.CreateOptions{}))
	}
	class := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: gwv1.GatewayClassSpec{ControllerName: gwv1.GatewayController("sturdyproxy.io/" + ns)}}
	must(gc.GatewayV1().GatewayClasses().Create(ctx, class, metav1.CreateOptions{}))
	t.Cleanup(func() { gc.GatewayV1().GatewayClasses().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return &gatewayFixture{t: t, ns: ns, gc: gc, ctx: ctx}
}

// gateway80 makes a Gateway with one port-80 listener without a hostname,
// as the conformance suite's base Gateways are.
func (g *gatewayFixture) gateway80(name string) {
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: name}, Spec: gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(g.ns),
		Listeners: []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}}}}
	must(g.gc.GatewayV1().Gateways(g.ns).Create(g.ctx, gw, metav1.CreateOptions{}))
}

func (g *gatewayFixture) route(name, parent, path, svc string) {
	r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: name}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: gwv1.ObjectName(parent)}}},
		Rules: []gwv1.HTTPRouteRule{{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchPathPrefix), Value: ptr(path)}}},
			BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(svc), Port: ptr(gwv1.PortNumber(80))}}}}}},
	}}
	must(g.gc.GatewayV1().HTTPRoutes(g.ns).Create(g.ctx, r, metav1.CreateOptions{}))
}

func (g *gatewayFixture) getGateway(name string) *gwv1.Gateway {
	gw, err := g.gc.GatewayV1().Gateways(g.ns).Get(g.ctx, name, metav1.GetOptions{})
	if err != nil {
		return &gwv1.Gateway{}
	}
	return gw
}

func (g *gatewayFixture) getRoute(name string) *gwv1.HTTPRoute {
	r, err := g.gc.GatewayV1().HTTPRoutes(g.ns).Get(g.ctx, name, metav1.GetOptions{})
	if err != nil {
		return &gwv1.HTTPRoute{}
	}
	return r
}

// Item 1 of issue 34: the conformance suite's three base Gateways, each
// with a port-80 listener and no hostname, are all programmed, each on
// an address of its own from gateway_addresses, which its status says
// and which answers its routes, and only its routes.
func TestSeveralGatewaysOnOnePort(t *testing.T) {
	f := &fleet{addr: map[string]string{}}
	g := newGatewayFixture(t, f, "gw-shared-port", map[string]string{"team-a": "192.0.2.31", "team-b": "192.0.2.32"})
	for _, name := range []string{"same-namespace", "all-namespaces", "backend-namespaces"} {
		g.gateway80(name)
	}
	g.route("a", "same-namespace", "/", "team-a")
	g.route("b", "all-namespaces", "/", "team-b")
	srv, ctl, _ := sturdyWith(t, env.Cluster(t), g.ns, f, "replica-a", "  bind_address: 127.0.0.1\n  gateway_addresses: [127.0.0.41, 127.0.0.42, 127.0.0.43]\n")
	waitFor(t, "the first sync", 30*time.Second, func() bool { ok, _ := ctl.Ready(); return ok })

	addr := map[string]string{}
	waitFor(t, "every Gateway programmed, each with an address of its own", 20*time.Second, func() bool {
		for _, name := range []string{"same-namespace", "all-namespaces", "backend-namespaces"} {
			gw := g.getGateway(name)
			if gwCond(gw.Status.Conditions, "Programmed") != "True" || len(gw.Status.Addresses) != 1 || len(gw.Status.Listeners) != 1 ||
				gwCond(gw.Status.Listeners[0].Conditions, "Conflicted") != "False" {
				return false
			}
			addr[name] = gw.Status.Addresses[0].Value
		}
		return len(map[string]bool{addr["same-namespace"]: true, addr["all-namespaces"]: true, addr["backend-namespaces"]: true}) == 3
	})
	for name, want := range map[string]string{"same-namespace": "team-a", "all-namespaces": "team-b"} {
		bound := srv.Addr("gateway/" + g.ns + "/" + name + "/port-80")
		host, _, err := net.SplitHostPort(bound)
		if err != nil || host != addr[name] {
			t.Fatalf("%s is bound on %q; its status says %s", name, bound, addr[name])
		}
		if gw := g.getGateway(name); gw.Status.Listeners[0].AttachedRoutes != 1 {
			t.Errorf("%s: attachedRoutes = %d; want 1", name, gw.Status.Listeners[0].AttachedRoutes)
		}
		code, body, _, err := get(client(bound, nil), "http://x/hello")
		if err != nil || code != 200 || !strings.HasPrefix(body, want+" ") {
			t.Errorf("GET on %s's address = %d %q %v; want its own route's %s", name, code, body, err, want)
		}
	}
	// The Gateway without routes has its address, and answers nothing
	// of the others'.
	if code, _, _, err := get(client(srv.Addr("gateway/"+g.ns+"/backend-namespaces/port-80"), nil), "http://x/hello"); err != nil || code != 404 {
		t.Errorf("backend-namespaces answered %d %v; want 404: no route is attached to it", code, err)
	}
}

// Item 2 of issue 34: a route whose Gateway is down is not accepted nor
// counted; a route that moves or loses its Gateway keeps no entry of
// sturdy's for the old one, while other controllers' entries stay; and
// every entry matches what is served.
func TestRouteStatusFollowsWhatIsServed(t *testing.T) {
	f := &fleet{addr: map[string]string{}}
	g := newGatewayFixture(t, f, "gw-truth", map[string]string{"one": "192.0.2.51", "two": "192.0.2.52"})
	g.gateway80("first")
	g.route("r1", "first", "/one", "one")
	// The second Gateway is younger (or, created in the same second, later
	// by name): without gateway_addresses its port 80 listener, with no
	// hostname either, conflicts with the first's.
	g.gateway80("second")
	g.route("r2", "second", "/two", "two")
	// Another implementation's entry on r1, which sturdy must keep.
	r1 := g.getRoute("r1")
	r1.Status.Parents = []gwv1.RouteParentStatus{{ParentRef: gwv1.ParentReference{Name: "elsewhere"}, ControllerName: "example.com/other",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: metav1.Now()}}}}
	must(g.gc.GatewayV1().HTTPRoutes(g.ns).UpdateStatus(g.ctx, r1, metav1.UpdateOptions{}))

	srv, ctl, _ := sturdyWith(t, env.Cluster(t), g.ns, f, "replica-a", "")
	waitFor(t, "the first sync", 30*time.Second, func() bool { ok, _ := ctl.Ready(); return ok && srv.Addr("port-80") != "" })
	cl := client(srv.Addr("port-80"), nil)
	ours := func(r *gwv1.HTTPRoute) []gwv1.RouteParentStatus {
		var out []gwv1.RouteParentStatus
		for _, p := range r.Status.Parents {
			if p.ControllerName != "example.com/other" {
				out = append(out, p)
			}
		}
		return out
	}

	waitFor(t, "r2 not accepted while its Gateway's listener conflicts, and counted nowhere", 20*time.Second, func() bool {
		second, r2 := g.getGateway("second"), ours(g.getRoute("r2"))
		return len(second.Status.Listeners) == 1 && gwCond(second.Status.Listeners[0].Conditions, "Conflicted") == "True" &&
			second.Status.Listeners[0].AttachedRoutes == 0 &&
			len(r2) == 1 && gwCond(r2[0].Conditions, "Accepted") == "False" && condOf(r2[0].Conditions, "Accepted").Reason == "NoMatchingParent"
	})
	if code, _, _, err := get(cl, "http://x/two"); err != nil || code != 404 {
		t.Errorf("GET /two = %d %v; want 404, as r2's status says", code, err)
	}
	if code, body, _, err := get(cl, "http://x/one"); err != nil || code != 200 || !strings.HasPrefix(body, "one ") {
		t.Errorf("GET /one = %d %q %v", code, body, err)
	}

	// r2 moves to the first Gateway: one entry of sturdy's, for it.
	r2 := g.getRoute("r2")
	r2.Spec.ParentRefs = []gwv1.ParentReference{{Name: "first"}}
	must(g.gc.GatewayV1().HTTPRoutes(g.ns).Update(g.ctx, r2, metav1.UpdateOptions{}))
	waitFor(t, "r2's entry follows its parentRef", 20*time.Second, func() bool {
		ps := ours(g.getRoute("r2"))
		return len(ps) == 1 && ps[0].ParentRef.Name == "first" && gwCond(ps[0].Conditions, "Accepted") == "True"
	})
	waitFor(t, "GET /two served through the first Gateway", 10*time.Second, func() bool {
		code, body, _, err := get(cl, "http://x/two")
		return err == nil && code == 200 && strings.HasPrefix(body, "two ")
	})

	// The first Gateway goes: neither route keeps an entry of sturdy's;
	// the other controller's stays.
	if err := g.gc.GatewayV1().Gateways(g.ns).Delete(g.ctx, "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "sturdy's entries removed with their Gateway", 20*time.Second, func() bool {
		a, b := g.getRoute("r1"), g.getRoute("r2")
		return len(ours(a)) == 0 && len(a.Status.Parents) == 1 && len(b.Status.Parents) == 0
	})
	if code, _, _, err := get(cl, "http://x/one"); err != nil || code != 404 {
		t.Errorf("GET /one = %d %v after its Gateway was deleted; want 404", code, err)
	}
}
