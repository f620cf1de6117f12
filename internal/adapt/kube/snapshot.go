package kube

import (
	"cmp"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Snapshot is every object the translation reads, as the informers last
// saw them. Translate never changes it.
type Snapshot struct {
	GatewayClasses  []*gwv1.GatewayClass
	Gateways        []*gwv1.Gateway
	HTTPRoutes      []*gwv1.HTTPRoute
	GRPCRoutes      []*gwv1.GRPCRoute
	ReferenceGrants []*gwv1.ReferenceGrant
	Services        []*corev1.Service
	EndpointSlices  []*discoveryv1.EndpointSlice
	Secrets         []*corev1.Secret
	Namespaces      []*corev1.Namespace
	Ingresses       []*networkingv1.Ingress
	// IngressClasses are read for the default class
	// (ingressclass.kubernetes.io/is-default-class).
	IngressClasses []*networkingv1.IngressClass
	// ConfigMaps are those of the watched namespaces, trimmed
	// (trimConfigMap): the custom-headers of Ingresses name them.
	ConfigMaps []*corev1.ConfigMap
}

// Ref names one Kubernetes object.
type Ref struct {
	Kind      string // "Gateway", "HTTPRoute", "GRPCRoute", "Ingress", "Secret", "Service"
	Namespace string
	Name      string
}

func (r Ref) String() string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

func refOf(kind string, m metav1.Object) Ref {
	return Ref{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName()}
}

// index is a snapshot with lookups, built once per translation.
type index struct {
	snap       *Snapshot
	services   map[Ref]*corev1.Service
	secrets    map[Ref]*corev1.Secret
	namespaces map[string]*corev1.Namespace
	slices     map[Ref][]*discoveryv1.EndpointSlice // by Service
	configMaps map[Ref]*corev1.ConfigMap
}

func newIndex(s *Snapshot) *index {
	x := &index{
		snap:       s,
		services:   map[Ref]*corev1.Service{},
		secrets:    map[Ref]*corev1.Secret{},
		namespaces: map[string]*corev1.Namespace{},
		slices:     map[Ref][]*discoveryv1.EndpointSlice{},
		configMaps: map[Ref]*corev1.ConfigMap{},
	}
	for _, o := range s.ConfigMaps {
		x.configMaps[refOf("ConfigMap", o)] = o
	}
	for _, o := range s.Services {
		x.services[refOf("Service", o)] = o
	}
	for _, o := range s.Secrets {
		x.secrets[refOf("Secret", o)] = o
	}
	for _, o := range s.Namespaces {
		x.namespaces[o.Name] = o
	}
	for _, o := range s.EndpointSlices {
		svc := o.Labels[discoveryv1.LabelServiceName]
		if svc == "" {
			continue
		}
		k := Ref{Kind: "Service", Namespace: o.Namespace, Name: svc}
		x.slices[k] = append(x.slices[k], o)
	}
	for _, l := range x.slices {
		slices.SortFunc(l, func(a, b *discoveryv1.EndpointSlice) int { return cmp.Compare(a.Name, b.Name) })
	}
	return x
}

// older orders objects as Gateway API's conflict rules ask: the oldest
// first, then by namespace/name.
func older(a, b metav1.Object) int {
	ta, tb := a.GetCreationTimestamp(), b.GetCreationTimestamp()
	if !ta.Equal(&tb) {
		if ta.Before(&tb) {
			return -1
		}
		return 1
	}
	return cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
}

// granted reports whether a ReferenceGrant in the target's namespace lets
// objects of fromKind in fromNS refer to toKind named toName.
func (x *index) granted(fromGroup, fromKind, fromNS, toGroup, toKind, toNS, toName string) bool {
	if fromNS == toNS {
		return true
	}
	for _, g := range x.snap.ReferenceGrants {
		if g.Namespace != toNS {
			continue
		}
		from := slices.ContainsFunc(g.Spec.From, func(f gwv1.ReferenceGrantFrom) bool {
			return string(f.Group) == fromGroup && string(f.Kind) == fromKind && string(f.Namespace) == fromNS
		})
		to := slices.ContainsFunc(g.Spec.To, func(t gwv1.ReferenceGrantTo) bool {
			return string(t.Group) == toGroup && string(t.Kind) == toKind && (t.Name == nil || *t.Name == "" || string(*t.Name) == toName)
		})
		if from && to {
			return true
		}
	}
	return false
}

func itoa(i int) string { return strconv.Itoa(i) }
