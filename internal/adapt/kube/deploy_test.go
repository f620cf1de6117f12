package kube

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/sturdyproxy/sturdy/internal/adapt/kube/kubetest"
	"github.com/sturdyproxy/sturdy/internal/config"
)

const gatewayManifests = "../../../deploy/kubernetes/gateway/"

// docs splits a manifest file into its YAML documents.
func docs(t *testing.T, file string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(gatewayManifests + file)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, d := range bytes.Split(b, []byte("\n---\n")) {
		if len(bytes.TrimSpace(d)) > 0 {
			out = append(out, d)
		}
	}
	return out
}

func strict[T any](t *testing.T, doc []byte) *T {
	t.Helper()
	v := new(T)
	if err := yaml.UnmarshalStrict(doc, v); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	return v
}

// The gateway variant's config is a valid sturdy config in Kubernetes
// mode, and its deployment serves it as the docs say.
func TestGatewayManifests(t *testing.T) {
	cm := strict[corev1.ConfigMap](t, docs(t, "configmap.yaml")[0])
	cfg, err := config.Parse([]byte(cm.Data["sturdy.yaml"]), "configmap.yaml")
	if err != nil {
		t.Fatalf("the ConfigMap's sturdy.yaml: %v", err)
	}
	if cfg.Kubernetes == nil || cfg.Kubernetes.Listen(80) != "0.0.0.0:8080" || cfg.Kubernetes.Listen(443) != "0.0.0.0:8443" {
		t.Fatalf("kubernetes section: %+v", cfg.Kubernetes)
	}
	d := strict[appsv1.Deployment](t, docs(t, "deployment.yaml")[0])
	if *d.Spec.Replicas < 2 {
		t.Errorf("%d replicas; the point of a fleet is several", *d.Spec.Replicas)
	}
	ct := d.Spec.Template.Spec.Containers[0]
	if p := ct.ReadinessProbe; p == nil || p.Exec == nil || !strings.Contains(strings.Join(p.Exec.Command, " "), "/readyz") {
		t.Errorf("readiness is not /readyz: %+v", ct.ReadinessProbe)
	}
	// The sturdy image refuses a config with a kubernetes section: Kubernetes
	// mode is the sturdy-gateway image and binary (the Dockerfile's
	// sturdy-gateway target), in the probes too.
	if !strings.HasPrefix(ct.Image, "sturdy-gateway:") || !slices.Equal(ct.Args, []string{"run", "-c", "/etc/sturdy/sturdy.yaml"}) {
		t.Errorf("the container runs %s %v; want the sturdy-gateway image's run", ct.Image, ct.Args)
	}
	for _, p := range []*corev1.Probe{ct.ReadinessProbe, ct.LivenessProbe} {
		if p == nil || p.Exec == nil || !slices.Equal(p.Exec.Command[:2], []string{"/usr/bin/sturdy-gateway", "healthcheck"}) {
			t.Errorf("a probe does not run /usr/bin/sturdy-gateway healthcheck: %+v", p)
		}
	}
	if !slices.ContainsFunc(ct.Env, func(e corev1.EnvVar) bool { return e.Name == "POD_NAME" && e.ValueFrom != nil }) {
		t.Error("POD_NAME (the Lease identity) is not set from the pod's name")
	}
	if g := *d.Spec.Template.Spec.TerminationGracePeriodSeconds; float64(g) < (cfg.ShutdownDelay.D() + cfg.ShutdownGrace.D()).Seconds() {
		t.Errorf("terminationGracePeriodSeconds %d does not cover shutdown_delay + shutdown_grace", g)
	}
	svc := strict[corev1.Service](t, docs(t, "service.yaml")[0])
	for _, p := range svc.Spec.Ports {
		if !slices.ContainsFunc(ct.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == p.TargetPort.StrVal }) {
			t.Errorf("Service port %s targets %q, which the container does not name", p.Name, p.TargetPort.StrVal)
		}
	}
	strict[appsv1.Deployment](t, docs(t, "deployment.yaml")[0])
	if pdb := docs(t, "pdb.yaml"); len(pdb) != 1 {
		t.Error("no PodDisruptionBudget")
	}
}

// rbacFor applies the manifests' RBAC to a service account of namespace
// ns (the Lease's namespace too) and returns a config that acts as it:
// the end-to-end tests run sturdy with exactly these rights, so a missing
// one fails them.
func rbacFor(t *testing.T, c *kubetest.Cluster, ns string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "sturdy", metav1.GetOptions{}); err == nil {
		return tokenFor(t, c, ns) // a second replica
	}
	must(c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sturdy"}}, metav1.CreateOptions{}))
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "sturdy", Namespace: ns}}
	for _, d := range docs(t, "rbac.yaml") {
		var tm metav1.TypeMeta
		yaml.Unmarshal(d, &tm)
		switch tm.Kind {
		case "ClusterRole":
			r := strict[rbacv1.ClusterRole](t, d)
			r.Name += "-" + ns
			must(c.Client.RbacV1().ClusterRoles().Create(ctx, r, metav1.CreateOptions{}))
			t.Cleanup(func() { c.Client.RbacV1().ClusterRoles().Delete(context.Background(), r.Name, metav1.DeleteOptions{}) })
		case "ClusterRoleBinding":
			b := strict[rbacv1.ClusterRoleBinding](t, d)
			b.Name += "-" + ns
			b.RoleRef.Name += "-" + ns
			b.Subjects = subject
			must(c.Client.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}))
			t.Cleanup(func() {
				c.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), b.Name, metav1.DeleteOptions{})
			})
		case "Role":
			r := strict[rbacv1.Role](t, d)
			r.Namespace = ns
			must(c.Client.RbacV1().Roles(ns).Create(ctx, r, metav1.CreateOptions{}))
		case "RoleBinding":
			b := strict[rbacv1.RoleBinding](t, d)
			b.Namespace = ns
			b.Subjects = subject
			must(c.Client.RbacV1().RoleBindings(ns).Create(ctx, b, metav1.CreateOptions{}))
		default:
			t.Fatalf("rbac.yaml: unexpected kind %q", tm.Kind)
		}
	}
	return tokenFor(t, c, ns)
}

func tokenFor(t *testing.T, c *kubetest.Cluster, ns string) *rest.Config {
	tok := must(c.Client.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), "sturdy", &authnv1.TokenRequest{}, metav1.CreateOptions{}))
	rc := rest.AnonymousClientConfig(c.Config)
	rc.BearerToken = tok.Status.Token
	return rc
}
