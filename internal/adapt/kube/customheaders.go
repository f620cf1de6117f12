package kube

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// configMapLimit bounds the data of a ConfigMap the controller keeps in
// its cache: custom headers are a few lines, and a cluster's ConfigMaps
// (dashboards, scripts) can be megabytes each.
const configMapLimit = 64 << 10

// tooLarge marks a cached ConfigMap whose data was dropped for its size.
const tooLarge = "sturdyproxy.io/data-dropped"

// trimConfigMap is the informer's transform: it keeps what the
// translation reads of a ConfigMap (its name and small data) and drops
// the rest, so that watching every ConfigMap costs little memory.
func trimConfigMap(obj any) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return obj, nil // a tombstone
	}
	size := 0
	for k, v := range cm.Data {
		size += len(k) + len(v)
	}
	out := &corev1.ConfigMap{TypeMeta: cm.TypeMeta, ObjectMeta: cm.ObjectMeta}
	out.ManagedFields, out.Annotations = nil, nil
	if size > configMapLimit {
		out.Annotations = map[string]string{tooLarge: fmt.Sprint(size)}
	} else {
		out.Data = cm.Data
	}
	return out, nil
}

// headerName is what ingress-nginx accepts as a custom header's name.
var headerName = regexp.MustCompile(`^[a-zA-Z\d\-_]+$`)

// customHeaders resolves an Ingress's custom-headers ConfigMap into the
// response headers its routes set (ingress-nginx's more_set_headers).
// ok is false when the ConfigMap is missing or holds a header name
// ingress-nginx refuses: ingress-nginx then answers the Ingress's paths
// 503 (its location is denied), and so does sturdy.
func (t *translator) customHeaders(ing *networkingv1.Ingress, n *nginx, res *IngressResult) (h *config.HeaderRules, ok bool) {
	if n.customHeaders == "" {
		return nil, true
	}
	ref := configMapRef(ing.Namespace, n.customHeaders)
	deny := func(format string, args ...any) (*config.HeaderRules, bool) {
		res.Events = append(res.Events, fmt.Sprintf("%scustom-headers: %s; the Ingress's paths answer 503 until it is mended, as ingress-nginx's do", nginxPrefix, fmt.Sprintf(format, args...)))
		return nil, false
	}
	cm := t.x.configMaps[ref]
	switch {
	case cm == nil:
		return deny("ConfigMap %s/%s does not exist (or is in a namespace sturdy does not watch)", ref.Namespace, ref.Name)
	case cm.Annotations[tooLarge] != "":
		return deny("ConfigMap %s/%s holds %s bytes, more than the %d sturdy keeps of a ConfigMap", ref.Namespace, ref.Name, cm.Annotations[tooLarge], configMapLimit)
	case len(cm.Data) == 0:
		return nil, true
	}
	h = &config.HeaderRules{Set: map[string]string{}}
	for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
		if !headerName.MatchString(k) {
			return deny("ConfigMap %s/%s has %q, which is not a header name", ref.Namespace, ref.Name, k)
		}
		if why := config.RuleHeaderProblem(k); why != "" {
			return deny("ConfigMap %s/%s: %s", ref.Namespace, ref.Name, why)
		}
		// nginx expands its variables in more_set_headers values; sturdy's
		// templates take the same ($host, $request_uri, ...).
		h.Set[k] = cm.Data[k]
	}
	return h, true
}

// configMapRef reads custom-headers' NAMESPACE/NAME; a bare NAME is in
// the Ingress's own namespace.
func configMapRef(ns, v string) Ref {
	if a, b, ok := strings.Cut(v, "/"); ok {
		return Ref{Kind: "ConfigMap", Namespace: a, Name: b}
	}
	return Ref{Kind: "ConfigMap", Namespace: ns, Name: v}
}
