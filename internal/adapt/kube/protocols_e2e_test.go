package kube

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"golang.org/x/net/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// grpcEcho is a grpc-go TestService that says which backend answered and
// what x-via metadata it was sent.
type grpcEcho struct {
	testpb.UnimplementedTestServiceServer
	name string
}

func (s *grpcEcho) UnaryCall(ctx context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	grpc.SetHeader(ctx, metadata.Pairs("x-backend", s.name, "x-seen-via", strings.Join(md.Get("x-via"), ",")))
	return &testpb.SimpleResponse{Payload: in.GetPayload()}, nil
}

func (s *grpcEcho) EmptyCall(ctx context.Context, _ *testpb.Empty) (*testpb.Empty, error) {
	grpc.SetHeader(ctx, metadata.Pairs("x-backend", s.name))
	return &testpb.Empty{}, nil
}

// grpcBackend serves grpcEcho (h2c, or TLS with creds) behind the
// documentation address docAddr; stop ends it (the pod is gone).
func (f *fleet) grpcBackend(t *testing.T, docAddr, name string, opts ...grpc.ServerOption) (echo *grpcEcho, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	echo = &grpcEcho{name: name}
	testpb.RegisterTestServiceServer(srv, echo)
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	var once sync.Once
	stop = func() { once.Do(func() { srv.Stop(); <-done }) }
	t.Cleanup(stop)
	f.mu.Lock()
	f.addr[docAddr] = ln.Addr().String()
	f.mu.Unlock()
	return echo, stop
}

// grpcClient calls sturdy's listener at addr for host, over h2c.
func grpcClient(t *testing.T, addr, host string) testpb.TestServiceClient {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority(host))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return testpb.NewTestServiceClient(cc)
}

// unary makes one call and returns the answering backend's headers.
func unary(c testpb.TestServiceClient, md ...string) (metadata.MD, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	var h metadata.MD
	_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("ping")}}, grpc.Header(&h))
	return h, err
}

func first(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// grpcTries are unary calls from each client, wanting an answer from a
// backend want accepts.
func grpcTries(clients []testpb.TestServiceClient, want func(backend string) bool) []func() error {
	var tries []func() error
	for _, c := range clients {
		tries = append(tries, func() error {
			h, err := unary(c)
			if err != nil || !want(first(h, "x-backend")) {
				return fmt.Errorf("%q %v", first(h, "x-backend"), err)
			}
			return nil
		})
	}
	return tries
}

func grpcRef(name string, weight int32) gwv1.GRPCBackendRef {
	return gwv1.GRPCBackendRef{BackendRef: gwv1.BackendRef{Weight: &weight,
		BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name), Port: ptr(gwv1.PortNumber(80))}}}
}

// A GRPCRoute on a real API server makes sturdy route real gRPC calls
// from grpc-go clients to grpc-go backends: method and header matches,
// header modifiers, an unresolved backend answered UNAVAILABLE; an
// endpoint removed and a route changed under load fail no call; the
// status conditions, the listener's attached routes and kinds and the
// GatewayClass's features are written.
func TestGRPCRouteServesAndUpdatesWithoutFailures(t *testing.T) {
	c := env.Cluster(t)
	ns := c.Namespace(t, "grpc-e2e")
	ctx := context.Background()
	gc := must(gwclient.NewForConfig(c.Config))
	f := &fleet{addr: map[string]string{}}
	f.grpcBackend(t, "192.0.2.31:8080", "users-a")
	_, stopB := f.grpcBackend(t, "192.0.2.32:8080", "users-b")
	f.grpcBackend(t, "192.0.2.41:8080", "orders")

	users, orders := svcObj(ns, "users"), svcObj(ns, "orders")
	orders.Spec.Ports[0].AppProtocol = ptr("kubernetes.io/h2c")
	must(c.Client.CoreV1().Services(ns).Create(ctx, users, metav1.CreateOptions{}))
	must(c.Client.CoreV1().Services(ns).Create(ctx, orders, metav1.CreateOptions{}))
	must(c.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, sliceObj(ns, "users", "192.0.2.31", "192.0.2.32"), metav1.CreateOptions{}))
	must(c.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, sliceObj(ns, "orders", "192.0.2.41"), metav1.CreateOptions{}))
	class := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: gwv1.GatewayClassSpec{ControllerName: gwv1.GatewayController("sturdyproxy.io/" + ns)}}
	must(gc.GatewayV1().GatewayClasses().Create(ctx, class, metav1.CreateOptions{}))
	t.Cleanup(func() { gc.GatewayV1().GatewayClasses().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	ca := testpkiCA(t)
	crt, key := ca.Issue(t, leaf("grpc.example.com"))
	must(c.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "grpc-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}, metav1.CreateOptions{}))
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "grpc"}, Spec: gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(ns),
		Listeners: []gwv1.Listener{
			{Name: "h2c", Port: 80, Protocol: gwv1.HTTPProtocolType},
			{Name: "tls", Port: 443, Protocol: gwv1.HTTPSProtocolType,
				TLS: &gwv1.ListenerTLSConfig{Mode: ptr(gwv1.TLSModeTerminate), CertificateRefs: []gwv1.SecretObjectReference{{Name: "grpc-tls"}}}},
		}}}
	must(gc.GatewayV1().Gateways(ns).Create(ctx, gw, metav1.CreateOptions{}))
	svc, unaryCall := "grpc.testing.TestService", "UnaryCall"
	hdr := func(name, value string) *gwv1.HTTPHeaderFilter {
		return &gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{{Name: gwv1.HTTPHeaderName(name), Value: value}}}
	}
	route := &gwv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "users"}, Spec: gwv1.GRPCRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "grpc"}}},
		Hostnames:       []gwv1.Hostname{"grpc.example.com"},
		Rules: []gwv1.GRPCRouteRule{
			{Name: ptr(gwv1.SectionName("unary")), Matches: []gwv1.GRPCRouteMatch{{Method: &gwv1.GRPCMethodMatch{Service: &svc, Method: &unaryCall}}},
				Filters: []gwv1.GRPCRouteFilter{
					{Type: gwv1.GRPCRouteFilterRequestHeaderModifier, RequestHeaderModifier: hdr("x-via", "sturdy")},
					{Type: gwv1.GRPCRouteFilterResponseHeaderModifier, ResponseHeaderModifier: hdr("x-route", "users")},
				},
				BackendRefs: []gwv1.GRPCBackendRef{grpcRef("users", 1)}},
			{Name: ptr(gwv1.SectionName("beta")), Matches: []gwv1.GRPCRouteMatch{{Method: &gwv1.GRPCMethodMatch{Service: &svc}, Headers: []gwv1.GRPCHeaderMatch{{Name: "x-tenant", Value: "beta"}}}},
				BackendRefs: []gwv1.GRPCBackendRef{grpcRef("orders", 1)}},
		},
	}}
	must(gc.GatewayV1().GRPCRoutes(ns).Create(ctx, route, metav1.CreateOptions{}))
	broken := &gwv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "broken"}, Spec: gwv1.GRPCRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "grpc"}}},
		Hostnames:       []gwv1.Hostname{"broken.example.com"},
		Rules:           []gwv1.GRPCRouteRule{{BackendRefs: []gwv1.GRPCBackendRef{grpcRef("missing", 1)}}},
	}}
	must(gc.GatewayV1().GRPCRoutes(ns).Create(ctx, broken, metav1.CreateOptions{}))

	srv, ctl := sturdyFor(t, c, ns, f, "replica-a")
	waitFor(t, "the first sync", 30*time.Second, func() bool {
		ok, _ := ctl.Ready()
		return ok && srv.Addr("port-80") != "" && srv.Addr("port-443") != ""
	})
	addr := srv.Addr("port-80")
	cl := grpcClient(t, addr, "grpc.example.com")
	seen := map[string]bool{}
	waitFor(t, "both users pods answer gRPC calls", 10*time.Second, func() bool {
		if h, err := unary(cl); err == nil {
			seen[first(h, "x-backend")] = true
		}
		return seen["users-a"] && seen["users-b"]
	})
	h, err := unary(cl)
	if err != nil || first(h, "x-seen-via") != "sturdy" || first(h, "x-route") != "users" {
		t.Errorf("UnaryCall: %v, headers %v; want x-via sent to the backend and x-route added to the answer", err, h)
	}
	if h, err := unary(cl, "x-tenant", "beta"); err == nil {
		// The method's characters rank before the header: rule 0 still.
		if b := first(h, "x-backend"); !strings.HasPrefix(b, "users-") {
			t.Errorf("UnaryCall with x-tenant: beta went to %q; the exact method outranks a service and a header", b)
		}
	} else {
		t.Errorf("UnaryCall with x-tenant: %v", err)
	}
	empty := func(md ...string) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var h metadata.MD
		_, err := cl.EmptyCall(metadata.AppendToOutgoingContext(ctx, md...), &testpb.Empty{}, grpc.Header(&h))
		return first(h, "x-backend"), err
	}
	if b, err := empty("x-tenant", "beta"); err != nil || b != "orders" {
		t.Errorf("EmptyCall with x-tenant: beta reached %q (%v); want orders, by the service and header match", b, err)
	}
	if b, err := empty(); status.Code(err) != codes.Unimplemented || b != "" {
		// No rule matches: sturdy's 404, which gRPC reads as UNIMPLEMENTED.
		t.Errorf("EmptyCall without the header reached %q (%v); want no backend and UNIMPLEMENTED", b, err)
	}
	// The same route on the TLS listener: HTTP/2 by ALPN.
	tc, err := grpc.NewClient("passthrough:///"+srv.Addr("port-443"), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), ServerName: "grpc.example.com"})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.Close() })
	if h, err := unary(testpb.NewTestServiceClient(tc)); err != nil || !strings.HasPrefix(first(h, "x-backend"), "users-") {
		t.Errorf("UnaryCall over TLS: %v, answered by %q", err, first(h, "x-backend"))
	}
	if _, err := unary(grpcClient(t, addr, "broken.example.com")); status.Code(err) != codes.Unavailable {
		t.Errorf("a call to the route whose Service is missing: %v; want UNAVAILABLE, as GRPCRoute says", err)
	}

	waitFor(t, "GRPCRoute, listener and GatewayClass status", 20*time.Second, func() bool {
		g, err1 := gc.GatewayV1().Gateways(ns).Get(ctx, "grpc", metav1.GetOptions{})
		r, err2 := gc.GatewayV1().GRPCRoutes(ns).Get(ctx, "users", metav1.GetOptions{})
		b, err3 := gc.GatewayV1().GRPCRoutes(ns).Get(ctx, "broken", metav1.GetOptions{})
		k, err4 := gc.GatewayV1().GatewayClasses().Get(ctx, ns, metav1.GetOptions{})
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil || len(g.Status.Listeners) != 2 || len(r.Status.Parents) != 1 || len(b.Status.Parents) != 1 {
			return false
		}
		l := g.Status.Listeners[0]
		bc := b.Status.Parents[0].Conditions
		return gwCond(g.Status.Conditions, "Programmed") == "True" && l.AttachedRoutes == 2 && g.Status.Listeners[1].AttachedRoutes == 2 &&
			slices.ContainsFunc(l.SupportedKinds, func(k gwv1.RouteGroupKind) bool { return k.Kind == "GRPCRoute" }) &&
			gwCond(r.Status.Parents[0].Conditions, "Accepted") == "True" && gwCond(r.Status.Parents[0].Conditions, "ResolvedRefs") == "True" &&
			gwCond(bc, "Accepted") == "True" && gwCond(bc, "ResolvedRefs") == "False" && condOf(bc, "ResolvedRefs").Reason == "BackendNotFound" &&
			slices.ContainsFunc(k.Status.SupportedFeatures, func(f gwv1.SupportedFeature) bool { return f.Name == "GRPCRoute" })
	})

	// Under load from four clients, each its own connection: the updates
	// must fail no call.
	var clients []testpb.TestServiceClient
	for range 4 {
		clients = append(clients, grpcClient(t, addr, "grpc.example.com"))
	}
	l := startLoad(grpcTries(clients, func(b string) bool { return b == "users-a" || b == "users-b" || b == "orders" }))
	l.more(t, 100)

	// 1. An endpoint removed: users-b's pod terminates.
	sl := must(c.Client.DiscoveryV1().EndpointSlices(ns).Get(ctx, "users-1", metav1.GetOptions{}))
	sl.Endpoints[1].Conditions = discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(true), Terminating: ptr(true)}
	must(c.Client.DiscoveryV1().EndpointSlices(ns).Update(ctx, sl, metav1.UpdateOptions{}))
	waitFor(t, "users-b leaves the pool", 10*time.Second, func() bool {
		for range 10 {
			if h, _ := unary(cl); first(h, "x-backend") == "users-b" {
				return false
			}
		}
		return true
	})
	l.settle(t) // calls in flight on users-b finish
	stopB()     // the pod is gone

	// 2. A route changed: UnaryCall is split between users and orders.
	r := must(gc.GatewayV1().GRPCRoutes(ns).Get(ctx, "users", metav1.GetOptions{}))
	r.Spec.Rules[0].BackendRefs = []gwv1.GRPCBackendRef{grpcRef("users", 1), grpcRef("orders", 1)}
	must(gc.GatewayV1().GRPCRoutes(ns).Update(ctx, r, metav1.UpdateOptions{}))
	waitFor(t, "UnaryCall reaches orders too", 10*time.Second, func() bool {
		h, _ := unary(cl)
		return first(h, "x-backend") == "orders"
	})
	l.more(t, 100)
	l.end()
	if n := l.failed.Load(); n != 0 || l.ok.Load() < 100 {
		t.Errorf("under load: %d ok, %d failed (want 0 failed, at least 100 ok): %v", l.ok.Load(), n, l.errs)
	}
	t.Logf("load: %d gRPC calls, %d failed, across an endpoint removal and a route change", l.ok.Load(), l.failed.Load())

	waitFor(t, "the GRPCRoute's status observes its new generation", 10*time.Second, func() bool {
		rs := must(gc.GatewayV1().GRPCRoutes(ns).Get(ctx, "users", metav1.GetOptions{}))
		return len(rs.Status.Parents) == 1 && condOf(rs.Status.Parents[0].Conditions, "Accepted").ObservedGeneration == rs.Generation
	})
}

// An ingress-nginx Ingress with backend-protocol GRPC reaches an h2c
// grpc-go backend, and one with GRPCS a grpc-go backend over TLS whose
// certificate sturdy does not verify (as ingress-nginx does not): real
// gRPC calls over h2c on port 80 and over TLS on port 443.
func TestIngressGRPCBackendsServeCalls(t *testing.T) {
	c := env.Cluster(t)
	ns := c.Namespace(t, "ing-grpc")
	ctx := context.Background()
	f := &fleet{addr: map[string]string{}}
	ca := testpkiCA(t)
	f.grpcBackend(t, "192.0.2.51:8080", "plain")
	podCrt, podKey := ca.Issue(t, leaf("pod.internal")) // names nothing sturdy dials
	pair, err := tls.X509KeyPair(podCrt, podKey)
	if err != nil {
		t.Fatal(err)
	}
	f.grpcBackend(t, "192.0.2.52:8080", "tls", grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pair}})))

	crt, key := ca.Issue(t, leaf("rpcs.example.com"))
	must(c.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rpcs-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}, metav1.CreateOptions{}))
	for _, s := range []struct{ name, addr string }{{"rpc", "192.0.2.51"}, {"rpcs", "192.0.2.52"}} {
		must(c.Client.CoreV1().Services(ns).Create(ctx, svcObj(ns, s.name), metav1.CreateOptions{}))
		must(c.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, sliceObj(ns, s.name, s.addr), metav1.CreateOptions{}))
	}
	proto := func(v string) map[string]string { return map[string]string{nginxPrefix + "backend-protocol": v} }
	// ssl-redirect off: a gRPC client does not follow redirects.
	rpcs := ingressObj(ns, "rpcs", proto("GRPCS"), "rpcs.example.com", "rpcs", "rpcs-tls")
	rpcs.Annotations[nginxPrefix+"ssl-redirect"] = "false"
	for _, ing := range []*networkingv1.Ingress{ingressObj(ns, "rpc", proto("GRPC"), "rpc.example.com", "rpc", ""), rpcs} {
		ing.Spec.IngressClassName = ptr(ns)
		must(c.Client.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}))
	}

	srv, ctl := sturdyFor(t, c, ns, f, "replica-a")
	waitFor(t, "the first sync", 30*time.Second, func() bool { ok, _ := ctl.Ready(); return ok && srv.Addr("port-443") != "" })
	plain := grpcClient(t, srv.Addr("port-80"), "rpc.example.com")
	var h metadata.MD
	waitFor(t, "a gRPC call over h2c reaches the GRPC backend", 10*time.Second, func() bool {
		h, err = unary(plain)
		return err == nil
	})
	if b := first(h, "x-backend"); b != "plain" {
		t.Errorf("backend-protocol GRPC: answered by %q", b)
	}
	cc, err := grpc.NewClient("passthrough:///"+srv.Addr("port-443"), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), ServerName: "rpcs.example.com"})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	h, err = unary(testpb.NewTestServiceClient(cc))
	if err != nil || first(h, "x-backend") != "tls" {
		t.Errorf("backend-protocol GRPCS over TLS on port 443: %v, answered by %q; want the TLS backend", err, first(h, "x-backend"))
	}
}

// An HTTPRoute to a Service port with appProtocol kubernetes.io/h2c
// speaks HTTP/2 without TLS to the pods, and the plain listener takes
// HTTP/2 with prior knowledge from clients (Gateway API's
// HTTPRouteBackendProtocolH2C).
func TestHTTPRouteBackendProtocolH2C(t *testing.T) {
	c := env.Cluster(t)
	ns := c.Namespace(t, "h2c-e2e")
	ctx := context.Background()
	gc := must(gwclient.NewForConfig(c.Config))
	f := &fleet{addr: map[string]string{}}
	h2c := new(http.Protocols)
	h2c.SetUnencryptedHTTP2(true) // and no HTTP/1.1: a request over it fails
	be := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "h2c pod %s", r.Proto)
	}))
	be.Config.Protocols = h2c
	be.Start()
	t.Cleanup(be.Close)
	f.mu.Lock()
	f.addr["192.0.2.61:8080"] = be.Listener.Addr().String()
	f.mu.Unlock()

	svc := svcObj(ns, "app")
	svc.Spec.Ports[0].AppProtocol = ptr("kubernetes.io/h2c")
	must(c.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}))
	must(c.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, sliceObj(ns, "app", "192.0.2.61"), metav1.CreateOptions{}))
	class := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: gwv1.GatewayClassSpec{ControllerName: gwv1.GatewayController("sturdyproxy.io/" + ns)}}
	must(gc.GatewayV1().GatewayClasses().Create(ctx, class, metav1.CreateOptions{}))
	t.Cleanup(func() { gc.GatewayV1().GatewayClasses().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	must(gc.GatewayV1().Gateways(ns).Create(ctx, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: gwv1.GatewaySpec{
		GatewayClassName: gwv1.ObjectName(ns), Listeners: []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}}}}, metav1.CreateOptions{}))
	must(gc.GatewayV1().HTTPRoutes(ns).Create(ctx, &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "web"}}},
		Rules:           []gwv1.HTTPRouteRule{{Name: ptr(gwv1.SectionName("all")), BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "app", Port: ptr(gwv1.PortNumber(80))}}}}}},
	}}, metav1.CreateOptions{}))

	srv, ctl := sturdyFor(t, c, ns, f, "replica-a")
	waitFor(t, "the first sync", 30*time.Second, func() bool {
		ok, _ := ctl.Ready()
		return ok && srv.Addr("port-80") != ""
	})
	addr := srv.Addr("port-80")
	d := &net.Dialer{Timeout: 2 * time.Second}
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	priorKnowledge := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dial, Protocols: h2c}}
	var code int
	var body string
	var err error
	waitFor(t, "an h2c request reaches the h2c pod", 10*time.Second, func() bool {
		code, body, _, err = get(priorKnowledge, "http://app.example.com/")
		return err == nil && code == 200
	})
	if body != "h2c pod HTTP/2.0" {
		t.Errorf("answer %q; want the pod's, over HTTP/2", body)
	}
	// HTTP/1.1 clients on the same port still reach the pod over h2c.
	if code, body, _, err := get(client(addr, nil), "http://app.example.com/"); err != nil || code != 200 || body != "h2c pod HTTP/2.0" {
		t.Errorf("HTTP/1.1 client: %d %q %v", code, body, err)
	}
	waitFor(t, "the GatewayClass publishes HTTPRouteBackendProtocolH2C", 20*time.Second, func() bool {
		k, err := gc.GatewayV1().GatewayClasses().Get(ctx, ns, metav1.GetOptions{})
		return err == nil && slices.ContainsFunc(k.Status.SupportedFeatures, func(f gwv1.SupportedFeature) bool { return f.Name == "HTTPRouteBackendProtocolH2C" })
	})
}

// An HTTPRoute to a Service port with appProtocol kubernetes.io/ws
// carries WebSocket upgrades to the pods (Gateway API's
// HTTPRouteBackendProtocolWebSocket).
func TestHTTPRouteBackendProtocolWebSocket(t *testing.T) {
	c := env.Cluster(t)
	ns := c.Namespace(t, "ws-e2e")
	ctx := context.Background()
	gc := must(gwclient.NewForConfig(c.Config))
	f := &fleet{addr: map[string]string{}}
	be := httptest.NewServer(websocket.Handler(func(c *websocket.Conn) { io.Copy(c, c) }))
	t.Cleanup(be.Close)
	f.mu.Lock()
	f.addr["192.0.2.81:8080"] = be.Listener.Addr().String()
	f.mu.Unlock()

	svc := svcObj(ns, "chat")
	svc.Spec.Ports[0].AppProtocol = ptr("kubernetes.io/ws")
	must(c.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}))
	must(c.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, sliceObj(ns, "chat", "192.0.2.81"), metav1.CreateOptions{}))
	class := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: gwv1.GatewayClassSpec{ControllerName: gwv1.GatewayController("sturdyproxy.io/" + ns)}}
	must(gc.GatewayV1().GatewayClasses().Create(ctx, class, metav1.CreateOptions{}))
	t.Cleanup(func() { gc.GatewayV1().GatewayClasses().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	must(gc.GatewayV1().Gateways(ns).Create(ctx, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: gwv1.GatewaySpec{
		GatewayClassName: gwv1.ObjectName(ns), Listeners: []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}}}}, metav1.CreateOptions{}))
	must(gc.GatewayV1().HTTPRoutes(ns).Create(ctx, &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chat"}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "web"}}},
		Rules:           []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "chat", Port: ptr(gwv1.PortNumber(80))}}}}}},
	}}, metav1.CreateOptions{}))

	srv, ctl := sturdyFor(t, c, ns, f, "replica-a")
	waitFor(t, "the first sync", 30*time.Second, func() bool { ok, _ := ctl.Ready(); return ok && srv.Addr("port-80") != "" })
	var ws *websocket.Conn
	waitFor(t, "a WebSocket upgrade through the route", 10*time.Second, func() bool {
		var err error
		ws, err = websocket.Dial("ws://"+srv.Addr("port-80")+"/chat", "", "http://chat.example.com/")
		return err == nil
	})
	defer ws.Close()
	ws.SetDeadline(time.Now().Add(5 * time.Second))
	for _, msg := range []string{"hello", "again"} {
		if err := websocket.Message.Send(ws, msg); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := websocket.Message.Receive(ws, &got); err != nil || got != msg {
			t.Fatalf("echo of %q: %q, %v", msg, got, err)
		}
	}
	waitFor(t, "the GatewayClass publishes HTTPRouteBackendProtocolWebSocket", 20*time.Second, func() bool {
		k, err := gc.GatewayV1().GatewayClasses().Get(ctx, ns, metav1.GetOptions{})
		return err == nil && slices.ContainsFunc(k.Status.SupportedFeatures, func(f gwv1.SupportedFeature) bool { return f.Name == "HTTPRouteBackendProtocolWebSocket" })
	})
}
