package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// custom-headers: the named ConfigMap's entries are response headers on
// the Ingress's routes; a missing ConfigMap or a bad header name makes
// its paths answer 503, as ingress-nginx's, and says so in an event.
func TestIngressCustomHeaders(t *testing.T) {
	ch := func(v string) map[string]string { return map[string]string{nginxPrefix + "custom-headers": v} }
	cm := func(ns, name string, data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: objMeta(ns, name, 0), Data: data}
	}
	snap := &Snapshot{
		Services:       []*corev1.Service{service("app", "app", 80)},
		EndpointSlices: []*discoveryv1.EndpointSlice{slice("app", "app", ep("10.1.0.1", true, true, false))},
		ConfigMaps: []*corev1.ConfigMap{
			cm("ingress-nginx", "security", map[string]string{"X-Frame-Options": "DENY", "X-Served-By": "$host"}),
			cm("app", "local", map[string]string{"X-Local": "yes"}),
			cm("app", "bad", map[string]string{"X Bad": "1"}),
			cm("app", "hop", map[string]string{"Connection": "close"}),
		},
		Ingresses: []*networkingv1.Ingress{
			ingress("app", "other-ns", ch("ingress-nginx/security"), "a.example.com", "/", "app", ""),
			ingress("app", "bare-name", ch("local"), "b.example.com", "/", "app", ""),
			ingress("app", "missing", ch("app/nope"), "c.example.com", "/", "app", ""),
			ingress("app", "bad-name", ch("bad"), "d.example.com", "/", "app", ""),
			ingress("app", "hop-by-hop", ch("hop"), "e.example.com", "/", "app", ""),
			ingress("app", "none", nil, "f.example.com", "/", "app", ""),
		},
	}
	res := Translate(Input{Base: base(t), Snap: snap})
	rt := finish(t, res)
	byName := map[string]config.Route{}
	for _, r := range res.Config.Routes {
		byName[r.Name] = r
	}
	if h := byName["ingress/app/other-ns/1"].ResponseHeaders; h == nil || h.Set["X-Frame-Options"] != "DENY" || h.Set["X-Served-By"] != "$host" || len(h.Set) != 2 {
		t.Errorf("other-ns response headers = %+v; want the ConfigMap's two, nginx variables kept", h)
	}
	if h := byName["ingress/app/bare-name/1"].ResponseHeaders; h == nil || h.Set["X-Local"] != "yes" {
		t.Errorf("bare-name response headers = %+v; want the Ingress namespace's ConfigMap", h)
	}
	if r := byName["ingress/app/none/1"]; r.ResponseHeaders != nil || r.Pool != "svc/app/app/80" {
		t.Errorf("an Ingress without custom-headers = %+v", r)
	}
	for name, want := range map[string]string{"missing": "app/nope does not exist", "bad-name": `"X Bad", which is not a header name`, "hop-by-hop": "Connection"} {
		r := byName["ingress/app/"+name+"/1"]
		if r.Pool != "ingress/app/"+name+"/denied" || r.ResponseHeaders != nil {
			t.Errorf("%s: route = %+v; want the denied (empty) pool, which answers 503", name, r)
		}
		if p := rt.Pool(r.Pool); p == nil || len(p.Hosts) != 0 {
			t.Errorf("%s: pool %s = %+v; want it empty", name, r.Pool, p)
		}
		ev := strings.Join(res.Ingresses[Ref{"Ingress", "app", name}].Events, "\n")
		if !strings.Contains(ev, want) || !strings.Contains(ev, "answer 503") {
			t.Errorf("%s: events %q; want them to say %q and that the paths answer 503", name, ev, want)
		}
	}
}

// The informer keeps a ConfigMap's small data and drops large data,
// managed fields and annotations (kubectl's last-applied copy).
func TestTrimConfigMap(t *testing.T) {
	small := &corev1.ConfigMap{ObjectMeta: objMeta("a", "small", 0), Data: map[string]string{"X-A": "1"}}
	small.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 1000)}
	got, _ := trimConfigMap(small)
	if c := got.(*corev1.ConfigMap); c.Data["X-A"] != "1" || c.Annotations != nil || c.Name != "small" {
		t.Errorf("small = %+v", c)
	}
	if small.Annotations == nil {
		t.Error("the transform changed the object it was given")
	}
	big := &corev1.ConfigMap{ObjectMeta: objMeta("a", "big", 0), Data: map[string]string{"dashboard.json": strings.Repeat("x", configMapLimit)}}
	got, _ = trimConfigMap(big)
	if c := got.(*corev1.ConfigMap); c.Data != nil || c.Annotations[tooLarge] == "" {
		t.Errorf("big = %+v; want its data dropped and marked", c.ObjectMeta)
	}
	snap := &Snapshot{
		Services:       []*corev1.Service{service("a", "app", 80)},
		EndpointSlices: []*discoveryv1.EndpointSlice{slice("a", "app", ep("10.1.0.1", true, true, false))},
		ConfigMaps:     []*corev1.ConfigMap{got.(*corev1.ConfigMap)},
		Ingresses:      []*networkingv1.Ingress{ingress("a", "i", map[string]string{nginxPrefix + "custom-headers": "a/big"}, "a.example.com", "/", "app", "")},
	}
	res := Translate(Input{Base: base(t), Snap: snap})
	if ev := strings.Join(res.Ingresses[Ref{"Ingress", "a", "i"}].Events, "\n"); !strings.Contains(ev, "more than the 65536 sturdy keeps") {
		t.Errorf("events %q; want the ConfigMap's size named", ev)
	}
}
