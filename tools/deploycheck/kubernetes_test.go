package deploycheck

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

const manifests = repo + "/deploy/kubernetes"

// objects are the manifests, each decoded strictly into its API type: an
// unknown or misspelt field, a wrong type or a bad quantity is an error.
type objects struct {
	namespaces []corev1.Namespace
	accounts   []corev1.ServiceAccount
	configMaps []corev1.ConfigMap
	deploys    []appsv1.Deployment
	services   []corev1.Service
	pdbs       []policyv1.PodDisruptionBudget
	files      []string // every manifest file but the kustomization
}

func decodeStrict[T any](t *testing.T, where string, doc []byte, into *[]T) {
	t.Helper()
	var v T
	if err := yaml.UnmarshalStrict(doc, &v); err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	*into = append(*into, v)
}

func load(t *testing.T) *objects {
	t.Helper()
	files, _ := filepath.Glob(manifests + "/*.yaml")
	if len(files) == 0 {
		t.Fatal("no manifests")
	}
	o := &objects{}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		o.files = append(o.files, filepath.Base(f))
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(data, []byte("\n---")) {
			where := fmt.Sprintf("%s (document %d)", filepath.Base(f), i+1)
			var tm v1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			switch tm.APIVersion + " " + tm.Kind {
			case "v1 Namespace":
				decodeStrict(t, where, doc, &o.namespaces)
			case "v1 ServiceAccount":
				decodeStrict(t, where, doc, &o.accounts)
			case "v1 ConfigMap":
				decodeStrict(t, where, doc, &o.configMaps)
			case "apps/v1 Deployment":
				decodeStrict(t, where, doc, &o.deploys)
			case "v1 Service":
				decodeStrict(t, where, doc, &o.services)
			case "policy/v1 PodDisruptionBudget":
				decodeStrict(t, where, doc, &o.pdbs)
			default:
				t.Errorf("%s: unexpected %s %s", where, tm.APIVersion, tm.Kind)
			}
		}
	}
	return o
}

// The manifests hold one of each object, in one namespace, with names the
// API server accepts, and the kustomization lists every file.
func TestManifestsDecodeStrictly(t *testing.T) {
	o := load(t)
	if len(o.namespaces) != 1 || len(o.accounts) != 1 || len(o.configMaps) != 1 || len(o.deploys) != 1 || len(o.services) != 1 || len(o.pdbs) != 1 {
		t.Fatalf("want one Namespace, ServiceAccount, ConfigMap, Deployment, Service and PodDisruptionBudget")
	}
	ns := o.namespaces[0].Name
	metas := []v1.ObjectMeta{o.accounts[0].ObjectMeta, o.configMaps[0].ObjectMeta, o.deploys[0].ObjectMeta, o.services[0].ObjectMeta, o.pdbs[0].ObjectMeta}
	for _, m := range append(metas, o.namespaces[0].ObjectMeta) {
		for _, msg := range validation.IsDNS1123Label(m.Name) {
			t.Errorf("name %q: %s", m.Name, msg)
		}
	}
	for _, m := range metas {
		if m.Namespace != ns {
			t.Errorf("%s is in namespace %q, not %q", m.Name, m.Namespace, ns)
		}
	}
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	data, err := os.ReadFile(manifests + "/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &k); err != nil || k.Kind != "Kustomization" {
		t.Fatalf("kustomization.yaml: %v %q", err, k.Kind)
	}
	got := slices.Clone(k.Resources)
	sort.Strings(got)
	if !slices.Equal(got, o.files) {
		t.Errorf("kustomization lists %v; the files are %v", got, o.files)
	}
}

// The Deployment survives a node drain and a rollout with no dropped
// request, is probed on the admin listener, runs locked down, and the
// Service and the budget select its pods.
func TestDeploymentIsHighlyAvailableAndLockedDown(t *testing.T) {
	o := load(t)
	if len(o.deploys) != 1 || len(o.services) != 1 || len(o.pdbs) != 1 || len(o.configMaps) != 1 {
		t.Fatal("objects missing")
	}
	d, svc, pdb, cm := o.deploys[0], o.services[0], o.pdbs[0], o.configMaps[0]
	spec := d.Spec.Template.Spec
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Errorf("replicas %v; want at least 2", d.Spec.Replicas)
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Error("a rollout may take a pod down before its replacement is ready (maxUnavailable should be 0)")
	}
	podLabels := labels.Set(d.Spec.Template.Labels)
	sel, err := v1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || !sel.Matches(podLabels) {
		t.Errorf("the Deployment's selector does not match its pods: %v", err)
	}
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) || len(svc.Spec.Selector) == 0 {
		t.Error("the Service does not select the pods")
	}
	pdbSel, err := v1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || !pdbSel.Matches(podLabels) {
		t.Error("the PodDisruptionBudget does not select the pods")
	}
	if pdb.Spec.MaxUnavailable == nil && pdb.Spec.MinAvailable == nil {
		t.Error("the PodDisruptionBudget sets neither maxUnavailable nor minAvailable")
	}
	if mu := pdb.Spec.MaxUnavailable; mu != nil && mu.Type == intstr.Int && int32(mu.IntValue()) >= *d.Spec.Replicas {
		t.Errorf("the budget lets every pod go at once (maxUnavailable %d of %d)", mu.IntValue(), *d.Spec.Replicas)
	}
	if spec.ServiceAccountName != o.accounts[0].Name {
		t.Errorf("serviceAccountName %q", spec.ServiceAccountName)
	}

	// The grace period covers shutdown_delay plus shutdown_grace.
	conf := cm.Data["sturdy.yaml"]
	delay, grace := durationKey(t, conf, "shutdown_delay"), durationKey(t, conf, "shutdown_grace")
	if spec.TerminationGracePeriodSeconds == nil || float64(*spec.TerminationGracePeriodSeconds) <= delay+grace {
		t.Errorf("terminationGracePeriodSeconds %v does not cover shutdown_delay %gs + shutdown_grace %gs", spec.TerminationGracePeriodSeconds, delay, grace)
	}

	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers", len(spec.Containers))
	}
	c := spec.Containers[0]
	probe := func(name string, p *corev1.Probe, path string) {
		switch {
		case p == nil:
			t.Errorf("no %s probe", name)
		case p.HTTPGet != nil:
			if p.HTTPGet.Path != path || p.HTTPGet.Port.IntValue() != 9901 {
				t.Errorf("%s probe on %s port %s; want %s on the admin port 9901", name, p.HTTPGet.Path, p.HTTPGet.Port.String(), path)
			}
		case p.Exec != nil:
			want := []string{"/usr/bin/sturdy", "healthcheck", "-q", "-url", "http://127.0.0.1:9901" + path}
			if !slices.Equal(p.Exec.Command, want) {
				t.Errorf("%s probe runs %v; want %v", name, p.Exec.Command, want)
			}
		default:
			t.Errorf("%s probe is neither httpGet nor exec", name)
		}
	}
	probe("readiness", c.ReadinessProbe, "/readyz")
	probe("liveness", c.LivenessProbe, "/livez")
	if !strings.Contains(conf, "listen: 127.0.0.1:9901") && c.ReadinessProbe != nil && c.ReadinessProbe.Exec != nil {
		t.Error("exec probes ask 127.0.0.1:9901, but the config's admin listener is elsewhere")
	}
	var port int32
	for _, p := range c.Ports {
		if p.Name == svc.Spec.Ports[0].TargetPort.String() {
			port = p.ContainerPort
		}
	}
	if port == 0 || !strings.Contains(conf, fmt.Sprintf("listen: 0.0.0.0:%d", port)) {
		t.Errorf("the Service's target port (%s = %d) is not a listener of the config", svc.Spec.Ports[0].TargetPort.String(), port)
	}

	// Non-root, read-only root, every capability dropped but binding
	// low ports, no privilege escalation, the runtime's seccomp profile.
	psc, sc := spec.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Error("the pod may run as root")
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("no RuntimeDefault seccomp profile")
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("the root filesystem is writable")
	}
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("privilege escalation is allowed")
	}
	if sc == nil || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		!slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_BIND_SERVICE"}) {
		t.Error("capabilities: want drop ALL, add NET_BIND_SERVICE only")
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("the pod mounts an API token it never uses")
	}

	// The config is mounted where the container reads it.
	mounted := false
	for _, m := range c.VolumeMounts {
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil && v.ConfigMap.Name == cm.Name && m.MountPath == "/etc/sturdy" && m.ReadOnly {
				mounted = true
			}
		}
	}
	if !mounted || !slices.Equal(c.Args, []string{"run", "-c", "/etc/sturdy/sturdy.yaml"}) {
		t.Errorf("the ConfigMap is not mounted read-only at /etc/sturdy for %v", c.Args)
	}
}

// durationKey reads a top-level "key: 5s" from the config text, in seconds.
func durationKey(t *testing.T, conf, key string) float64 {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(conf), &m); err != nil {
		t.Fatalf("the ConfigMap's sturdy.yaml: %v", err)
	}
	s, _ := m[key].(string)
	var v float64
	var unit string
	if _, err := fmt.Sscanf(s, "%g%s", &v, &unit); err != nil || (unit != "s" && unit != "m") {
		t.Fatalf("%s: %q; want seconds or minutes, like 5s", key, s)
	}
	if unit == "m" {
		v *= 60
	}
	return v
}

// comments returns the text of the YAML comments of a manifest, their
// lines joined with spaces, as a reader reads a wrapped sentence.
func comments(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var words []string
	for _, l := range strings.Split(string(data), "\n") {
		if _, c, ok := strings.Cut(l, "#"); ok {
			words = append(words, strings.Fields(c)...)
		}
	}
	return strings.Join(words, " ")
}

// The Namespace's comment says which capabilities the pods keep, and it
// says what the Deployment next to it does: every capability dropped, and
// only those it adds back named (none in Kubernetes mode, whose ports are
// above 1024).
func TestNamespaceCommentSaysWhatTheDeploymentDrops(t *testing.T) {
	for _, dir := range []string{manifests, manifests + "/gateway"} {
		data, err := os.ReadFile(dir + "/deployment.yaml")
		if err != nil {
			t.Fatal(err)
		}
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict(data, &d); err != nil {
			t.Fatalf("%s/deployment.yaml: %v", dir, err)
		}
		sc := d.Spec.Template.Spec.Containers[0].SecurityContext
		if sc == nil || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("%s/deployment.yaml: capabilities do not drop ALL", dir)
			continue
		}
		want := "every capability dropped"
		if add := sc.Capabilities.Add; len(add) > 0 {
			names := make([]string, len(add))
			for i, c := range add {
				names[i] = string(c)
			}
			want += " but " + strings.Join(names, ", ")
		}
		text := comments(t, dir+"/namespace.yaml")
		i := strings.Index(text, want)
		if i < 0 || strings.HasPrefix(text[i+len(want):], " but") {
			t.Errorf("%s/namespace.yaml says %q; the Deployment has %q", dir, text, want)
		}
	}
}
