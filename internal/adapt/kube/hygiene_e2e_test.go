package kube

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sturdyproxy/sturdy/internal/server"
)

// metric reads one sample of srv's /metrics (name with its labels, as
// exposed), or -1 when it is absent.
func metric(t *testing.T, srv *server.Server, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + srv.AdminAddr() + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// Issue 34 item 5 on a real API server: a new status leader posts no
// Ingress event again that an earlier one posted; only TLS Secrets are
// cached; and the controller's metrics say what it translated, wrote and
// whether it leads.
func TestFleetHygiene(t *testing.T) {
	c := env.Cluster(t)
	ns := c.Namespace(t, "hygiene")
	ctx := context.Background()
	f := &fleet{addr: map[string]string{}}
	f.backend(t, "192.0.2.81:8080", "app")
	must(c.Client.CoreV1().Services(ns).Create(ctx, svcObj(ns, "app"), metav1.CreateOptions{}))
	must(c.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, sliceObj(ns, "app", "192.0.2.81"), metav1.CreateOptions{}))
	ca := testpkiCA(t)
	crt, key := ca.Issue(t, leaf("app.example.com"))
	must(c.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}}, metav1.CreateOptions{}))
	must(c.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-password"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"password": []byte("hunter2")}}, metav1.CreateOptions{}))
	ing := ingressObj(ns, "app", map[string]string{nginxPrefix + "no-such-annotation": "x"}, "app.example.com", "app", "app-tls")
	ing.Spec.IngressClassName = ptr(ns)
	must(c.Client.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}))
	events := func(name string) int {
		evs, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return -1
		}
		n := 0
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == name && strings.Contains(e.Message, "no-such-annotation") {
				n++
			}
		}
		return n
	}

	a, ctl, _ := sturdyWith(t, c, ns, f, "replica-a", "")
	waitFor(t, "replica a leads and posts the event", 30*time.Second, func() bool {
		return metric(t, a, "sturdy_kubernetes_status_leader") == 1 && events("app") == 1
	})
	snap, err := ctl.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range snap.Secrets {
		if s.Type != corev1.SecretTypeTLS {
			t.Errorf("Secret %s/%s of type %s is cached; only kubernetes.io/tls ones are read", s.Namespace, s.Name, s.Type)
		}
	}
	if len(snap.Secrets) != 1 {
		t.Errorf("%d Secrets cached; want the one TLS Secret", len(snap.Secrets))
	}
	for series, want := range map[string]float64{
		`sturdy_kubernetes_objects{kind="Ingress",state="served"}`:             1,
		`sturdy_kubernetes_objects{kind="Gateway",state="refused"}`:            0,
		`sturdy_kubernetes_status_leaderships_total`:                           1,
		`sturdy_kubernetes_status_writes_total{kind="Event",result="success"}`: 1,
	} {
		if got := metric(t, a, series); got != want {
			t.Errorf("%s = %v; want %v", series, got, want)
		}
	}
	if got := metric(t, a, "sturdy_kubernetes_last_sync_timestamp_seconds"); got < float64(time.Now().Add(-time.Hour).Unix()) {
		t.Errorf("last sync = %v; want the time of the first sync", got)
	}
	waitFor(t, "the Ingress's status written", 20*time.Second, func() bool {
		return metric(t, a, `sturdy_kubernetes_status_writes_total{kind="Ingress",result="success"}`) >= 1
	})

	// a stops; b takes the Lease and writes status, and posts the event
	// of a new Ingress, but not the first one's again.
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	a.Shutdown(sctx)
	cancel()
	b, _, _ := sturdyWith(t, c, ns, f, "replica-b", "")
	waitFor(t, "replica b leads", 30*time.Second, func() bool { return metric(t, b, "sturdy_kubernetes_status_leader") == 1 })
	later := ingressObj(ns, "later", map[string]string{nginxPrefix + "no-such-annotation": "y"}, "later.example.com", "app", "")
	later.Spec.IngressClassName = ptr(ns)
	must(c.Client.NetworkingV1().Ingresses(ns).Create(ctx, later, metav1.CreateOptions{}))
	// b writes every Ingress's events in each pass, the first Ingress's
	// before or with the new one's.
	waitFor(t, "replica b posts the new Ingress's event", 20*time.Second, func() bool { return events("later") == 1 })
	if n := events("app"); n != 1 {
		t.Errorf("%d events for the first Ingress's annotation after a change of leader; want still 1", n)
	}
	if got := metric(t, b, `sturdy_kubernetes_status_writes_total{kind="Event",result="success"}`); got != 1 {
		t.Errorf("replica b posted %v events; want 1, the new Ingress's", got)
	}
}
