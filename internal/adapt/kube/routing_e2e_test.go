package kube

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

// echo is a backend that answers with its name, the request's method,
// path and query, and the request headers the test asks about (as
// Echo-<name> response headers); it counts what it served.
type echo struct{ n atomic.Int64 }

func (f *fleet) echo(t *testing.T, docAddr, name string) *echo {
	t.Helper()
	e := &echo{}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		e.n.Add(1)
		for _, h := range []string{"X-Gw", "X-Debug", "X-Forwarded-Prefix", "X-Backend"} {
			if v := r.Header.Values(h); len(v) > 0 {
				w.Header().Set("Echo-"+h, strings.Join(v, ","))
			}
		}
		w.Header().Set("Echo-Host", r.Host)
		w.Header().Set("Server", "echo")
		fmt.Fprintf(w, "%s %s %s", name, r.Method, r.URL.RequestURI())
	}))
	t.Cleanup(s.Close)
	f.mu.Lock()
	f.addr[docAddr] = s.Listener.Addr().String()
	f.mu.Unlock()
	return e
}

type answer struct {
	code   int
	body   string
	header http.Header
}

func do(t *testing.T, c *http.Client, method, url string, h map[string]string) answer {
	t.Helper()
	r, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		if k == "Host" {
			r.Host = v
			continue
		}
		r.Header.Set(k, v)
	}
	resp, err := c.Do(r)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b), resp.Header}
}

// Gateway API's matches and filters on a real API server, with real
// traffic to real backends: every core and extended feature sturdy's
// routing covers, and the precedence between them.
func TestGatewayRoutingFeatures(t *testing.T) {
	c := env.Cluster(t)
	ns := c.Namespace(t, "gw-routing")
	ctx := context.Background()
	gc := must(gwclient.NewForConfig(c.Config))
	f := &fleet{addr: map[string]string{}}
	f.echo(t, "192.0.2.51:8080", "web")
	f.echo(t, "192.0.2.52:8080", "api")
	f.echo(t, "192.0.2.53:8080", "v2")
	shadow := f.echo(t, "192.0.2.54:8080", "shadow")
	// slow answers only when the request is given up (or after 5 s).
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	t.Cleanup(slow.Close)
	f.mu.Lock()
	f.addr["192.0.2.55:8080"] = slow.Listener.Addr().String()
	f.mu.Unlock()
	for _, s := range []struct{ name, addr string }{{"web", "192.0.2.51"}, {"api", "192.0.2.52"}, {"v2", "192.0.2.53"}, {"shadow", "192.0.2.54"}, {"slow", "192.0.2.55"}} {
		must(c.Client.CoreV1().Services(ns).Create(ctx, svcObj(ns, s.name), metav1.CreateOptions{}))
		must(c.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, sliceObj(ns, s.name, s.addr), metav1.CreateOptions{}))
	}
	must(gc.GatewayV1().GatewayClasses().Create(ctx, &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: gwv1.GatewayClassSpec{ControllerName: gwv1.GatewayController("sturdyproxy.io/" + ns)}}, metav1.CreateOptions{}))
	t.Cleanup(func() { gc.GatewayV1().GatewayClasses().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	must(gc.GatewayV1().Gateways(ns).Create(ctx, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw"},
		Spec: gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(ns), Listeners: []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}}}}, metav1.CreateOptions{}))

	path := func(typ gwv1.PathMatchType, v string) *gwv1.HTTPPathMatch {
		return &gwv1.HTTPPathMatch{Type: &typ, Value: &v}
	}
	match := func(m gwv1.HTTPRouteMatch) []gwv1.HTTPRouteMatch { return []gwv1.HTTPRouteMatch{m} }
	pre := gwv1.PrefixMatchHTTPPathModifier
	rules := []gwv1.HTTPRouteRule{
		{Matches: match(gwv1.HTTPRouteMatch{Path: path(gwv1.PathMatchExact, "/exact")}), BackendRefs: to("web")},
		{Matches: match(gwv1.HTTPRouteMatch{Path: path(gwv1.PathMatchPathPrefix, "/api"), Headers: []gwv1.HTTPHeaderMatch{{Name: "X-Version", Value: "2"}}}), BackendRefs: to("v2")},
		{Matches: match(gwv1.HTTPRouteMatch{Path: path(gwv1.PathMatchPathPrefix, "/api")}), BackendRefs: to("api"), Filters: []gwv1.HTTPRouteFilter{
			{Type: gwv1.HTTPRouteFilterURLRewrite, URLRewrite: &gwv1.HTTPURLRewriteFilter{Hostname: ptr(gwv1.PreciseHostname("api.internal")), Path: &gwv1.HTTPPathModifier{Type: pre, ReplacePrefixMatch: ptr("/v1")}}},
			{Type: gwv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{{Name: "X-Gw", Value: "$host"}}, Remove: []string{"X-Debug"}}},
			{Type: gwv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: &gwv1.HTTPHeaderFilter{Add: []gwv1.HTTPHeader{{Name: "X-Served-By", Value: "sturdy"}}, Remove: []string{"Server"}}},
		}},
		{Matches: match(gwv1.HTTPRouteMatch{Path: path(gwv1.PathMatchPathPrefix, "/submit"), Method: ptr(gwv1.HTTPMethodPost)}), BackendRefs: to("api")},
		{Matches: match(gwv1.HTTPRouteMatch{Path: path(gwv1.PathMatchPathPrefix, "/search"), QueryParams: []gwv1.HTTPQueryParamMatch{{Name: "engine", Value: "v2"}}}), BackendRefs: to("v2")},
		{Matches: match(gwv1.HTTPRouteMatch{Path: path(gwv1.PathMatchRegularExpression, `/items/[0-9]+`)}), BackendRefs: to("api")},
		{Matches: match(gwv1.HTTPRouteMatch{Path: path(gwv1.PathMatchPathPrefix, "/old")}), Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestRedirect,
			RequestRedirect: &gwv1.HTTPRequestRedirectFilter{Scheme: ptr("https"), Hostname: ptr(gwv1.PreciseHostname("new.example.com")), StatusCode: ptr(301), Path: &gwv1.HTTPPathModifier{Type: pre, ReplacePrefixMatch: ptr("/new")}}}}},
		{Matches: match(gwv1.HTTPRouteMatch{Path: path(gwv1.PathMatchPathPrefix, "/moved")}), Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestRedirect,
			RequestRedirect: &gwv1.HTTPRequestRedirectFilter{Hostname: ptr(gwv1.PreciseHostname("elsewhere.example.com"))}}}},
		{Matches: match(gwv1.HTTPRouteMatch{Path: path(gwv1.PathMatchPathPrefix, "/mirrored")}), BackendRefs: to("web"), Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestMirror,
			RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: gwv1.BackendObjectReference{Name: "shadow", Port: ptr(gwv1.PortNumber(80))}}}}},
		{Matches: match(gwv1.HTTPRouteMatch{Path: path(gwv1.PathMatchPathPrefix, "/split")}), BackendRefs: to("web:3", "api:1")},
		{Matches: match(gwv1.HTTPRouteMatch{Path: path(gwv1.PathMatchPathPrefix, "/broken")}), BackendRefs: to("missing")},
		{Matches: match(gwv1.HTTPRouteMatch{Path: path(gwv1.PathMatchPathPrefix, "/halfbroken")}), BackendRefs: to("web:1", "missing:1")},
		{Matches: match(gwv1.HTTPRouteMatch{Path: path(gwv1.PathMatchPathPrefix, "/slow")}), BackendRefs: to("slow"), Timeouts: &gwv1.HTTPRouteTimeouts{Request: ptr(gwv1.Duration("300ms"))}},
		{BackendRefs: to("web")},
	}
	must(gc.GatewayV1().HTTPRoutes(ns).Create(ctx, &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}}, Hostnames: []gwv1.Hostname{"shop.example.com"}, Rules: rules}}, metav1.CreateOptions{}))

	srv, ctl, logs := sturdyWith(t, c, ns, f, "replica-a", "")
	waitFor(t, "the first sync", 30*time.Second, func() bool { ok, _ := ctl.Ready(); return ok && srv.Addr("port-80") != "" })
	cl := client(srv.Addr("port-80"), nil)
	u := "http://shop.example.com"
	waitFor(t, "the route serves", 10*time.Second, func() bool { return do(t, cl, "GET", u+"/", nil).code == 200 })

	for _, c := range []struct {
		name, method, path string
		h                  map[string]string
		code               int
		body               string // the answer starts with this
		headers            map[string]string
	}{
		{"Exact", "GET", "/exact", nil, 200, "web GET /exact", nil},
		{"Exact is not a prefix", "GET", "/exact/x", nil, 200, "web GET /exact/x", nil}, // the catch-all rule
		{"a header match ranks above the same prefix without", "GET", "/api/users", map[string]string{"X-Version": "2"}, 200, "v2 GET /api/users", nil},
		{"URLRewrite and header modifiers", "GET", "/api/users?x=1", map[string]string{"X-Debug": "1"}, 200, "api GET /v1/users?x=1",
			map[string]string{"Echo-Host": "api.internal", "Echo-X-Gw": "$host", "Echo-X-Debug": "", "X-Served-By": "sturdy", "Server": ""}},
		{"PathPrefix is whole segments", "GET", "/apix", nil, 200, "web GET /apix", nil},
		{"a method match", "POST", "/submit", nil, 200, "api POST /submit", nil},
		{"without the method", "GET", "/submit", nil, 200, "web GET /submit", nil},
		{"a query match", "GET", "/search?engine=v2", nil, 200, "v2 GET /search?engine=v2", nil},
		{"without the query", "GET", "/search?engine=v1", nil, 200, "web GET", nil},
		{"a regular expression matches the whole path", "GET", "/items/42", nil, 200, "api GET /items/42", nil},
		{"and only the whole path", "GET", "/items/42/x", nil, 200, "web GET", nil},
		{"RequestRedirect", "GET", "/old/page?q=1", nil, 301, "", map[string]string{"Location": "https://new.example.com/new/page?q=1"}},
		{"RequestRedirect keeps the Gateway listener's port", "GET", "/moved/x", nil, 302, "", map[string]string{"Location": "http://elsewhere.example.com/moved/x"}},
		{"an unresolved backendRef answers 500, not the sorry page", "GET", "/broken", nil, 500, "500 Internal Server Error: unresolved backend: Service", map[string]string{"Retry-After": ""}},
		{"timeouts.request: a backend that does not answer in time gets 504", "GET", "/slow", nil, 504, "", nil},
	} {
		got := do(t, cl, c.method, u+c.path, c.h)
		if got.code != c.code || !strings.HasPrefix(got.body, c.body) {
			t.Errorf("%s: %s %s = %d %q; want %d %q", c.name, c.method, c.path, got.code, got.body, c.code, c.body)
		}
		for k, v := range c.headers {
			if g := strings.Join(got.header.Values(k), ","); g != v {
				t.Errorf("%s: %s = %q; want %q", c.name, k, g, v)
			}
		}
	}

	// RequestMirror: every request copied to the shadow, whose answers
	// the client never sees.
	for range 5 {
		if got := do(t, cl, "GET", u+"/mirrored", nil); !strings.HasPrefix(got.body, "web ") {
			t.Fatalf("mirrored route answered %q", got.body)
		}
	}
	waitFor(t, "the shadow receives the 5 copies", 5*time.Second, func() bool { return shadow.n.Load() == 5 })

	// Weighted backendRefs, 3:1: sturdy spreads a split evenly, so of 100
	// requests 75 give or take one go to web.
	seen := map[string]int{}
	for range 100 {
		seen[strings.Fields(do(t, cl, "GET", u+"/split", nil).body)[0]]++
	}
	if seen["web"] < 74 || seen["web"] > 76 || seen["web"]+seen["api"] != 100 {
		t.Errorf("weights 3:1 sent %v of 100", seen)
	}

	// A split with an unresolved backendRef: its share is the fixed 500,
	// never the sorry page; the other share is served.
	split := map[int]int{}
	for range 10 {
		got := do(t, cl, "GET", u+"/halfbroken", nil)
		split[got.code]++
		if got.code == 500 && (!strings.HasPrefix(got.body, "500 Internal Server Error: unresolved backend: Service "+ns+"/missing does not exist") || got.header.Get("Retry-After") != "") {
			t.Errorf("the unresolved share answered %q with Retry-After %q", got.body, got.header.Get("Retry-After"))
		}
	}
	if split[200] < 4 || split[200] > 6 || split[200]+split[500] != 10 {
		t.Errorf("1:1 with one backend unresolved answered %v of 10; want 5 of each, give or take one", split)
	}
	// The log says what is wrong: an unresolved backend, not an empty pool.
	waitFor(t, "the log names the unresolved backend", 5*time.Second, func() bool {
		return strings.Contains(logs.String(), `"kubernetes: unresolved backend`) && strings.Contains(logs.String(), ns+"/missing does not exist")
	})
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "no host in rotation") && strings.Contains(line, "/unresolved") {
			t.Errorf("an unresolved backend's pool was logged as an empty pool: %s", line)
		}
	}

	waitFor(t, "the HTTPRoute accepted with its refs unresolved", 20*time.Second, func() bool {
		r, err := gc.GatewayV1().HTTPRoutes(ns).Get(ctx, "shop", metav1.GetOptions{})
		if err != nil || len(r.Status.Parents) != 1 {
			return false
		}
		cs := r.Status.Parents[0].Conditions
		return gwCond(cs, "Accepted") == "True" && gwCond(cs, "ResolvedRefs") == "False" && gwCond(cs, "PartiallyInvalid") == ""
	})
	k := must(gc.GatewayV1().GatewayClasses().Get(ctx, ns, metav1.GetOptions{}))
	var names []string
	for _, sf := range k.Status.SupportedFeatures {
		names = append(names, string(sf.Name))
	}
	for _, want := range []string{"HTTPRouteMethodMatching", "HTTPRouteQueryParamMatching", "HTTPRouteRequestMirror", "HTTPRoutePathRewrite"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("GatewayClass supportedFeatures %v lack %s", names, want)
		}
	}
}

// The ingress-nginx annotations that change where a request goes, on a
// real API server with real traffic: rewrite-target with use-regex
// captures, permanent-redirect, app-root, server-alias, upstream-vhost,
// x-forwarded-prefix, canary-by-header, pathType Exact, and ssl-redirect
// for one host while another on the same port is served over HTTP.
func TestIngressNginxRoutingAnnotations(t *testing.T) {
	c := env.Cluster(t)
	ns := c.Namespace(t, "ing-routing")
	ctx := context.Background()
	f := &fleet{addr: map[string]string{}}
	f.echo(t, "192.0.2.61:8080", "app")
	f.echo(t, "192.0.2.62:8080", "canary")
	for _, s := range []struct{ name, addr string }{{"app", "192.0.2.61"}, {"app-canary", "192.0.2.62"}} {
		must(c.Client.CoreV1().Services(ns).Create(ctx, svcObj(ns, s.name), metav1.CreateOptions{}))
		must(c.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, sliceObj(ns, s.name, s.addr), metav1.CreateOptions{}))
	}
	ca := testpkiCA(t)
	crt, key := ca.Issue(t, leaf("secure.example.com"))
	must(c.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secure-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}, metav1.CreateOptions{}))
	a := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[nginxPrefix+kv[i]] = kv[i+1]
		}
		return m
	}
	impl, exact := networkingv1.PathTypeImplementationSpecific, networkingv1.PathTypeExact
	rewrite := ingressObj(ns, "rewrite", a("rewrite-target", "/$2", "x-forwarded-prefix", "/api", "upstream-vhost", "app.internal"), "app.example.com", "app", "")
	rewrite.Spec.Rules[0].HTTP.Paths[0].Path, rewrite.Spec.Rules[0].HTTP.Paths[0].PathType = "/api(/|$)(.*)", &impl
	login := ingressObj(ns, "login", nil, "app.example.com", "app", "")
	login.Spec.Rules[0].HTTP.Paths[0].Path, login.Spec.Rules[0].HTTP.Paths[0].PathType = "/login", &exact
	moved := ingressObj(ns, "moved", a("permanent-redirect", "https://new.example.com$request_uri"), "old.example.com", "app", "")
	root := ingressObj(ns, "root", a("app-root", "/dashboard", "server-alias", "www.root.example.com"), "root.example.com", "app", "")
	main := ingressObj(ns, "main", nil, "canary.example.com", "app", "")
	canary := ingressObj(ns, "main-canary", a("canary", "true", "canary-by-header", "X-Canary"), "canary.example.com", "app-canary", "")
	secure := ingressObj(ns, "secure", nil, "secure.example.com", "app", "secure-tls")
	for _, ing := range []*networkingv1.Ingress{rewrite, login, moved, root, main, canary, secure} {
		ing.Spec.IngressClassName = ptr(ns)
		must(c.Client.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}))
	}

	srv, ctl := sturdyFor(t, c, ns, f, "replica-a")
	waitFor(t, "the first sync", 30*time.Second, func() bool { ok, _ := ctl.Ready(); return ok && srv.Addr("port-443") != "" })
	cl := client(srv.Addr("port-80"), nil)
	waitFor(t, "the Ingresses serve", 10*time.Second, func() bool { return do(t, cl, "GET", "http://app.example.com/login", nil).code == 200 })
	for _, c := range []struct {
		name, host, path string
		h                map[string]string
		code             int
		body             string
		headers          map[string]string
	}{
		{"rewrite-target with captures", "app.example.com", "/API/users?page=2", nil, 200, "app GET /users?page=2",
			map[string]string{"Echo-Host": "app.internal", "Echo-X-Forwarded-Prefix": "/api"}},
		{"rewrite-target, the bare prefix", "app.example.com", "/api", nil, 200, "app GET /", nil},
		{"pathType Exact", "app.example.com", "/login", nil, 200, "app GET /login", nil},
		{"pathType Exact is not a prefix", "app.example.com", "/login/x", nil, 404, "", nil},
		{"permanent-redirect with nginx variables", "old.example.com", "/a?b=1", nil, 301, "", map[string]string{"Location": "https://new.example.com/a?b=1"}},
		{"app-root", "root.example.com", "/", nil, 302, "", map[string]string{"Location": "http://root.example.com/dashboard"}},
		{"below app-root is served", "root.example.com", "/dashboard", nil, 200, "app GET /dashboard", nil},
		{"server-alias", "www.root.example.com", "/dashboard", nil, 200, "app GET /dashboard", nil},
		{"app-root on the alias", "www.root.example.com", "/", nil, 302, "", map[string]string{"Location": "http://www.root.example.com/dashboard"}},
		{"canary-by-header always", "canary.example.com", "/", map[string]string{"X-Canary": "always"}, 200, "canary GET /", nil},
		{"canary-by-header never", "canary.example.com", "/", map[string]string{"X-Canary": "never"}, 200, "app GET /", nil},
		{"canary without the header (weight 0)", "canary.example.com", "/", nil, 200, "app GET /", nil},
		{"ssl-redirect for the TLS host only", "secure.example.com", "/x?y=1", nil, 308, "", map[string]string{"Location": "https://secure.example.com/x?y=1"}},
	} {
		h := map[string]string{"Host": c.host}
		for k, v := range c.h {
			h[k] = v
		}
		got := do(t, cl, "GET", "http://"+c.host+c.path, h)
		if got.code != c.code || !strings.HasPrefix(got.body, c.body) {
			t.Errorf("%s: GET %s%s = %d %q; want %d %q", c.name, c.host, c.path, got.code, got.body, c.code, c.body)
		}
		for k, v := range c.headers {
			if g := strings.Join(got.header.Values(k), ","); g != v {
				t.Errorf("%s: %s = %q; want %q", c.name, k, g, v)
			}
		}
	}
	tls := client(srv.Addr("port-443"), ca.Pool())
	if got := do(t, tls, "GET", "https://secure.example.com/x", nil); got.code != 200 || got.body != "app GET /x" {
		t.Errorf("the TLS host over HTTPS: %d %q", got.code, got.body)
	}
}
