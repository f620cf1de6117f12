package kube

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sturdyproxy/sturdy/internal/config"
)

func TestLowerMatch(t *testing.T) {
	exact, prefix, regex := gwv1.PathMatchExact, gwv1.PathMatchPathPrefix, gwv1.PathMatchRegularExpression
	hre, qre := gwv1.HeaderMatchRegularExpression, gwv1.QueryParamMatchRegularExpression
	get := gwv1.HTTPMethodGet
	for _, c := range []struct {
		name string
		in   gwv1.HTTPRouteMatch
		want config.RouteMatch
		why  string
	}{
		{"no path is prefix /", gwv1.HTTPRouteMatch{}, config.RouteMatch{Path: &config.PathMatch{Prefix: "/"}}, ""},
		{"exact", gwv1.HTTPRouteMatch{Path: &gwv1.HTTPPathMatch{Type: &exact, Value: ptr("/login/")}}, config.RouteMatch{Path: &config.PathMatch{Exact: "/login/"}}, ""},
		{"a prefix's trailing slash is ignored", gwv1.HTTPRouteMatch{Path: &gwv1.HTTPPathMatch{Type: &prefix, Value: ptr("/api/")}}, config.RouteMatch{Path: &config.PathMatch{Prefix: "/api"}}, ""},
		{"regex matches the whole path", gwv1.HTTPRouteMatch{Path: &gwv1.HTTPPathMatch{Type: &regex, Value: ptr(`/v[0-9]+/.*`)}}, config.RouteMatch{Path: &config.PathMatch{Regex: `^(?:/v[0-9]+/.*)$`}}, ""},
		{"a regex RE2 refuses drops the rule", gwv1.HTTPRouteMatch{Path: &gwv1.HTTPPathMatch{Type: &regex, Value: ptr(`/(?=x)`)}}, config.RouteMatch{}, "path regular expression"},
		{"a prefix must start with /", gwv1.HTTPRouteMatch{Path: &gwv1.HTTPPathMatch{Type: &prefix, Value: ptr("api")}}, config.RouteMatch{}, "does not start with /"},
		{"method, headers and query; the first of equivalent names counts", gwv1.HTTPRouteMatch{
			Method:      &get,
			Headers:     []gwv1.HTTPHeaderMatch{{Name: "X-Env", Value: "prod"}, {Name: "x-env", Value: "dev"}, {Type: &hre, Name: "X-Id", Value: "[0-9]+"}},
			QueryParams: []gwv1.HTTPQueryParamMatch{{Name: "page", Value: "1"}, {Name: "page", Value: "2"}, {Name: "Page", Value: "3"}, {Type: &qre, Name: "q", Value: "a|b"}},
		}, config.RouteMatch{
			Path:    &config.PathMatch{Prefix: "/"},
			Methods: []string{"GET"},
			Headers: []config.ValueMatch{{Name: "X-Env", Exact: "prod"}, {Name: "X-Id", Regex: "^(?:[0-9]+)$"}},
			Query:   []config.ValueMatch{{Name: "page", Exact: "1"}, {Name: "Page", Exact: "3"}, {Name: "q", Regex: "^(?:a|b)$"}},
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, why := lowerMatch(c.in)
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

// oneRoute is a Gateway with an HTTP listener on port 80 and one HTTPRoute
// of the given rules, with Services web, api and shadow.
func oneRoute(rules ...gwv1.HTTPRouteRule) *Snapshot {
	svcs := []string{"web", "api", "shadow"}
	s := &Snapshot{
		GatewayClasses: []*gwv1.GatewayClass{{ObjectMeta: objMeta("", "sturdy", 0), Spec: gwv1.GatewayClassSpec{ControllerName: config.DefaultControllerName}}},
		Gateways: []*gwv1.Gateway{{ObjectMeta: objMeta("a", "gw", 0), Spec: gwv1.GatewaySpec{GatewayClassName: "sturdy",
			Listeners: []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}}}}},
		HTTPRoutes: []*gwv1.HTTPRoute{{ObjectMeta: objMeta("a", "r", 1), Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}}, Rules: rules}}},
	}
	for i, n := range svcs {
		s.Services = append(s.Services, service("a", n, 80))
		s.EndpointSlices = append(s.EndpointSlices, slice("a", n, ep("10.9.0."+itoa(i+1), true, true, false)))
	}
	return s
}

func to(names ...string) []gwv1.HTTPBackendRef {
	var out []gwv1.HTTPBackendRef
	for _, n := range names {
		name, w, _ := strings.Cut(n, ":")
		br := gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name), Port: ptr(gwv1.PortNumber(80))}}}
		if w != "" {
			br.Weight = ptr(int32(atoi(w)))
		}
		out = append(out, br)
	}
	return out
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

func prefixMatch(p string) []gwv1.HTTPRouteMatch {
	return []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchPathPrefix), Value: ptr(p)}}}
}

// Every filter as the route keys it becomes, through the same validation
// and compile step as a file.
func TestFilterTranslation(t *testing.T) {
	full, pre := gwv1.FullPathHTTPPathModifier, gwv1.PrefixMatchHTTPPathModifier
	hdr := func(set, add map[string]string, remove ...string) *gwv1.HTTPHeaderFilter {
		h := &gwv1.HTTPHeaderFilter{Remove: remove}
		for k, v := range set {
			h.Set = append(h.Set, gwv1.HTTPHeader{Name: gwv1.HTTPHeaderName(k), Value: v})
		}
		for k, v := range add {
			h.Add = append(h.Add, gwv1.HTTPHeader{Name: gwv1.HTTPHeaderName(k), Value: v})
		}
		return h
	}
	for _, c := range []struct {
		name    string
		rule    gwv1.HTTPRouteRule
		check   func(t *testing.T, r config.Route)
		dropped string // the rule is left out, and PartiallyInvalid or Accepted=False says this
	}{
		{"RequestHeaderModifier: values are literal, Host is host_header", gwv1.HTTPRouteRule{BackendRefs: to("web"), Filters: []gwv1.HTTPRouteFilter{{
			Type: gwv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: hdr(map[string]string{"X-Price": "$5", "Host": "internal.example"}, map[string]string{"X-Trace": "gw"}, "X-Debug")}}},
			func(t *testing.T, r config.Route) {
				want := &config.HeaderRules{Set: map[string]string{"X-Price": "$$5"}, Add: map[string]string{"X-Trace": "gw"}, Remove: []string{"X-Debug"}}
				if !reflect.DeepEqual(r.RequestHeaders, want) || r.HostHeader != "internal.example" {
					t.Errorf("request_headers %+v host_header %q", r.RequestHeaders, r.HostHeader)
				}
			}, ""},
		{"ResponseHeaderModifier", gwv1.HTTPRouteRule{BackendRefs: to("web"), Filters: []gwv1.HTTPRouteFilter{{
			Type: gwv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: hdr(map[string]string{"Cache-Control": "no-store"}, nil, "Server")}}},
			func(t *testing.T, r config.Route) {
				if h := r.ResponseHeaders; h == nil || h.Set["Cache-Control"] != "no-store" || h.Remove[0] != "Server" {
					t.Errorf("response_headers %+v", h)
				}
			}, ""},
		{"a header both set and added", gwv1.HTTPRouteRule{BackendRefs: to("web"), Filters: []gwv1.HTTPRouteFilter{{
			Type: gwv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: hdr(map[string]string{"X-A": "1"}, map[string]string{"x-a": "2"})}}}, nil, "both in set and add"},
		{"a hop-by-hop header", gwv1.HTTPRouteRule{BackendRefs: to("web"), Filters: []gwv1.HTTPRouteFilter{{
			Type: gwv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: hdr(nil, nil, "Connection")}}}, nil, "hop-by-hop"},
		{"RequestRedirect without a scheme keeps the Gateway listener's port", gwv1.HTTPRouteRule{BackendRefs: to("web"), Filters: []gwv1.HTTPRouteFilter{{
			Type: gwv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gwv1.HTTPRequestRedirectFilter{Hostname: ptr(gwv1.PreciseHostname("new.example")), Path: &gwv1.HTTPPathModifier{Type: full, ReplaceFullPath: ptr("/moved")}}}}},
			func(t *testing.T, r config.Route) {
				if rd := r.Redirect; rd == nil || *rd != (config.Redirect{Host: "new.example", Port: 80, Path: "/moved", Status: 302}) || r.Pool != "" {
					t.Errorf("redirect %+v pool %q; the backendRefs are never used", rd, r.Pool)
				}
			}, ""},
		{"RequestRedirect to HTTPS, prefix", gwv1.HTTPRouteRule{Matches: prefixMatch("/old"), Filters: []gwv1.HTTPRouteFilter{{
			Type: gwv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gwv1.HTTPRequestRedirectFilter{Scheme: ptr("https"), StatusCode: ptr(301), Path: &gwv1.HTTPPathModifier{Type: pre, ReplacePrefixMatch: ptr("/new")}}}}},
			func(t *testing.T, r config.Route) {
				if rd := r.Redirect; rd == nil || rd.Scheme != "https" || rd.Port != 0 || rd.Status != 301 || rd.Prefix == nil || *rd.Prefix != "/new" {
					t.Errorf("redirect %+v", rd)
				}
			}, ""},
		{"URLRewrite", gwv1.HTTPRouteRule{Matches: prefixMatch("/api/"), BackendRefs: to("api"), Filters: []gwv1.HTTPRouteFilter{{
			Type: gwv1.HTTPRouteFilterURLRewrite, URLRewrite: &gwv1.HTTPURLRewriteFilter{Hostname: ptr(gwv1.PreciseHostname("api.internal")), Path: &gwv1.HTTPPathModifier{Type: pre, ReplacePrefixMatch: ptr("/v2")}}}}},
			func(t *testing.T, r config.Route) {
				if rw := r.Rewrite; rw == nil || rw.Prefix == nil || *rw.Prefix != "/v2" || r.HostHeader != "api.internal" || r.Match.Path.Prefix != "/api" {
					t.Errorf("rewrite %+v host_header %q match %+v", rw, r.HostHeader, r.Match.Path)
				}
			}, ""},
		{"ReplacePrefixMatch with an exact match", gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchExact), Value: ptr("/a")}}}, BackendRefs: to("api"), Filters: []gwv1.HTTPRouteFilter{{
			Type: gwv1.HTTPRouteFilterURLRewrite, URLRewrite: &gwv1.HTTPURLRewriteFilter{Path: &gwv1.HTTPPathModifier{Type: pre, ReplacePrefixMatch: ptr("/b")}}}}}, nil, "not a PathPrefix"},
		{"RequestMirror, a fraction", gwv1.HTTPRouteRule{BackendRefs: to("web"), Filters: []gwv1.HTTPRouteFilter{{
			Type: gwv1.HTTPRouteFilterRequestMirror, RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: gwv1.BackendObjectReference{Name: "shadow", Port: ptr(gwv1.PortNumber(80))}, Fraction: &gwv1.Fraction{Numerator: 1, Denominator: ptr(int32(3))}}}}},
			func(t *testing.T, r config.Route) {
				if m := r.Mirror; m == nil || m.Pool != "svc/a/shadow/80" || m.Share != (config.Share{Num: 1, Den: 3}) {
					t.Errorf("mirror %+v", m)
				}
			}, ""},
		{"RequestMirror, a percentage", gwv1.HTTPRouteRule{BackendRefs: to("web"), Filters: []gwv1.HTTPRouteFilter{{
			Type: gwv1.HTTPRouteFilterRequestMirror, RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: gwv1.BackendObjectReference{Name: "shadow", Port: ptr(gwv1.PortNumber(80))}, Percent: ptr(int32(10))}}}},
			func(t *testing.T, r config.Route) {
				if m := r.Mirror; m == nil || m.Share.String() != "10%" {
					t.Errorf("mirror %+v", m)
				}
			}, ""},
		{"RequestMirror to a backend of the rule", gwv1.HTTPRouteRule{BackendRefs: to("web"), Filters: []gwv1.HTTPRouteFilter{{
			Type: gwv1.HTTPRouteFilterRequestMirror, RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: gwv1.BackendObjectReference{Name: "web", Port: ptr(gwv1.PortNumber(80))}}}}}, nil, "also sends to"},
		{"weights; weight 0 never chosen", gwv1.HTTPRouteRule{BackendRefs: to("web:3", "api:1", "shadow:0")},
			func(t *testing.T, r config.Route) {
				if want := []config.Backend{{Pool: "svc/a/web/80", Weight: 3}, {Pool: "svc/a/api/80", Weight: 1}}; !reflect.DeepEqual(r.Backends, want) {
					t.Errorf("backends %+v", r.Backends)
				}
			}, ""},
		{"an unresolved backend's share answers 500", gwv1.HTTPRouteRule{BackendRefs: to("web:1", "missing:1")},
			func(t *testing.T, r config.Route) {
				if len(r.Backends) != 2 || r.Backends[1].Pool != "httproute/a/r/0/unresolved" || r.Sorry.Status != 500 {
					t.Errorf("backends %+v sorry %+v", r.Backends, r.Sorry)
				}
			}, ""},
		{"no backendRefs answers 500", gwv1.HTTPRouteRule{},
			func(t *testing.T, r config.Route) {
				if r.Pool != "" || r.Respond == nil || r.Respond.Status != 500 || !strings.Contains(r.Respond.Body, "unresolved backend: the rule has no backendRefs") {
					t.Errorf("pool %q respond %+v", r.Pool, r.Respond)
				}
			}, ""},
		{"a missing Service answers 500 that says so, with no pool", gwv1.HTTPRouteRule{BackendRefs: to("missing")},
			func(t *testing.T, r config.Route) {
				if r.Pool != "" || r.Backends != nil || r.Respond == nil || r.Respond.Status != 500 || !strings.Contains(r.Respond.Body, "unresolved backend: Service a/missing does not exist") {
					t.Errorf("pool %q respond %+v", r.Pool, r.Respond)
				}
			}, ""},
		{"all weights 0 answers 500", gwv1.HTTPRouteRule{BackendRefs: to("web:0")},
			func(t *testing.T, r config.Route) {
				if r.Respond == nil || !strings.Contains(r.Respond.Body, "weight 0") {
					t.Errorf("respond %+v", r.Respond)
				}
			}, ""},
		{"an unknown extensionRef answers 500, never skipped", gwv1.HTTPRouteRule{BackendRefs: to("web"), Filters: []gwv1.HTTPRouteFilter{{
			Type: gwv1.HTTPRouteFilterExtensionRef, ExtensionRef: &gwv1.LocalObjectReference{Group: "example.com", Kind: "Auth", Name: "x"}}}},
			func(t *testing.T, r config.Route) {
				if r.Respond == nil || r.Respond.Status != 500 || r.Pool != "" || !strings.Contains(r.Respond.Body, "extensionRef") {
					t.Errorf("pool %q respond %+v", r.Pool, r.Respond)
				}
			}, ""},
		{"a single backendRef's filter is the rule's", gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: to("web")[0].BackendRef, Filters: []gwv1.HTTPRouteFilter{{
			Type: gwv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: hdr(map[string]string{"X-Backend": "web"}, nil)}}}}},
			func(t *testing.T, r config.Route) {
				if r.RequestHeaders == nil || r.RequestHeaders.Set["X-Backend"] != "web" || r.Pool != "svc/a/web/80" {
					t.Errorf("request_headers %+v pool %q", r.RequestHeaders, r.Pool)
				}
			}, ""},
		{"a filter on one of several backendRefs", gwv1.HTTPRouteRule{BackendRefs: append(to("api"), gwv1.HTTPBackendRef{BackendRef: to("web")[0].BackendRef, Filters: []gwv1.HTTPRouteFilter{{
			Type: gwv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: hdr(map[string]string{"X-Backend": "web"}, nil)}}})}, nil, "one of several backendRefs"},
		{"a request timeout", gwv1.HTTPRouteRule{BackendRefs: to("web"), Timeouts: &gwv1.HTTPRouteTimeouts{Request: ptr(gwv1.Duration("2s"))}},
			func(t *testing.T, r config.Route) {
				if r.Timeouts.Total.D().String() != "2s" || r.Timeouts.Connect.D().String() != "2s" {
					t.Errorf("timeouts %+v; connect may not outlast the total", r.Timeouts)
				}
			}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A second, plain rule keeps the route accepted when the first is dropped.
			res := Translate(Input{Base: base(t), Snap: oneRoute(c.rule, gwv1.HTTPRouteRule{Matches: prefixMatch("/other"), BackendRefs: to("web")})})
			finish(t, res)
			var got *config.Route
			for i, r := range res.Config.Routes {
				if r.Name == "httproute/a/r/0/0/port-80" {
					got = &res.Config.Routes[i]
				}
			}
			st := res.Routes[Ref{"HTTPRoute", "a", "r"}].Parents[0]
			if c.dropped != "" {
				if got != nil {
					t.Errorf("the rule was served: %+v", got)
				}
				if pi := condOf(st.Conditions, "PartiallyInvalid"); pi.Status != metav1.ConditionTrue || !strings.Contains(pi.Message, c.dropped) {
					t.Errorf("PartiallyInvalid = %+v; want it to say %q", pi, c.dropped)
				}
				return
			}
			if got == nil {
				t.Fatalf("the rule was not served: %+v", st.Conditions)
			}
			c.check(t, *got)
		})
	}
}

// Gateway API's precedence across rules and routes, asked of the route
// table the compile step builds from the translation.
func TestGatewayPrecedence(t *testing.T) {
	rule := func(m gwv1.HTTPRouteMatch) gwv1.HTTPRouteRule {
		return gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{m}, BackendRefs: to("web")}
	}
	path := func(typ gwv1.PathMatchType, v string) *gwv1.HTTPPathMatch {
		return &gwv1.HTTPPathMatch{Type: &typ, Value: &v}
	}
	pre := path(gwv1.PathMatchPathPrefix, "/pre")
	x1 := gwv1.HTTPHeaderMatch{Name: "X", Value: "1"}
	snap := oneRoute(
		rule(gwv1.HTTPRouteMatch{Path: path(gwv1.PathMatchExact, "/exact")}),                                   // 0
		rule(gwv1.HTTPRouteMatch{Path: pre}),                                                                   // 1
		rule(gwv1.HTTPRouteMatch{Path: pre, Method: ptr(gwv1.HTTPMethodPost)}),                                 // 2
		rule(gwv1.HTTPRouteMatch{Path: pre, Headers: []gwv1.HTTPHeaderMatch{x1}}),                              // 3
		rule(gwv1.HTTPRouteMatch{Path: pre, Headers: []gwv1.HTTPHeaderMatch{x1, {Name: "Y", Value: "2"}}}),     // 4
		rule(gwv1.HTTPRouteMatch{Path: pre, QueryParams: []gwv1.HTTPQueryParamMatch{{Name: "q", Value: "1"}}}), // 5
	)
	younger := &gwv1.HTTPRoute{ObjectMeta: objMeta("a", "b-younger", 5), Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}}, Rules: []gwv1.HTTPRouteRule{
			rule(gwv1.HTTPRouteMatch{Path: path(gwv1.PathMatchPathPrefix, "/pre/longer")}),                 // 0
			rule(gwv1.HTTPRouteMatch{Path: pre, Headers: []gwv1.HTTPHeaderMatch{{Name: "x", Value: "1"}}}), // 1: the same as r's rule 3
			rule(gwv1.HTTPRouteMatch{Path: path(gwv1.PathMatchPathPrefix, "/exact")}),                      // 2
		}}}
	hosted := &gwv1.HTTPRoute{ObjectMeta: objMeta("a", "c-hosted", 9), Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}}, Hostnames: []gwv1.Hostname{"a.example.com"},
		Rules: []gwv1.HTTPRouteRule{rule(gwv1.HTTPRouteMatch{Path: pre})}}}
	snap.HTTPRoutes = append(snap.HTTPRoutes, younger, hosted)
	res := Translate(Input{Base: base(t), Snap: snap})
	rt := finish(t, res)
	table := rt.Proxy.Listeners["port-80"].Table
	for _, c := range []struct {
		method, target string
		headers        map[string]string
		want           string // route and rule; "" for no route
	}{
		{"GET", "http://h/exact", nil, "r/0"},
		{"GET", "http://h/exact/x", nil, "b-younger/2"},
		{"GET", "http://h/pre", nil, "r/1"},
		{"GET", "http://h/prefix", nil, ""},
		{"POST", "http://h/pre", map[string]string{"X": "1"}, "r/2"}, // a method before headers
		{"GET", "http://h/pre", map[string]string{"X": "1"}, "r/3"},  // the older route's equal rule
		{"GET", "http://h/pre", map[string]string{"X": "1", "Y": "2"}, "r/4"},
		{"GET", "http://h/pre?q=1", nil, "r/5"},
		{"GET", "http://h/pre?q=1", map[string]string{"X": "1"}, "r/3"},                // headers before query
		{"GET", "http://h/pre/longer/z", map[string]string{"X": "1"}, "b-younger/0"},   // the longest prefix before headers
		{"GET", "http://a.example.com/pre", map[string]string{"X": "1"}, "c-hosted/0"}, // the exact hostname first
	} {
		req := httptest.NewRequest(c.method, c.target, nil)
		for k, v := range c.headers {
			req.Header.Set(k, v)
		}
		e, ok := table.MatchRequest(req)
		got := ""
		if ok {
			parts := strings.Split(e.Value.Name, "/") // httproute/ns/name/rule/match/listener
			got = parts[2] + "/" + parts[3]
		}
		if got != c.want {
			t.Errorf("%s %s %v chose %q; want %q", c.method, c.target, c.headers, got, c.want)
		}
	}
}

// Ingress path types, as the Ingress spec and ingress-nginx mean them.
func TestIngressPathTypes(t *testing.T) {
	exact, prefix, impl := networkingv1.PathTypeExact, networkingv1.PathTypePrefix, networkingv1.PathTypeImplementationSpecific
	ing := func(name string, typ networkingv1.PathType, path string, ann map[string]string) *networkingv1.Ingress {
		i := ingress("a", name, ann, "h.example.com", path, "web", "")
		i.Spec.Rules[0].HTTP.Paths[0].PathType = &typ
		return i
	}
	snap := &Snapshot{
		Services:       []*corev1.Service{service("a", "web", 80)},
		EndpointSlices: []*discoveryv1.EndpointSlice{slice("a", "web", ep("10.3.0.1", true, true, false))},
		Ingresses: []*networkingv1.Ingress{
			ing("exact", exact, "/login", nil),
			ing("prefix", prefix, "/shop/", nil),
			ing("impl", impl, "/img", nil),
			ing("regex", impl, "/v[0-9]+/", map[string]string{nginxPrefix + "use-regex": "true"}),
		},
	}
	res := Translate(Input{Base: base(t), Snap: snap})
	rt := finish(t, res)
	table := rt.Proxy.Listeners["port-80"].Table
	for _, c := range []struct{ path, want string }{
		{"/login", "exact"}, {"/login/", ""},
		{"/shop", "prefix"}, {"/shop/cart", "prefix"}, {"/shopping", ""},
		{"/img", "impl"}, {"/imgs/a.png", "impl"},
		{"/V2/x", "regex"}, {"/x/v2/", ""},
	} {
		e, ok := table.MatchRequest(httptest.NewRequest(http.MethodGet, "http://h.example.com"+c.path, nil))
		got := ""
		if ok {
			got = strings.Split(e.Value.Name, "/")[2]
		}
		if got != c.want {
			t.Errorf("%s chose %q; want %q", c.path, got, c.want)
		}
	}
}

// canary-by-header and canary-by-cookie come before the weight.
func TestIngressCanaryByHeaderAndCookie(t *testing.T) {
	snap := &Snapshot{
		Services:       []*corev1.Service{service("a", "web", 80), service("a", "web-v2", 80)},
		EndpointSlices: []*discoveryv1.EndpointSlice{slice("a", "web", ep("10.4.0.1", true, true, false)), slice("a", "web-v2", ep("10.4.0.2", true, true, false))},
		Ingresses: []*networkingv1.Ingress{
			ingress("a", "web", nil, "h.example.com", "/", "web", ""),
			ingress("a", "web-canary", map[string]string{nginxPrefix + "canary": "true", nginxPrefix + "canary-by-header": "X-Canary",
				nginxPrefix + "canary-by-cookie": "canary", nginxPrefix + "canary-weight": "10"}, "h.example.com", "/", "web-v2", ""),
		},
	}
	res := Translate(Input{Base: base(t), Snap: snap})
	finish(t, res)
	main, canary := "svc/a/web/80", "svc/a/web-v2/80"
	want := []config.Backend{
		{Pool: canary, Header: &config.ValueMatch{Name: "X-Canary", Exact: "always"}, Weight: 1},
		{Pool: main, Header: &config.ValueMatch{Name: "X-Canary", Exact: "never"}, Weight: 1},
		{Pool: canary, Cookie: &config.ValueMatch{Name: "canary", Exact: "always"}, Weight: 1},
		{Pool: main, Cookie: &config.ValueMatch{Name: "canary", Exact: "never"}, Weight: 1},
		{Pool: main, Weight: 90},
		{Pool: canary, Weight: 10},
	}
	if got := res.Config.Routes[0].Backends; !reflect.DeepEqual(got, want) {
		t.Errorf("backends:\n%+v\nwant\n%+v", got, want)
	}
}
