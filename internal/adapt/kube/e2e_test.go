package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/sturdyproxy/sturdy/internal/adapt/kube/kubetest"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/server"
	"github.com/sturdyproxy/sturdy/internal/testing/testpki"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

// fleet is the test's backends: loopback servers standing behind the
// documentation addresses (192.0.2.0/24) that the EndpointSlices carry,
// since the API server refuses loopback endpoints. The dialer it gives
// sturdy reaches nothing else.
type fleet struct {
	mu   sync.Mutex
	addr map[string]string // "192.0.2.11:8080" -> "127.0.0.1:PORT"
}

func (f *fleet) backend(t *testing.T, docAddr, name string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%s %s", name, r.URL.Path)
	}))
	t.Cleanup(s.Close)
	f.mu.Lock()
	f.addr[docAddr] = s.Listener.Addr().String()
	f.mu.Unlock()
	return s
}

func (f *fleet) dialer() health.Dialer {
	return func(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
		return func(ctx context.Context, network, addr string) (net.Conn, error) {
			f.mu.Lock()
			to, ok := f.addr[addr]
			f.mu.Unlock()
			if !ok {
				return nil, fmt.Errorf("test dialer: %s is no test backend", addr)
			}
			return d.DialContext(ctx, network, to)
		}
	}
}

// sturdyFor runs sturdy in Kubernetes mode against the test cluster,
// watching namespace ns only.
func sturdyFor(t *testing.T, c *kubetest.Cluster, ns string, f *fleet, identity string) (*server.Server, *Controller) {
	t.Helper()
	srv, ctl, _ := sturdyWith(t, c, ns, f, identity, "")
	return srv, ctl
}

// sturdyWith is sturdyFor with more lines of the kubernetes section
// (each indented by two spaces), and sturdy's log.
func sturdyWith(t *testing.T, c *kubetest.Cluster, ns string, f *fleet, identity, more string) (*server.Server, *Controller, *testutil.SyncBuffer) {
	t.Helper()
	yaml := fmt.Sprintf(`admin: { listen: 127.0.0.1:0 }
kubernetes:
  controller_name: sturdyproxy.io/%s
  ingress_class: %s
  namespaces: [%s]
  ports: [ { port: 80, listen: 127.0.0.1:0 }, { port: 443, listen: 127.0.0.1:0 } ]
  addresses: [192.0.2.1]
  lease: { namespace: %s, identity: %s }
  debounce: 50ms
%s`, ns, ns, ns, ns, identity, more)
	logs := &testutil.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv, ctl, _, err := NewServer(t.Name()+".yaml", []byte(yaml), log, Wiring{
		Options: Options{Rest: rbacFor(t, c, ns), LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond},
		Server:  []server.Option{server.WithDialer(f.dialer())},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		if t.Failed() {
			t.Logf("sturdy's log:\n%s", logs.String())
		}
	})
	return srv, ctl, logs
}

// must is for the API calls that set a test up: a failure there is the
// test's own (it panics, and the test fails with the error).
func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("test setup: %v", err))
	}
	return v
}

func svcObj(ns, name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}}}
}

func sliceObj(ns, svc string, addrs ...string) *discoveryv1.EndpointSlice {
	var eps []discoveryv1.Endpoint
	for _, a := range addrs {
		eps = append(eps, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)}})
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: svc + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080)), Protocol: ptr(corev1.ProtocolTCP)}},
		Endpoints:   eps,
	}
}

// client speaks to one sturdy listener whatever the URL's host, trusting
// roots; a new client has no connection to reuse (for certificate checks).
func client(addr string, roots *x509.CertPool) *http.Client {
	d := &net.Dialer{Timeout: 2 * time.Second}
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DialContext:     func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) },
			TLSClientConfig: &tls.Config{RootCAs: roots},
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func get(c *http.Client, url string) (int, string, *tls.ConnectionState, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.TLS, err
}

func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	if !testutil.Eventually(within, cond) {
		t.Fatalf("not within %s: %s", within, what)
	}
}

// load sends requests (HTTP or gRPC calls) from a few clients until
// stop, counting failures; it is bounded in count and time.
type load struct {
	ok, failed atomic.Int64
	tried      []atomic.Int64 // by client: tries finished
	mu         sync.Mutex
	errs       []string
	stop       chan struct{}
	wg         sync.WaitGroup
}

// httpTries are GETs of url from each client, wanting 200 and want in the
// body.
func httpTries(url string, clients []*http.Client, want string) []func() error {
	var tries []func() error
	for _, c := range clients {
		tries = append(tries, func() error {
			code, body, _, err := get(c, url)
			if err != nil || code != 200 || !strings.Contains(body, want) {
				return fmt.Errorf("%d %q %v", code, body, err)
			}
			return nil
		})
	}
	return tries
}

// startLoad runs each try in a goroutine of its own, over and over until
// end, counting successes and failures (the first ten kept).
func startLoad(tries []func() error) *load {
	l := &load{stop: make(chan struct{}), tried: make([]atomic.Int64, len(tries))}
	deadline := time.Now().Add(90 * time.Second)
	for i, try := range tries {
		l.wg.Go(func() {
			for n := 0; n < 20000 && time.Now().Before(deadline); n++ {
				select {
				case <-l.stop:
					return
				default:
				}
				err := try()
				l.tried[i].Add(1)
				if err != nil {
					l.failed.Add(1)
					l.mu.Lock()
					if len(l.errs) < 10 {
						l.errs = append(l.errs, err.Error())
					}
					l.mu.Unlock()
					continue
				}
				l.ok.Add(1)
				// real: bounds the load's rate; the server under it is a
				// real process pair (kube-apiserver, etcd) sharing the cores.
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	return l
}

func (l *load) end() { close(l.stop); l.wg.Wait() }

// more waits until n more tries have succeeded: load before and after a
// step is counted in requests, not time.
func (l *load) more(t *testing.T, n int64) {
	t.Helper()
	start := l.ok.Load()
	waitFor(t, fmt.Sprintf("%d more requests succeed under load", n), 30*time.Second, func() bool { return l.ok.Load()-start >= n })
}

// settle waits until every client has finished a try begun after the
// call: none is still in flight on a backend it chose before.
func (l *load) settle(t *testing.T) {
	t.Helper()
	start := make([]int64, len(l.tried))
	for i := range l.tried {
		start[i] = l.tried[i].Load()
	}
	waitFor(t, "every client finishes a request begun after the change", 30*time.Second, func() bool {
		for i := range l.tried {
			if l.tried[i].Load()-start[i] < 2 { // the one in flight, then one begun after
				return false
			}
		}
		return true
	})
}

func gwCond(cs []metav1.Condition, typ string) metav1.ConditionStatus {
	for _, c := range cs {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

// The issue's "done when": a Gateway with a TLS Secret, an HTTPRoute, a
// Service and its EndpointSlice on a real API server make sturdy route
// real traffic to real backends; an endpoint removed, a route changed and
// a certificate rotated apply with zero failed requests under load; the
// status conditions are written.
func TestGatewayServesAndUpdatesWithoutFailures(t *testing.T) {
	c := env.Cluster(t)
	ns := c.Namespace(t, "gw-e2e")
	ctx := context.Background()
	gc := must(gwclient.NewForConfig(c.Config))
	f := &fleet{addr: map[string]string{}}
	f.backend(t, "192.0.2.11:8080", "web-a")
	drained := f.backend(t, "192.0.2.12:8080", "web-b")
	f.backend(t, "192.0.2.21:8080", "api")

	ca := testpkiCA(t)
	crt1, key1 := ca.Issue(t, leaf("shop.example.com"))
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: crt1, corev1.TLSPrivateKeyKey: key1}}
	must(c.Client.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}))
	must(c.Client.CoreV1().Services(ns).Create(ctx, svcObj(ns, "web"), metav1.CreateOptions{}))
	must(c.Client.CoreV1().Services(ns).Create(ctx, svcObj(ns, "api"), metav1.CreateOptions{}))
	must(c.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, sliceObj(ns, "web", "192.0.2.11", "192.0.2.12"), metav1.CreateOptions{}))
	must(c.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, sliceObj(ns, "api", "192.0.2.21"), metav1.CreateOptions{}))
	class := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: gwv1.GatewayClassSpec{ControllerName: gwv1.GatewayController("sturdyproxy.io/" + ns)}}
	must(gc.GatewayV1().GatewayClasses().Create(ctx, class, metav1.CreateOptions{}))
	t.Cleanup(func() { gc.GatewayV1().GatewayClasses().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(ns), Listeners: []gwv1.Listener{
		{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType},
		{Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: ptr(gwv1.Hostname("shop.example.com")),
			TLS: &gwv1.ListenerTLSConfig{Mode: ptr(gwv1.TLSModeTerminate), CertificateRefs: []gwv1.SecretObjectReference{{Name: "shop-tls"}}}},
	}}}
	must(gc.GatewayV1().Gateways(ns).Create(ctx, gw, metav1.CreateOptions{}))
	route := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "web", SectionName: ptr(gwv1.SectionName("https"))}}},
		Rules:           []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: ptr(gwv1.PortNumber(80))}}}}}},
	}}
	must(gc.GatewayV1().HTTPRoutes(ns).Create(ctx, route, metav1.CreateOptions{}))
	redirect := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "to-https"}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "web", SectionName: ptr(gwv1.SectionName("http"))}}},
		Rules: []gwv1.HTTPRouteRule{{Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestRedirect,
			RequestRedirect: &gwv1.HTTPRequestRedirectFilter{Scheme: ptr("https"), StatusCode: ptr(301)}}}}},
	}}
	must(gc.GatewayV1().HTTPRoutes(ns).Create(ctx, redirect, metav1.CreateOptions{}))

	srv, ctl := sturdyFor(t, c, ns, f, "replica-a")
	waitFor(t, "the first sync", 30*time.Second, func() bool { ok, _ := ctl.Ready(); return ok && srv.Addr("port-443") != "" })
	roots := ca.Pool()
	https := srv.Addr("port-443")
	seen := map[string]bool{}
	waitFor(t, "both web pods answer over TLS", 10*time.Second, func() bool {
		code, body, _, err := get(client(https, roots), "https://shop.example.com/")
		if err == nil && code == 200 {
			seen[strings.Fields(body)[0]] = true
		}
		return seen["web-a"] && seen["web-b"]
	})
	code, _, _, err := get(client(srv.Addr("port-80"), nil), "http://shop.example.com/x")
	if err != nil || code != 301 {
		t.Errorf("port 80 answered %d, %v; want the HTTPRoute's 301 to HTTPS", code, err)
	}

	// Status, written by the one replica that holds the lease.
	waitFor(t, "Gateway, listener, HTTPRoute and GatewayClass status", 20*time.Second, func() bool {
		g, err1 := gc.GatewayV1().Gateways(ns).Get(ctx, "web", metav1.GetOptions{})
		r, err2 := gc.GatewayV1().HTTPRoutes(ns).Get(ctx, "shop", metav1.GetOptions{})
		k, err3 := gc.GatewayV1().GatewayClasses().Get(ctx, ns, metav1.GetOptions{})
		if err1 != nil || err2 != nil || err3 != nil || len(g.Status.Listeners) != 2 || len(r.Status.Parents) != 1 {
			return false
		}
		return gwCond(g.Status.Conditions, "Accepted") == "True" && gwCond(g.Status.Conditions, "Programmed") == "True" &&
			gwCond(g.Status.Listeners[1].Conditions, "ResolvedRefs") == "True" && g.Status.Listeners[1].AttachedRoutes == 1 &&
			len(g.Status.Addresses) == 1 && g.Status.Addresses[0].Value == "192.0.2.1" &&
			gwCond(r.Status.Parents[0].Conditions, "Accepted") == "True" && gwCond(r.Status.Parents[0].Conditions, "ResolvedRefs") == "True" &&
			gwCond(k.Status.Conditions, "Accepted") == "True" && len(k.Status.SupportedFeatures) > 0
	})

	// Under load from four clients: the updates must fail no request.
	var clients []*http.Client
	for range 4 {
		clients = append(clients, client(https, roots))
	}
	l := startLoad(httpTries("https://shop.example.com/", clients, "web-"))
	l.more(t, 100)

	// 1. An endpoint removed: web-b's pod terminates. It keeps serving
	// (terminating, serving) while sturdy stops sending it new requests.
	sl := must(c.Client.DiscoveryV1().EndpointSlices(ns).Get(ctx, "web-1", metav1.GetOptions{}))
	sl.Endpoints[1].Conditions = discoveryv1.EndpointConditions{Ready: ptr(false), Serving: ptr(true), Terminating: ptr(true)}
	must(c.Client.DiscoveryV1().EndpointSlices(ns).Update(ctx, sl, metav1.UpdateOptions{}))
	waitFor(t, "web-b leaves the pool", 10*time.Second, func() bool {
		for range 10 {
			_, body, _, _ := get(clients[0], "https://shop.example.com/")
			if strings.HasPrefix(body, "web-b") {
				return false
			}
		}
		return true
	})
	l.settle(t)     // requests in flight on web-b finish
	drained.Close() // the pod is gone

	// 2. A route changed: /api goes to another Service.
	r := must(gc.GatewayV1().HTTPRoutes(ns).Get(ctx, "shop", metav1.GetOptions{}))
	r.Spec.Rules = append(r.Spec.Rules, gwv1.HTTPRouteRule{
		Matches:     []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchPathPrefix), Value: ptr("/api")}}},
		BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "api", Port: ptr(gwv1.PortNumber(80))}}}},
	})
	must(gc.GatewayV1().HTTPRoutes(ns).Update(ctx, r, metav1.UpdateOptions{}))
	waitFor(t, "/api served by the api Service", 10*time.Second, func() bool {
		_, body, _, _ := get(clients[0], "https://shop.example.com/api/v1")
		return body == "api /api/v1"
	})

	// 3. The certificate rotated: new handshakes get the new one.
	crt2, key2 := ca.Issue(t, leaf("shop.example.com"))
	s := must(c.Client.CoreV1().Secrets(ns).Get(ctx, "shop-tls", metav1.GetOptions{}))
	s.Data = map[string][]byte{corev1.TLSCertKey: crt2, corev1.TLSPrivateKeyKey: key2}
	must(c.Client.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{}))
	want := parseLeaf(t, crt2).SerialNumber
	waitFor(t, "new handshakes present the rotated certificate", 10*time.Second, func() bool {
		_, _, cs, err := get(client(https, roots), "https://shop.example.com/")
		return err == nil && cs != nil && cs.PeerCertificates[0].SerialNumber.Cmp(want) == 0
	})
	l.more(t, 100)
	l.end()
	if n := l.failed.Load(); n != 0 || l.ok.Load() < 100 {
		t.Errorf("under load: %d ok, %d failed (want 0 failed, at least 100 ok): %v", l.ok.Load(), n, l.errs)
	}
	t.Logf("load: %d requests, %d failed, across an endpoint removal, a route change and a certificate rotation", l.ok.Load(), l.failed.Load())

	rs := must(gc.GatewayV1().HTTPRoutes(ns).Get(ctx, "shop", metav1.GetOptions{}))
	if len(rs.Status.Parents) != 1 || rs.Status.Parents[0].Conditions[0].ObservedGeneration != rs.Generation {
		waitFor(t, "the HTTPRoute's status observes its new generation", 10*time.Second, func() bool {
			rs = must(gc.GatewayV1().HTTPRoutes(ns).Get(ctx, "shop", metav1.GetOptions{}))
			return len(rs.Status.Parents) == 1 && rs.Status.Parents[0].Conditions[0].ObservedGeneration == rs.Generation
		})
	}
}

func testpkiCA(t *testing.T) *testpki.CA { return testpki.NewCA(t, "kube test CA") }

func leaf(names ...string) testpki.Leaf { return testpki.Leaf{DNS: names} }

func parseLeaf(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	p, _ := pem.Decode(certPEM)
	c, err := x509.ParseCertificate(p.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Every replica serves; one at a time writes status, and when it stops
// another takes the Lease over and keeps the status current.
func TestOneReplicaWritesStatusAndAnotherTakesOver(t *testing.T) {
	c := env.Cluster(t)
	ns := c.Namespace(t, "gw-lease")
	ctx := context.Background()
	gc := must(gwclient.NewForConfig(c.Config))
	f := &fleet{addr: map[string]string{}}
	f.backend(t, "192.0.2.41:8080", "web")
	must(c.Client.CoreV1().Services(ns).Create(ctx, svcObj(ns, "web"), metav1.CreateOptions{}))
	must(c.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, sliceObj(ns, "web", "192.0.2.41"), metav1.CreateOptions{}))
	must(gc.GatewayV1().GatewayClasses().Create(ctx, &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: gwv1.GatewayClassSpec{ControllerName: gwv1.GatewayController("sturdyproxy.io/" + ns)}}, metav1.CreateOptions{}))
	t.Cleanup(func() { gc.GatewayV1().GatewayClasses().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	must(gc.GatewayV1().Gateways(ns).Create(ctx, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(ns), Listeners: []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}}}}, metav1.CreateOptions{}))
	rule := func(path string) []gwv1.HTTPRouteRule {
		return []gwv1.HTTPRouteRule{{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchPathPrefix), Value: ptr(path)}}},
			BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: ptr(gwv1.PortNumber(80))}}}}}}
	}
	must(gc.GatewayV1().HTTPRoutes(ns).Create(ctx, &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r"},
		Spec: gwv1.HTTPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "web"}}}, Rules: rule("/a")}}, metav1.CreateOptions{}))

	a, _ := sturdyFor(t, c, ns, f, "replica-a")
	b, _ := sturdyFor(t, c, ns, f, "replica-b")
	for _, s := range []*server.Server{a, b} {
		waitFor(t, "both replicas serve", 30*time.Second, func() bool {
			_, body, _, _ := get(client(s.Addr("port-80"), nil), "http://x/a")
			return body == "web /a"
		})
	}
	observed := func(gen int64) bool {
		r, err := gc.GatewayV1().HTTPRoutes(ns).Get(ctx, "r", metav1.GetOptions{})
		return err == nil && r.Generation == gen && len(r.Status.Parents) == 1 && r.Status.Parents[0].Conditions[0].ObservedGeneration == gen
	}
	waitFor(t, "the route's status", 20*time.Second, func() bool { return observed(1) })
	lease := must(c.Client.CoordinationV1().Leases(ns).Get(ctx, "sturdy-status", metav1.GetOptions{}))
	holder := *lease.Spec.HolderIdentity
	if holder != "replica-a" && holder != "replica-b" {
		t.Fatalf("lease held by %q", holder)
	}
	r := must(gc.GatewayV1().HTTPRoutes(ns).Get(ctx, "r", metav1.GetOptions{}))
	if len(r.Status.Parents) != 1 {
		t.Errorf("%d parent statuses; one replica writes, and one entry per parent", len(r.Status.Parents))
	}

	// The holder stops (its Lease is released); the other takes over.
	leader, other := a, b
	if holder == "replica-b" {
		leader, other = b, a
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	leader.Shutdown(sctx)
	cancel()
	r = must(gc.GatewayV1().HTTPRoutes(ns).Get(ctx, "r", metav1.GetOptions{}))
	r.Spec.Rules = rule("/b")
	must(gc.GatewayV1().HTTPRoutes(ns).Update(ctx, r, metav1.UpdateOptions{}))
	waitFor(t, "the other replica serves the change and writes its status", 20*time.Second, func() bool {
		_, body, _, _ := get(client(other.Addr("port-80"), nil), "http://x/b")
		return body == "web /b" && observed(2)
	})
	if l := must(c.Client.CoordinationV1().Leases(ns).Get(ctx, "sturdy-status", metav1.GetOptions{})); *l.Spec.HolderIdentity == holder {
		t.Errorf("the lease is still %s's", holder)
	}
}
