package kube

import (
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sturdyproxy/sturdy/internal/config"
)

func TestLowerGRPCMatch(t *testing.T) {
	exact, regex := gwv1.GRPCMethodMatchExact, gwv1.GRPCMethodMatchRegularExpression
	hre := gwv1.GRPCHeaderMatchRegularExpression
	method := func(typ *gwv1.GRPCMethodMatchType, svc, meth string) *gwv1.GRPCMethodMatch {
		m := &gwv1.GRPCMethodMatch{Type: typ}
		if svc != "" {
			m.Service = &svc
		}
		if meth != "" {
			m.Method = &meth
		}
		return m
	}
	for _, c := range []struct {
		name string
		in   gwv1.GRPCRouteMatch
		want config.RouteMatch
		why  string
	}{
		{"no method is every call", gwv1.GRPCRouteMatch{}, config.RouteMatch{Path: &config.PathMatch{Prefix: "/"}}, ""},
		{"service and method are the exact path", gwv1.GRPCRouteMatch{Method: method(nil, "pkg.Users", "Get")},
			config.RouteMatch{Path: &config.PathMatch{Exact: "/pkg.Users/Get"}}, ""},
		{"a service alone is a prefix of whole segments", gwv1.GRPCRouteMatch{Method: method(&exact, "pkg.Users", "")},
			config.RouteMatch{Path: &config.PathMatch{Prefix: "/pkg.Users"}}, ""},
		{"a method alone, of any service", gwv1.GRPCRouteMatch{Method: method(&exact, "", "Get.x")},
			config.RouteMatch{Path: &config.PathMatch{Regex: `^/[^/]+/Get\.x$`}}, ""},
		{"regular expressions, each a whole segment", gwv1.GRPCRouteMatch{Method: method(&regex, `pkg\.v[0-9]+\.Users`, "Get|List")},
			config.RouteMatch{Path: &config.PathMatch{Regex: `^/(?:pkg\.v[0-9]+\.Users)/(?:Get|List)$`}}, ""},
		{"a regular expression of the method alone", gwv1.GRPCRouteMatch{Method: method(&regex, "", "Watch.*")},
			config.RouteMatch{Path: &config.PathMatch{Regex: `^/[^/]+/(?:Watch.*)$`}}, ""},
		{"a regex RE2 refuses drops the rule", gwv1.GRPCRouteMatch{Method: method(&regex, `(?=x)`, "")}, config.RouteMatch{}, "service regular expression"},
		{"neither service nor method", gwv1.GRPCRouteMatch{Method: method(&exact, "", "")}, config.RouteMatch{}, "neither"},
		{"headers; the first of equivalent names counts", gwv1.GRPCRouteMatch{Headers: []gwv1.GRPCHeaderMatch{
			{Name: "X-Tenant", Value: "a"}, {Name: "x-tenant", Value: "b"}, {Type: &hre, Name: "X-Ver", Value: "v[12]"}}},
			config.RouteMatch{Path: &config.PathMatch{Prefix: "/"}, Headers: []config.ValueMatch{{Name: "X-Tenant", Exact: "a"}, {Name: "X-Ver", Regex: "^(?:v[12])$"}}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, why := lowerGRPCMatch(c.in)
			if c.why != "" {
				if !strings.Contains(why, c.why) {
					t.Errorf("why = %q; want it to say %q", why, c.why)
				}
				return
			}
			if why != "" || !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v %+v (%q)\nwant %+v %+v", got, got.Path, why, c.want, c.want.Path)
			}
		})
	}
}

func grpcTo(names ...string) []gwv1.GRPCBackendRef {
	var out []gwv1.GRPCBackendRef
	for _, h := range to(names...) {
		out = append(out, gwv1.GRPCBackendRef{BackendRef: h.BackendRef})
	}
	return out
}

func grpcMethod(svc, meth string) []gwv1.GRPCRouteMatch {
	m := &gwv1.GRPCMethodMatch{Service: &svc}
	if meth != "" {
		m.Method = &meth
	}
	return []gwv1.GRPCRouteMatch{{Method: m}}
}

// grpcSnapshot is oneRoute's Gateway with one GRPCRoute of the given
// rules for grpc.example.com, and Services users (no appProtocol),
// orders (kubernetes.io/h2c) and plain (http).
func grpcSnapshot(rules ...gwv1.GRPCRouteRule) *Snapshot {
	s := oneRoute()
	s.HTTPRoutes = nil
	s.GRPCRoutes = []*gwv1.GRPCRoute{{ObjectMeta: objMeta("a", "g", 2), Spec: gwv1.GRPCRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}},
		Hostnames:       []gwv1.Hostname{"grpc.example.com"}, Rules: rules}}}
	for i, n := range []string{"users", "orders", "plain"} {
		svc := service("a", n, 80)
		switch n {
		case "orders":
			svc.Spec.Ports[0].AppProtocol = ptr("kubernetes.io/h2c")
		case "plain":
			svc.Spec.Ports[0].AppProtocol = ptr("http")
		}
		s.Services = append(s.Services, svc)
		s.EndpointSlices = append(s.EndpointSlices, slice("a", n, ep("10.8.0."+itoa(i+1), true, true, false)))
	}
	return s
}

// A GRPCRoute as the route keys it becomes: the method matches as paths,
// header matches and filters as for HTTPRoute, and h2c pools, through the
// same validation and compile step as a file; the route table then
// chooses among its rules as GRPCRoute's precedence says.
func TestGRPCRouteTranslation(t *testing.T) {
	hdr := &gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{{Name: "X-Via", Value: "sturdy"}}}
	snap := grpcSnapshot(
		gwv1.GRPCRouteRule{Matches: grpcMethod("pkg.Users", "Get"), BackendRefs: grpcTo("users"),
			Filters: []gwv1.GRPCRouteFilter{{Type: gwv1.GRPCRouteFilterRequestHeaderModifier, RequestHeaderModifier: hdr},
				{Type: gwv1.GRPCRouteFilterResponseHeaderModifier, ResponseHeaderModifier: hdr}}}, // 0
		gwv1.GRPCRouteRule{Matches: grpcMethod("pkg.Users", ""), BackendRefs: grpcTo("users:3", "orders:1")}, // 1
		gwv1.GRPCRouteRule{Matches: []gwv1.GRPCRouteMatch{{Method: &gwv1.GRPCMethodMatch{Service: ptr("pkg.Users")},
			Headers: []gwv1.GRPCHeaderMatch{{Name: "X-Tenant", Value: "beta"}}}}, BackendRefs: grpcTo("orders"),
		}, // 2
		gwv1.GRPCRouteRule{BackendRefs: grpcTo("orders")},                                       // 3: every other call
		gwv1.GRPCRouteRule{Matches: grpcMethod("pkg.Plain", ""), BackendRefs: grpcTo("plain")},  // 4: appProtocol http
		gwv1.GRPCRouteRule{Matches: grpcMethod("pkg.Gone", ""), BackendRefs: grpcTo("missing")}, // 5
		gwv1.GRPCRouteRule{Name: ptr(gwv1.SectionName("sticky")), Matches: grpcMethod("pkg.Sticky", ""), BackendRefs: grpcTo("users"),
			SessionPersistence: &gwv1.SessionPersistence{}}, // 6: dropped
		gwv1.GRPCRouteRule{Matches: grpcMethod("pkg.Shadowed", ""), BackendRefs: grpcTo("users"),
			Filters: []gwv1.GRPCRouteFilter{{Type: gwv1.GRPCRouteFilterRequestMirror, RequestMirror: &gwv1.HTTPRequestMirrorFilter{
				BackendRef: gwv1.BackendObjectReference{Name: "orders", Port: ptr(gwv1.PortNumber(80))}}}}}, // 7: dropped
	)
	res := Translate(Input{Base: base(t), Snap: snap})
	rt := finish(t, res)
	cfg := res.Config
	if len(cfg.Listeners) != 1 || !cfg.Listeners[0].H2C {
		t.Fatalf("listeners = %+v; want port-80 speaking h2c beside HTTP/1.1", cfg.Listeners)
	}
	byName := map[string]config.Route{}
	for _, r := range cfg.Routes {
		byName[r.Name] = r
	}
	r0 := byName["grpcroute/a/g/0/0/port-80"]
	if r0.Pool != "svc/a/users/80+h2c" || r0.RequestHeaders == nil || r0.RequestHeaders.Set["X-Via"] != "sturdy" ||
		r0.ResponseHeaders == nil || r0.ResponseHeaders.Set["X-Via"] != "sturdy" || strings.Join(r0.Hosts, ",") != "grpc.example.com" {
		t.Errorf("rule 0 = %+v; want users' h2c pool, both header modifiers, grpc.example.com only", r0)
	}
	if b := byName["grpcroute/a/g/1/0/port-80"].Backends; len(b) != 2 || b[0] != (config.Backend{Pool: "svc/a/users/80+h2c", Weight: 3}) || b[1] != (config.Backend{Pool: "svc/a/orders/80+h2c", Weight: 1}) {
		t.Errorf("rule 1 backends = %+v; want users 3, orders 1", b)
	}
	for _, name := range []string{"svc/a/users/80+h2c", "svc/a/orders/80+h2c"} {
		if p := rt.Pool(name); p == nil || len(p.Hosts) != 1 {
			t.Errorf("pool %s = %+v; want its one endpoint", name, p)
		}
	}
	for _, p := range cfg.Pools {
		if strings.HasPrefix(p.Name, "svc/") && p.Protocol != config.ProtocolH2C {
			t.Errorf("pool %s speaks %s; a GRPCRoute's backends speak h2c", p.Name, p.Protocol)
		}
	}
	for _, i := range []string{"6", "7"} {
		if _, ok := byName["grpcroute/a/g/"+i+"/0/port-80"]; ok {
			t.Errorf("rule %s (sessionPersistence, RequestMirror) was served without what it asks", i)
		}
	}

	table := rt.Proxy.Listeners["port-80"].Table
	for _, c := range []struct {
		path, tenant, want string
	}{
		{"/pkg.Users/Get", "", "0"},
		{"/pkg.Users/Get", "beta", "0"}, // the method's characters before headers
		{"/pkg.Users/List", "", "1"},
		{"/pkg.Users/List", "beta", "2"},
		{"/pkg.UsersAdmin/List", "", "3"}, // a service is a whole segment
		{"/other.Svc/Do", "", "3"},
		{"/pkg.Gone/Do", "", "5"},
	} {
		req := httptest.NewRequest("POST", "http://grpc.example.com"+c.path, nil)
		req.Header.Set("Content-Type", "application/grpc")
		if c.tenant != "" {
			req.Header.Set("X-Tenant", c.tenant)
		}
		e, ok := table.MatchRequest(req)
		got := ""
		if ok {
			got = strings.Split(e.Value.Name, "/")[3]
		}
		if got != c.want {
			t.Errorf("%s (tenant %q) chose rule %q; want %q", c.path, c.tenant, got, c.want)
		}
	}
	if r := byName["grpcroute/a/g/5/0/port-80"]; r.Sorry.Status != 500 || !strings.HasSuffix(r.Pool, "/unresolved") {
		t.Errorf("the missing Service's rule = %+v; want the unresolved pool (a gRPC call gets UNAVAILABLE)", r)
	}

	st := res.GRPCRoutes[Ref{"GRPCRoute", "a", "g"}]
	if st == nil || len(st.Parents) != 1 {
		t.Fatalf("GRPCRoute status = %+v", st)
	}
	ps := st.Parents[0]
	if c := condOf(ps.Conditions, "Accepted"); c.Status != metav1.ConditionTrue || c.ObservedGeneration != 3 {
		t.Errorf("Accepted = %+v", c)
	}
	if c := condOf(ps.Conditions, "ResolvedRefs"); c.Status != metav1.ConditionFalse || c.Reason != "UnsupportedProtocol" || !strings.Contains(c.Message, "appProtocol http") {
		t.Errorf("ResolvedRefs = %+v; want UnsupportedProtocol for the port with appProtocol http", c)
	}
	if c := condOf(ps.Conditions, "PartiallyInvalid"); c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "6 sticky (sessionPersistence") || !strings.Contains(c.Message, "7 (RequestMirror") {
		t.Errorf("PartiallyInvalid = %+v; want rules 6 and 7 dropped", c)
	}
	l := res.Gateways[Ref{"Gateway", "a", "gw"}].Listeners[0]
	if l.AttachedRoutes != 1 || !slices.ContainsFunc(l.SupportedKinds, func(k gwv1.RouteGroupKind) bool { return k.Kind == "GRPCRoute" }) {
		t.Errorf("listener = %+v; want the GRPCRoute attached and GRPCRoute among the supported kinds", l)
	}
	if !slices.ContainsFunc(res.Classes["sturdy"].SupportedFeatures, func(f gwv1.SupportedFeature) bool { return f.Name == "GRPCRoute" }) {
		t.Errorf("supported features %v lack GRPCRoute", res.Classes["sturdy"].SupportedFeatures)
	}
}

// Of an HTTPRoute and a GRPCRoute with a host in common on a listener,
// Gateway API accepts exactly one, the older; a listener whose
// allowedRoutes names only HTTPRoute takes no GRPCRoute.
func TestHTTPRouteAndGRPCRouteOnOneHost(t *testing.T) {
	snap := grpcSnapshot(gwv1.GRPCRouteRule{BackendRefs: grpcTo("users")})
	snap.HTTPRoutes = []*gwv1.HTTPRoute{
		{ObjectMeta: objMeta("a", "older-web", 1), Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}},
			Hostnames:       []gwv1.Hostname{"*.example.com"}, Rules: []gwv1.HTTPRouteRule{{BackendRefs: to("web")}}}},
		{ObjectMeta: objMeta("a", "other-host", 1), Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}},
			Hostnames:       []gwv1.Hostname{"web.example.org"}, Rules: []gwv1.HTTPRouteRule{{BackendRefs: to("web")}}}},
	}
	younger := snap.GRPCRoutes[0].DeepCopy()
	younger.Name, younger.CreationTimestamp = "younger-grpc", metav1.NewTime(snap.GRPCRoutes[0].CreationTimestamp.Add(1e9))
	younger.Spec.Hostnames = []gwv1.Hostname{"grpc.example.org"}
	snap.GRPCRoutes = append(snap.GRPCRoutes, younger)
	res := Translate(Input{Base: base(t), Snap: snap})
	finish(t, res)
	if c := condOf(res.GRPCRoutes[Ref{"GRPCRoute", "a", "g"}].Parents[0].Conditions, "Accepted"); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "HTTPRoute a/older-web") {
		t.Errorf("the GRPCRoute sharing *.example.com with an older HTTPRoute: Accepted = %+v; want False naming it", c)
	}
	if c := condOf(res.GRPCRoutes[Ref{"GRPCRoute", "a", "younger-grpc"}].Parents[0].Conditions, "Accepted"); c.Status != metav1.ConditionTrue {
		t.Errorf("a GRPCRoute with hosts of its own: Accepted = %+v", c)
	}
	for _, r := range res.Config.Routes {
		if strings.HasPrefix(r.Name, "grpcroute/a/g/") {
			t.Errorf("the refused GRPCRoute is served: %s", r.Name)
		}
	}
	if n := res.Gateways[Ref{"Gateway", "a", "gw"}].Listeners[0].AttachedRoutes; n != 3 {
		t.Errorf("attachedRoutes = %d; want 3 (two HTTPRoutes, one GRPCRoute)", n)
	}

	snap = grpcSnapshot(gwv1.GRPCRouteRule{BackendRefs: grpcTo("users")})
	group := gwv1.Group(gatewayGroup)
	snap.Gateways[0].Spec.Listeners[0].AllowedRoutes = &gwv1.AllowedRoutes{Kinds: []gwv1.RouteGroupKind{{Group: &group, Kind: "HTTPRoute"}}}
	res = Translate(Input{Base: base(t), Snap: snap})
	if c := condOf(res.GRPCRoutes[Ref{"GRPCRoute", "a", "g"}].Parents[0].Conditions, "Accepted"); c.Status != metav1.ConditionFalse || c.Reason != "NotAllowedByListeners" {
		t.Errorf("a GRPCRoute on a listener of HTTPRoutes only: Accepted = %+v", c)
	}
	if k := res.Gateways[Ref{"Gateway", "a", "gw"}].Listeners[0].SupportedKinds; len(k) != 1 || k[0].Kind != "HTTPRoute" {
		t.Errorf("supportedKinds = %+v; want HTTPRoute alone", k)
	}
}

// An HTTPRoute's backend whose port says kubernetes.io/h2c gets an h2c
// pool; one whose appProtocol sturdy does not speak is UnsupportedProtocol.
func TestHTTPRouteBackendAppProtocol(t *testing.T) {
	snap := oneRoute(gwv1.HTTPRouteRule{BackendRefs: to("web")}, gwv1.HTTPRouteRule{Matches: prefixMatch("/ws"), BackendRefs: to("api")})
	snap.Services[0].Spec.Ports[0].AppProtocol = ptr("kubernetes.io/h2c")
	snap.Services[1].Spec.Ports[0].AppProtocol = ptr("kubernetes.io/wss")
	res := Translate(Input{Base: base(t), Snap: snap})
	rt := finish(t, res)
	if p := rt.Pool("svc/a/web/80+h2c"); p == nil || len(p.Hosts) != 1 {
		t.Errorf("web's h2c pool = %+v", p)
	}
	if i := slices.IndexFunc(res.Config.Pools, func(p config.Pool) bool { return p.Name == "svc/a/web/80+h2c" }); i < 0 || res.Config.Pools[i].Protocol != config.ProtocolH2C {
		t.Errorf("pools = %+v; want web's speaking h2c", res.Config.Pools)
	}
	if c := condOf(res.Routes[Ref{"HTTPRoute", "a", "r"}].Parents[0].Conditions, "ResolvedRefs"); c.Reason != "UnsupportedProtocol" {
		t.Errorf("ResolvedRefs = %+v; want UnsupportedProtocol for kubernetes.io/wss", c)
	}
}

// backend-protocol GRPC is an h2c pool, GRPCS HTTP/2 over TLS without
// verifying the pods' certificates, as ingress-nginx does.
func TestIngressBackendProtocolGRPC(t *testing.T) {
	a := func(v string) map[string]string { return map[string]string{nginxPrefix + "backend-protocol": v} }
	snap := &Snapshot{
		Services:       []*corev1.Service{service("app", "rpc", 80), service("app", "rpcs", 80)},
		EndpointSlices: []*discoveryv1.EndpointSlice{slice("app", "rpc", ep("10.1.0.1", true, true, false)), slice("app", "rpcs", ep("10.1.0.2", true, true, false))},
		Ingresses: []*networkingv1.Ingress{
			ingress("app", "rpc", a("GRPC"), "rpc.example.com", "/", "rpc", ""),
			ingress("app", "rpcs", a("grpcs"), "rpcs.example.com", "/", "rpcs", ""),
			ingress("app", "ajp", a("AJP"), "ajp.example.com", "/", "rpc", ""),
		},
	}
	res := Translate(Input{Base: base(t), Snap: snap})
	rt := finish(t, res)
	pools := map[string]config.Pool{}
	for _, p := range res.Config.Pools {
		pools[p.Name] = p
	}
	if p, ok := pools["svc/app/rpc/80+h2c"]; !ok || p.Protocol != config.ProtocolH2C || p.TLS != nil {
		t.Errorf("GRPC pool = %+v; want h2c without TLS (pools %v)", p, res.Config.Pools)
	}
	if p, ok := pools["svc/app/rpcs/80+https+h2"]; !ok || p.Protocol != config.ProtocolH2 || p.TLS == nil || !p.TLS.InsecureSkipVerify {
		t.Errorf("GRPCS pool = %+v; want h2 over TLS, unverified (pools %v)", p, res.Config.Pools)
	}
	if p := rt.Pool("svc/app/rpc/80+h2c"); p == nil || len(p.Hosts) != 1 {
		t.Errorf("compiled GRPC pool = %+v", p)
	}
	if l := res.Config.Listeners; len(l) != 1 || l[0].Name != "port-80" || !l[0].H2C {
		t.Errorf("listeners = %+v; want port 80 speaking h2c, for gRPC clients without TLS", l)
	}
	if r := res.Ingresses[Ref{"Ingress", "app", "ajp"}]; r.Served || !strings.Contains(strings.Join(r.Events, "\n"), "AJP is not supported") {
		t.Errorf("backend-protocol AJP: served=%v events=%v; want it refused, with an event", r.Served, r.Events)
	}
}
