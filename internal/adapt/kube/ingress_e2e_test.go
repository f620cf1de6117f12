package kube

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An Ingress written for ingress-nginx, with the common annotations,
// works on sturdy against a real API server: TLS with ssl-redirect,
// proxy-body-size, whitelist-source-range, auth-url, limit-rps,
// timeouts and a weighted canary; an annotation sturdy does not know
// becomes a Warning event, a server-snippet refuses its Ingress, and the
// served Ingress gets its load-balancer address.
func TestIngressNginxAnnotationsWork(t *testing.T) {
	c := env.Cluster(t)
	ns := c.Namespace(t, "ing-e2e")
	ctx := context.Background()
	f := &fleet{addr: map[string]string{}}
	f.backend(t, "192.0.2.31:8080", "app")
	f.backend(t, "192.0.2.32:8080", "canary")
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer good" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("X-User", "alice")
	}))
	t.Cleanup(auth.Close)

	ca := testpkiCA(t)
	crt, key := ca.Issue(t, leaf("app.example.com"))
	must(c.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}, metav1.CreateOptions{}))
	for _, s := range []struct{ name, addr string }{{"app", "192.0.2.31"}, {"app-canary", "192.0.2.32"}} {
		must(c.Client.CoreV1().Services(ns).Create(ctx, svcObj(ns, s.name), metav1.CreateOptions{}))
		must(c.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, sliceObj(ns, s.name, s.addr), metav1.CreateOptions{}))
	}
	a := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[nginxPrefix+kv[i]] = kv[i+1]
		}
		return m
	}
	main := ingressObj(ns, "app", a("proxy-body-size", "1k", "proxy-read-timeout", "30", "proxy-connect-timeout", "2",
		"whitelist-source-range", "127.0.0.1/32", "auth-url", auth.URL+"/check", "auth-response-headers", "X-User",
		"limit-rps", "1000", "frobnicate", "on"), "app.example.com", "app", "app-tls")
	canary := ingressObj(ns, "app-canary", a("canary", "true", "canary-weight", "50"), "app.example.com", "app-canary", "")
	snippet := ingressObj(ns, "snippet", a("server-snippet", "location /x { return 200; }"), "snip.example.com", "app", "")
	for _, ing := range []*networkingv1.Ingress{main, canary, snippet} {
		ing.Spec.IngressClassName = ptr(ns)
		must(c.Client.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}))
	}

	srv, ctl := sturdyFor(t, c, ns, f, "replica-a")
	waitFor(t, "the first sync", 30*time.Second, func() bool { ok, _ := ctl.Ready(); return ok && srv.Addr("port-443") != "" })
	https := client(srv.Addr("port-443"), ca.Pool())
	req := func(method, path, token string, body string) (*http.Response, string) {
		r, _ := http.NewRequest(method, "https://app.example.com"+path, strings.NewReader(body))
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := https.Do(r)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	if resp, _ := req("GET", "/", "bad", ""); resp.StatusCode != 401 && resp.StatusCode != 403 {
		t.Errorf("auth-url: a bad token got %d", resp.StatusCode)
	}
	if resp, _ := req("POST", "/upload", "good", strings.Repeat("x", 4096)); resp.StatusCode != 413 {
		t.Errorf("proxy-body-size 1k: a 4 KiB body got %d, want 413", resp.StatusCode)
	}
	seen := map[string]int{}
	for range 200 {
		resp, body := req("GET", "/", "good", "")
		if resp.StatusCode != 200 {
			t.Fatalf("GET / = %d %q", resp.StatusCode, body)
		}
		seen[strings.Fields(body)[0]]++
	}
	if seen["app"] < 60 || seen["canary"] < 60 {
		t.Errorf("canary-weight 50: app %d, canary %d of 200", seen["app"], seen["canary"])
	}
	outsider := client(srv.Addr("port-443"), ca.Pool())
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.9")}}
	outsider.Transport.(*http.Transport).DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", srv.Addr("port-443"))
	}
	if code, _, _, err := get(outsider, "https://app.example.com/"); err != nil || code != 403 {
		t.Errorf("whitelist-source-range 127.0.0.1/32: a client from 127.0.0.9 got %d, %v; want 403", code, err)
	}
	plain := client(srv.Addr("port-80"), nil)
	code, _, _, err := get(plain, "http://app.example.com/login?next=/")
	if err != nil || code != 308 {
		t.Errorf("ssl-redirect (the default with TLS): port 80 answered %d, %v; want 308", code, err)
	}

	waitFor(t, "the load-balancer address and the events", 20*time.Second, func() bool {
		ing, err := c.Client.NetworkingV1().Ingresses(ns).Get(ctx, "app", metav1.GetOptions{})
		if err != nil || len(ing.Status.LoadBalancer.Ingress) != 1 || ing.Status.LoadBalancer.Ingress[0].IP != "192.0.2.1" {
			return false
		}
		evs, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		var unknown, refused bool
		for _, e := range evs.Items {
			unknown = unknown || e.InvolvedObject.Name == "app" && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "frobnicate is not understood")
			refused = refused || e.InvolvedObject.Name == "snippet" && e.Reason == "NotServed" && strings.Contains(e.Message, "server-snippet")
		}
		return unknown && refused
	})
	snip, _ := c.Client.NetworkingV1().Ingresses(ns).Get(ctx, "snippet", metav1.GetOptions{})
	if len(snip.Status.LoadBalancer.Ingress) != 0 {
		t.Error("the refused Ingress was given an address as if it were served")
	}
}

func ingressObj(ns, name string, ann map[string]string, host, svc, tlsSecret string) *networkingv1.Ingress {
	ing := ingress(ns, name, ann, host, "/", svc, tlsSecret)
	ing.CreationTimestamp = metav1.Time{}
	ing.Generation = 0
	return ing
}

// custom-headers on a real API server: while the named ConfigMap is
// missing the Ingress answers 503 and an event says why; once it exists
// its entries are headers of every answer, and a change to it applies,
// with no change to the Ingress (the ConfigMap's own informer wakes the
// translation).
func TestIngressCustomHeadersFollowTheirConfigMap(t *testing.T) {
	c := env.Cluster(t)
	ns := c.Namespace(t, "ing-headers")
	ctx := context.Background()
	f := &fleet{addr: map[string]string{}}
	f.backend(t, "192.0.2.71:8080", "app")
	must(c.Client.CoreV1().Services(ns).Create(ctx, svcObj(ns, "app"), metav1.CreateOptions{}))
	must(c.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, sliceObj(ns, "app", "192.0.2.71"), metav1.CreateOptions{}))
	ing := ingressObj(ns, "app", map[string]string{nginxPrefix + "custom-headers": ns + "/security"}, "app.example.com", "app", "")
	ing.Spec.IngressClassName = ptr(ns)
	must(c.Client.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}))
	// Another ConfigMap, which nothing names, sits in the same cache.
	must(c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "unrelated"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}))

	srv, ctl := sturdyFor(t, c, ns, f, "replica-a")
	waitFor(t, "the first sync", 30*time.Second, func() bool { ok, _ := ctl.Ready(); return ok && srv.Addr("port-80") != "" })
	plain := client(srv.Addr("port-80"), nil)
	header := func() (int, string) {
		resp, err := plain.Get("http://app.example.com/")
		if err != nil {
			return 0, err.Error()
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("X-Frame-Options")
	}
	if code, _ := header(); code != 503 {
		t.Errorf("with its ConfigMap missing the Ingress answered %d; want 503, as ingress-nginx", code)
	}
	waitFor(t, "the event about the missing ConfigMap", 20*time.Second, func() bool {
		evs, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		return err == nil && slices.ContainsFunc(evs.Items, func(e corev1.Event) bool {
			return e.InvolvedObject.Name == "app" && strings.Contains(e.Message, "ConfigMap "+ns+"/security does not exist")
		})
	})

	cm := must(c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "security"},
		Data: map[string]string{"X-Frame-Options": "DENY"}}, metav1.CreateOptions{}))
	waitFor(t, "the ConfigMap's header on the answers", 10*time.Second, func() bool {
		code, v := header()
		return code == 200 && v == "DENY"
	})
	cm.Data["X-Frame-Options"] = "SAMEORIGIN"
	must(c.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}))
	waitFor(t, "the ConfigMap's change on the answers", 10*time.Second, func() bool {
		code, v := header()
		return code == 200 && v == "SAMEORIGIN"
	})
}
