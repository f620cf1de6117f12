package kube

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sturdyproxy/sturdy/internal/compile"
	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/testing/testpki"
)

func ptr[T any](v T) *T { return &v }

func objMeta(ns, name string, age int) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 3,
		CreationTimestamp: metav1.NewTime(time.Unix(1_700_000_000+int64(age), 0))}
}

func service(ns, name string, port int32) *corev1.Service {
	return &corev1.Service{ObjectMeta: objMeta(ns, name, 0), Spec: corev1.ServiceSpec{
		Ports: []corev1.ServicePort{{Name: "http", Port: port, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}}}
}

func slice(ns, svc string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: svc + "-abc", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080)), Protocol: ptr(corev1.ProtocolTCP)}},
		Endpoints:   eps,
	}
}

func ep(addr string, ready, serving, terminating bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating}}
}

func base(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte("admin: { listen: 127.0.0.1:0 }\nkubernetes: { ports: [ { port: 80, listen: 127.0.0.1:0 }, { port: 443, listen: 127.0.0.1:0 } ] }\n"), "sturdy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// finish runs the translation's config through the same validation and
// compile step as a file, as the server does.
func finish(t *testing.T, res *Result) *compile.Runtime {
	t.Helper()
	if err := res.Config.Finish(); err != nil {
		t.Fatalf("the translated config does not validate:\n%v", err)
	}
	rt, err := compile.Compile(res.Config, nil, compile.Env{})
	if err != nil {
		t.Fatalf("the translated config does not compile:\n%v", err)
	}
	t.Cleanup(rt.Close)
	return rt
}

func condOf(cs []metav1.Condition, typ string) metav1.Condition {
	for _, c := range cs {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{Type: typ, Status: "absent"}
}

func gatewaySnapshot(t *testing.T) *Snapshot {
	ca := testpki.NewCA(t, "test CA")
	crt, key := ca.Issue(t, testpki.Leaf{DNS: []string{"shop.example.com"}})
	return &Snapshot{
		GatewayClasses: []*gwv1.GatewayClass{
			{ObjectMeta: objMeta("", "sturdy", 0), Spec: gwv1.GatewayClassSpec{ControllerName: config.DefaultControllerName}},
			{ObjectMeta: objMeta("", "other", 0), Spec: gwv1.GatewayClassSpec{ControllerName: "example.com/other"}},
		},
		Gateways: []*gwv1.Gateway{
			{ObjectMeta: objMeta("infra", "web", 0), Spec: gwv1.GatewaySpec{GatewayClassName: "sturdy", Listeners: []gwv1.Listener{
				{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr(gwv1.NamespacesFromAll)}}},
				{Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: ptr(gwv1.Hostname("*.example.com")),
					AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr(gwv1.NamespacesFromAll)}},
					TLS:           &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "shop-tls"}, {Name: "missing"}}}},
				{Name: "tcp", Port: 9000, Protocol: gwv1.TCPProtocolType},
			}}},
			{ObjectMeta: objMeta("infra", "theirs", 0), Spec: gwv1.GatewaySpec{GatewayClassName: "other", Listeners: []gwv1.Listener{{Name: "http", Port: 81, Protocol: gwv1.HTTPProtocolType}}}},
		},
		HTTPRoutes: []*gwv1.HTTPRoute{
			{ObjectMeta: objMeta("shop", "shop", 1), Spec: gwv1.HTTPRouteSpec{
				CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "web", Namespace: ptr(gwv1.Namespace("infra")), SectionName: ptr(gwv1.SectionName("https"))}}},
				Hostnames:       []gwv1.Hostname{"shop.example.com", "shop.other.org"},
				Rules: []gwv1.HTTPRouteRule{
					{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchPathPrefix), Value: ptr("/cart")}}},
						BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "cart", Port: ptr(gwv1.PortNumber(80))}}}}},
					{Matches: []gwv1.HTTPRouteMatch{{Headers: []gwv1.HTTPHeaderMatch{{Name: "X-Beta", Value: "1"}}}},
						BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "cart", Port: ptr(gwv1.PortNumber(80))}}}}},
					{BackendRefs: []gwv1.HTTPBackendRef{
						{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: ptr(gwv1.PortNumber(80))}, Weight: ptr(int32(90))}},
						{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "web-canary", Port: ptr(gwv1.PortNumber(80))}, Weight: ptr(int32(10))}},
					}},
				}}},
			{ObjectMeta: objMeta("shop", "to-https", 2), Spec: gwv1.HTTPRouteSpec{
				CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "web", Namespace: ptr(gwv1.Namespace("infra")), SectionName: ptr(gwv1.SectionName("http"))}}},
				Rules: []gwv1.HTTPRouteRule{{Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestRedirect,
					RequestRedirect: &gwv1.HTTPRequestRedirectFilter{Scheme: ptr("https"), StatusCode: ptr(301)}}}}},
			}},
			{ObjectMeta: objMeta("shop", "cross-ns", 3), Spec: gwv1.HTTPRouteSpec{
				CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "web", Namespace: ptr(gwv1.Namespace("infra")), SectionName: ptr(gwv1.SectionName("https"))}}},
				Hostnames:       []gwv1.Hostname{"admin.example.com"},
				Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
					Name: "admin", Namespace: ptr(gwv1.Namespace("ops")), Port: ptr(gwv1.PortNumber(80))}}}}}},
			}},
			{ObjectMeta: objMeta("shop", "not-ours", 4), Spec: gwv1.HTTPRouteSpec{
				CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "theirs", Namespace: ptr(gwv1.Namespace("infra"))}}}}},
		},
		Services: []*corev1.Service{service("shop", "cart", 80), service("shop", "web", 80), service("shop", "web-canary", 80), service("ops", "admin", 80)},
		EndpointSlices: []*discoveryv1.EndpointSlice{
			slice("shop", "cart", ep("10.0.0.1", true, true, false), ep("10.0.0.2", false, false, false), ep("10.0.0.3", false, true, true)),
			slice("shop", "web", ep("10.0.1.1", true, true, false), ep("10.0.1.2", true, true, false)),
			slice("shop", "web-canary", ep("10.0.2.1", true, true, false)),
			slice("ops", "admin", ep("10.0.3.1", true, true, false)),
		},
		Secrets: []*corev1.Secret{{ObjectMeta: objMeta("infra", "shop-tls", 0), Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}},
	}
}

func TestGatewayTranslation(t *testing.T) {
	res := Translate(Input{Base: base(t), Snap: gatewaySnapshot(t)})
	rt := finish(t, res)
	cfg := res.Config

	if len(cfg.Listeners) != 2 || cfg.Listeners[0].Name != "port-80" || cfg.Listeners[1].Name != "port-443" {
		t.Fatalf("listeners = %+v; want port-80 and port-443 (the TCP listener and the other class's Gateway are not served)", cfg.Listeners)
	}
	if tl := rt.Listener("port-443").TLS; tl == nil || !tl.Store.Covers("shop.example.com") {
		t.Errorf("port 443 has no certificate for shop.example.com")
	}
	byName := map[string]config.Route{}
	for _, r := range cfg.Routes {
		byName[r.Name] = r
	}
	if r := byName["httproute/shop/to-https/0/0/port-80"].Redirect; r == nil || r.Status != 301 || r.Scheme != "https" || r.Port != 0 {
		t.Errorf("port 80 redirect = %+v; want the HTTPRoute's redirect to HTTPS, 301, on the well-known port", r)
	}
	cart := byName["httproute/shop/shop/0/0/port-443"]
	if cart.Match.Path.Prefix != "/cart" || cart.Pool != "svc/shop/cart/80" || strings.Join(cart.Hosts, ",") != "shop.example.com" {
		t.Errorf("cart route = %+v; want /cart on shop.example.com only (shop.other.org is outside the listener's *.example.com)", cart)
	}
	if h := byName["httproute/shop/shop/1/0/port-443"].Match; h == nil || len(h.Headers) != 1 || h.Headers[0] != (config.ValueMatch{Name: "X-Beta", Exact: "1"}) || h.Path.Prefix != "/" {
		t.Errorf("the header-match rule = %+v; want prefix / with X-Beta: 1", h)
	}
	if p := rt.Pool("svc/shop/cart/80"); p == nil || len(p.Hosts) != 1 || p.Hosts[0].Addr != "10.0.0.1:8080" {
		t.Errorf("cart pool = %+v; want only the ready endpoint", p)
	}
	// Each Service keeps its own pool and health model; the route splits.
	split := byName["httproute/shop/shop/2/0/port-443"]
	if b := split.Backends; len(b) != 2 || b[0] != (config.Backend{Pool: "svc/shop/web/80", Weight: 90}) || b[1] != (config.Backend{Pool: "svc/shop/web-canary/80", Weight: 10}) || split.Pool != "" {
		t.Errorf("weighted rule = %+v; want backends web 90, web-canary 10", split)
	}
	if p := rt.Pool("svc/shop/web/80"); p == nil || len(p.Hosts) != 2 {
		t.Errorf("web pool = %+v; want its two pods", p)
	}
	if _, ok := byName["httproute/shop/cross-ns/0/0/port-443"]; ok {
		if p := rt.Pool(byName["httproute/shop/cross-ns/0/0/port-443"].Pool); p != nil && len(p.Hosts) > 0 {
			t.Error("a Service in another namespace was used without a ReferenceGrant")
		}
	}

	shop := res.Routes[Ref{"HTTPRoute", "shop", "shop"}].Parents[0]
	if c := condOf(shop.Conditions, "Accepted"); c.Status != metav1.ConditionTrue || c.ObservedGeneration != 3 {
		t.Errorf("shop Accepted = %+v", c)
	}
	if c := condOf(shop.Conditions, "PartiallyInvalid"); c.Status != "absent" {
		t.Errorf("shop PartiallyInvalid = %+v; every rule is served", c)
	}
	cross := res.Routes[Ref{"HTTPRoute", "shop", "cross-ns"}].Parents[0]
	if c := condOf(cross.Conditions, "ResolvedRefs"); c.Status != metav1.ConditionFalse || c.Reason != "RefNotPermitted" {
		t.Errorf("cross-ns ResolvedRefs = %+v", c)
	}
	if _, ok := res.Routes[Ref{"HTTPRoute", "shop", "not-ours"}]; ok {
		t.Error("a route of another controller's Gateway got a status from sturdy")
	}
	gw := res.Gateways[Ref{"Gateway", "infra", "web"}]
	if c := condOf(gw.Conditions, "Accepted"); c.Status != metav1.ConditionTrue || c.Reason != "ListenersNotValid" {
		t.Errorf("Gateway Accepted = %+v; want True with ListenersNotValid (the TCP listener)", c)
	}
	https := gw.Listeners[1]
	if c := condOf(https.Conditions, "ResolvedRefs"); c.Status != metav1.ConditionFalse || c.Reason != "InvalidCertificateRef" {
		t.Errorf("https listener ResolvedRefs = %+v; the missing Secret must show", c)
	}
	if c := condOf(https.Conditions, "Programmed"); c.Status != metav1.ConditionTrue {
		t.Errorf("https listener Programmed = %+v; one good certificate serves", c)
	}
	if https.AttachedRoutes != 2 {
		t.Errorf("https attachedRoutes = %d, want 2", https.AttachedRoutes)
	}
	if c := condOf(gw.Listeners[2].Conditions, "Accepted"); c.Reason != "UnsupportedProtocol" {
		t.Errorf("tcp listener Accepted = %+v", c)
	}
	// The conformance suite's GatewayListenerUnsupportedProtocol: no kind
	// is supported on a listener nothing serves.
	if k := gw.Listeners[2].SupportedKinds; k == nil || len(k) != 0 {
		t.Errorf("tcp listener supportedKinds = %v; want empty", k)
	}
	if _, ok := res.Gateways[Ref{"Gateway", "infra", "theirs"}]; ok {
		t.Error("sturdy wrote status for another controller's Gateway")
	}
	if len(res.Classes) != 1 || len(res.Classes["sturdy"].SupportedFeatures) == 0 {
		t.Errorf("classes = %v", res.Classes)
	}
}

// A grant in the Service's namespace lets the route use it.
func TestReferenceGrantAllowsCrossNamespaceBackend(t *testing.T) {
	snap := gatewaySnapshot(t)
	snap.ReferenceGrants = []*gwv1.ReferenceGrant{{ObjectMeta: objMeta("ops", "from-shop", 0), Spec: gwv1.ReferenceGrantSpec{
		From: []gwv1.ReferenceGrantFrom{{Group: gatewayGroup, Kind: "HTTPRoute", Namespace: "shop"}},
		To:   []gwv1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
	}}}
	res := Translate(Input{Base: base(t), Snap: snap})
	rt := finish(t, res)
	if p := rt.Pool("svc/ops/admin/80"); p == nil || len(p.Hosts) != 1 {
		t.Fatalf("admin pool = %+v", p)
	}
	cross := res.Routes[Ref{"HTTPRoute", "shop", "cross-ns"}].Parents[0]
	if c := condOf(cross.Conditions, "ResolvedRefs"); c.Status != metav1.ConditionTrue {
		t.Errorf("ResolvedRefs = %+v", c)
	}
}

func TestEndpointConditions(t *testing.T) {
	x := newIndex(&Snapshot{EndpointSlices: []*discoveryv1.EndpointSlice{
		slice("a", "s", ep("10.0.0.1", false, true, true), ep("10.0.0.2", false, true, true), ep("10.0.0.3", false, false, false)),
	}})
	sp := &service("a", "s", 80).Spec.Ports[0]
	hosts := x.endpoints(Ref{"Service", "a", "s"}, sp)
	if len(hosts) != 2 {
		t.Errorf("with no ready endpoint, the serving terminating ones serve: got %v", hosts)
	}
	x.snap.EndpointSlices[0].Endpoints = append(x.snap.EndpointSlices[0].Endpoints, ep("10.0.0.4", true, true, false))
	x = newIndex(x.snap)
	if hosts := x.endpoints(Ref{"Service", "a", "s"}, sp); len(hosts) != 1 || hosts[0].Addr != "10.0.0.4:8080" {
		t.Errorf("with a ready endpoint, only it serves: got %v", hosts)
	}
}

func ingress(ns, name string, ann map[string]string, host, path, svc string, tlsSecret string) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{ObjectMeta: objMeta(ns, name, 10), Spec: networkingv1.IngressSpec{
		IngressClassName: ptr("sturdy"),
		Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: path, PathType: ptr(networkingv1.PathTypePrefix), Backend: networkingv1.IngressBackend{
				Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Name: "http"}}}}}}}}},
	}}
	ing.Annotations = ann
	if tlsSecret != "" {
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{host}, SecretName: tlsSecret}}
	}
	return ing
}

func TestIngressAnnotations(t *testing.T) {
	ca := testpki.NewCA(t, "test CA")
	crt, key := ca.Issue(t, testpki.Leaf{DNS: []string{"app.example.com"}})
	a := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[nginxPrefix+kv[i]] = kv[i+1]
		}
		return m
	}
	snap := &Snapshot{
		Services: []*corev1.Service{service("app", "app", 80), service("app", "app-v2", 80)},
		EndpointSlices: []*discoveryv1.EndpointSlice{
			slice("app", "app", ep("10.1.0.1", true, true, false)),
			slice("app", "app-v2", ep("10.1.0.2", true, true, false)),
		},
		Secrets: []*corev1.Secret{{ObjectMeta: objMeta("app", "app-tls", 0), Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}},
		Ingresses: []*networkingv1.Ingress{
			ingress("app", "app", a("proxy-body-size", "8m", "proxy-connect-timeout", "3", "proxy-read-timeout", "120",
				"limit-rps", "10", "whitelist-source-range", "10.0.0.0/8, 192.0.2.7", "auth-url", "http://auth.app.svc.cluster.local/check",
				"backend-protocol", "HTTPS", "affinity", "cookie", "proxy-send-timeout", "60", "frobnicate", "yes"),
				"app.example.com", "/", "app", "app-tls"),
			ingress("app", "app-canary", a("canary", "true", "canary-weight", "20"), "app.example.com", "/", "app-v2", ""),
			ingress("app", "snippet", a("server-snippet", "return 200;"), "snip.example.com", "/", "app", ""),
			ingress("app", "rewrite", a("rewrite-target", "/$2"), "rw.example.com", "/api(/|$)(.*)", "app", ""),
			ingress("app", "elsewhere", nil, "x.example.com", "/", "app", ""),
		},
	}
	snap.Ingresses[4].Spec.IngressClassName = ptr("nginx")
	snap.Ingresses[3].Spec.Rules[0].HTTP.Paths[0].PathType = ptr(networkingv1.PathTypeImplementationSpecific)
	res := Translate(Input{Base: base(t), Snap: snap})
	rt := finish(t, res)
	cfg := res.Config
	byName := map[string]config.Route{}
	for _, r := range cfg.Routes {
		byName[r.Name] = r
	}
	app := byName["ingress/app/app/1"]
	if app.MaxBodyBytes != 8<<20 || app.Timeouts.Connect.D() != 3*time.Second || app.Timeouts.ResponseHeader.D() != 120*time.Second {
		t.Errorf("body and timeouts not translated: %+v", app)
	}
	if len(app.RateLimit) != 1 || app.RateLimit[0].Burst != 50 || len(cfg.RateLimitZones) != 1 || cfg.RateLimitZones[0].Rate.N != 10 {
		t.Errorf("limit-rps not translated: %+v %+v", app.RateLimit, cfg.RateLimitZones)
	}
	if len(app.Access) != 3 || app.Access[2].Deny != "all" {
		t.Errorf("whitelist-source-range not translated: %+v", app.Access)
	}
	if app.ForwardAuth == nil || app.ForwardAuth.URL != "http://auth.app.svc.cluster.local/check" {
		t.Errorf("auth-url not translated: %+v", app.ForwardAuth)
	}
	if strings.Join(app.Listeners, ",") != "port-443" || app.Match.Path.Prefix != "/" {
		t.Errorf("route = %+v; with TLS and ssl-redirect (the default) port 80 redirects, and Prefix / is a prefix", app)
	}
	if r := byName["ingress/app/app/1/to-https"]; strings.Join(r.Listeners, ",") != "port-80" || r.Redirect == nil || r.Redirect.Status != 308 || r.Redirect.Scheme != "https" || r.Pool != "" {
		t.Errorf("port 80 route = %+v; want a 308 redirect to HTTPS", r)
	}
	// The canary: 20 of 100 to app-v2's pool, each Service its own pool.
	if b := app.Backends; len(b) != 2 || b[0].Weight != 80 || b[1].Weight != 20 || !strings.HasPrefix(b[1].Pool, "svc/app/app-v2/80") {
		t.Fatalf("backends = %+v; want 80 to app, 20 to the canary", b)
	}
	p := rt.Pool(app.Backends[0].Pool)
	if p == nil || p.Balance() != config.BalanceHash || len(p.Hosts) != 1 {
		t.Fatalf("pool = %+v; want hashing (affinity: cookie) over the main pod", p)
	}
	for _, c := range cfg.Pools {
		if c.Name == app.Backends[0].Pool && (c.TLS == nil || !c.TLS.InsecureSkipVerify) {
			t.Errorf("backend-protocol HTTPS not translated: %+v", c.TLS)
		}
	}
	rw := byName["ingress/app/rewrite/1"]
	if m := rw.Match.Path; m.Regex != "^/api(/|$)(.*)" || !m.CaseInsensitive || rw.Rewrite == nil || rw.Rewrite.Path != "/$2" || rw.Rewrite.Regex != m.Regex {
		t.Errorf("rewrite-target route = %+v %+v; want nginx's location ~* and rewrite ... break", rw.Match.Path, rw.Rewrite)
	}
	events := strings.Join(res.Ingresses[Ref{"Ingress", "app", "app"}].Events, "\n")
	for _, want := range []string{"frobnicate is not understood", "proxy-send-timeout has no counterpart", "does not set that cookie"} {
		if !strings.Contains(events, want) {
			t.Errorf("events lack %q:\n%s", want, events)
		}
	}
	for _, name := range []string{"snippet"} {
		r := res.Ingresses[Ref{"Ingress", "app", name}]
		if r.Served || !strings.Contains(strings.Join(r.Events, "\n"), "not served") {
			t.Errorf("%s: served=%v events=%v; it must be refused, and say so", name, r.Served, r.Events)
		}
		for _, rc := range cfg.Routes {
			if strings.HasPrefix(rc.Name, "ingress/app/"+name+"/") {
				t.Errorf("refused Ingress %s was served", name)
			}
		}
	}
	if _, ok := res.Ingresses[Ref{"Ingress", "app", "elsewhere"}]; ok {
		t.Error("an Ingress of another class was translated")
	}
}

// Two Ingresses claiming one host and path: the older keeps it, and the
// config still validates (the file's check would refuse a duplicate).
func TestConflictOldestWins(t *testing.T) {
	snap := &Snapshot{
		Services:       []*corev1.Service{service("a", "one", 80), service("a", "two", 80)},
		EndpointSlices: []*discoveryv1.EndpointSlice{slice("a", "one", ep("10.2.0.1", true, true, false)), slice("a", "two", ep("10.2.0.2", true, true, false))},
		Ingresses: []*networkingv1.Ingress{
			ingress("a", "young", nil, "h.example.com", "/", "two", ""),
			ingress("a", "old", nil, "h.example.com", "/", "one", ""),
		},
	}
	snap.Ingresses[1].CreationTimestamp = metav1.NewTime(time.Unix(1_600_000_000, 0))
	res := Translate(Input{Base: base(t), Snap: snap})
	finish(t, res)
	if len(res.Config.Routes) != 1 || res.Config.Routes[0].Pool != "svc/a/one/80" {
		t.Errorf("routes = %+v; want only the older Ingress's", res.Config.Routes)
	}
}

// A compile error is laid at the door of the object its key path came
// from; an error in the file's own part blames no object.
func TestBlame(t *testing.T) {
	origins := map[string]Ref{
		"routes[3]":                        {"HTTPRoute", "a", "r"},
		"listeners[1].tls.certificates[0]": {"Secret", "a", "s"},
	}
	err := config.ErrorList{
		{Path: "routes[3].pool", Msg: "no pool"},
		{Path: "listeners[1].tls.certificates[0]", Msg: "bad key"},
	}
	got := blame(err, origins)
	if got[Ref{"HTTPRoute", "a", "r"}] != "routes[3].pool: no pool" || got[Ref{"Secret", "a", "s"}] == "" || len(got) != 2 {
		t.Errorf("blame = %v", got)
	}
	if got := blame(append(err, config.Error{Path: "admin.listen", Msg: "bad"}), origins); got != nil {
		t.Errorf("an error of the file's part blamed %v", got)
	}
	if got := blame(config.ErrorList{{Path: "routes[30].pool"}}, origins); got != nil {
		t.Errorf("routes[30] is not routes[3]: %v", got)
	}
}
