package kube

import (
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

// Issue 34 item 5: the lint warnings of translated pools (a Service with
// one ready pod is a pool with a single host) are one line per object,
// logged again only when that object's warnings change: not once per
// pool, and not whenever pool indices shift.
func TestRiskyConfigSummarisedOncePerObject(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	c := &Controller{log: slog.New(slog.NewTextHandler(logs, nil))}
	run := func(snap *Snapshot) {
		t.Helper()
		res := Translate(Input{Base: pooledBase(t), Snap: snap})
		if err := res.Config.Finish(); err != nil {
			t.Fatal(err)
		}
		c.lint(res.Config, res.Origins)
	}
	snap := classSnap()
	port80(snap, "m", 0, "sm")
	port80(snap, "z", 1, "sz")
	// z's route sends to a second single-host Service too: still one line.
	z := snap.HTTPRoutes[1]
	z.Spec.Rules = append(z.Spec.Rules, gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchPathPrefix), Value: ptr("/b")}}}, BackendRefs: to("sz2")})
	snap.Services = append(snap.Services, service("infra", "sz2", 80))
	snap.EndpointSlices = append(snap.EndpointSlices, slice("infra", "sz2", ep("10.0.9.2", true, true, false)))
	run(snap)
	lines := strings.Count(logs.String(), "what sturdy check would warn of")
	if lines != 2 || !strings.Contains(logs.String(), "object=\"HTTPRoute infra/z\" warnings=2") || strings.Contains(logs.String(), "Kubernetes: pools[") {
		t.Fatalf("log after the first sync (want one line for each of the two routes):\n%s", logs.String())
	}
	// A new Service sorted before the others shifts every pool's index.
	port80(snap, "a", 2, "sa")
	run(snap)
	if got := strings.Count(logs.String(), "what sturdy check would warn of"); got != 3 {
		t.Errorf("after a new route: %d lines; want one more, for it alone:\n%s", got, logs.String())
	}
	// The file's own warnings stay one a line, as in file mode.
	cfg := &config.Config{Pools: []config.Pool{{Name: "mine", Hosts: []config.Host{{Addr: "127.0.0.1:1"}}}}}
	c.lint(cfg, nil)
	if !strings.Contains(logs.String(), `msg="kubernetes: risky config" at=": pools[0].hosts: pool \"mine\" has a single host`) {
		t.Errorf("a warning of the file's own part was not logged:\n%s", logs.String())
	}
}

// An Ingress that names no class is sturdy's when sturdy's IngressClass
// is the cluster's default, and only then.
func TestDefaultIngressClass(t *testing.T) {
	ing := ingress("app", "app", nil, "app.example.com", "/", "web", "")
	ing.Spec.IngressClassName = nil
	snap := &Snapshot{Ingresses: []*networkingv1.Ingress{ing}, Services: []*corev1.Service{service("app", "web", 80)}}
	if res := Translate(Input{Base: base(t), Snap: snap}); len(res.Ingresses) != 0 {
		t.Fatal("an Ingress without a class was served while no IngressClass is the default")
	}
	for _, def := range []string{"false", "true"} {
		snap.IngressClasses = []*networkingv1.IngressClass{{ObjectMeta: metav1.ObjectMeta{Name: "sturdy",
			Annotations: map[string]string{networkingv1.AnnotationIsDefaultIngressClass: def}}}}
		res := Translate(Input{Base: base(t), Snap: snap})
		if _, served := res.Ingresses[Ref{"Ingress", "app", "app"}]; served != (def == "true") {
			t.Errorf("is-default-class %s: served = %v", def, served)
		}
	}
}

// docs/observability.md describes every metric of the controller.
func TestControllerMetricsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range controllerSet {
		name := regexp.MustCompile(`fqName: "([^"]+)"`).FindStringSubmatch(d.String())
		if name == nil {
			t.Fatalf("no name in %s", d)
		}
		if !strings.Contains(string(doc), "| `"+name[1]+"` |") {
			t.Errorf("docs/observability.md has no table row for %s", name[1])
		}
	}
}
