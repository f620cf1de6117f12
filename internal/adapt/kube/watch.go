package kube

import (
	"errors"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"
)

// listers read the informers' caches; one set per watched namespace.
type listers struct {
	classes  func() ([]*gwv1.GatewayClass, error)
	nsList   func() ([]*corev1.Namespace, error)
	ingClass func() ([]*networkingv1.IngressClass, error)
	per      []nsListers
	informer []cache.SharedIndexInformer
}

type nsListers struct {
	gateways  func() ([]*gwv1.Gateway, error)
	routes    func() ([]*gwv1.HTTPRoute, error)
	grpc      func() ([]*gwv1.GRPCRoute, error) // nil when the cluster has no GRPCRoute CRD
	grants    func() ([]*gwv1.ReferenceGrant, error)
	services  func() ([]*corev1.Service, error)
	slices    func() ([]*discoveryv1.EndpointSlice, error)
	secrets   func() ([]*corev1.Secret, error)
	ingresses func() ([]*networkingv1.Ingress, error)
	cms       func() ([]*corev1.ConfigMap, error)
}

// starter is an informer factory, started by Run.
type starter interface{ Start(stop <-chan struct{}) }

// informers builds the informers of every watched kind (none started)
// with their event handlers: any change wakes the translation, but a
// ConfigMap's only when an Ingress names it.
func (c *Controller) informers() (listers, []starter, error) {
	all := labels.Everything()
	resync := 10 * time.Minute
	gwAll := gwinformers.NewSharedInformerFactory(c.gw, resync)
	kAll := informers.NewSharedInformerFactory(c.kube, resync)
	l := listers{
		classes: func() ([]*gwv1.GatewayClass, error) { return gwAll.Gateway().V1().GatewayClasses().Lister().List(all) },
		nsList:  func() ([]*corev1.Namespace, error) { return kAll.Core().V1().Namespaces().Lister().List(all) },
	}
	l.informer = append(l.informer, gwAll.Gateway().V1().GatewayClasses().Informer(), kAll.Core().V1().Namespaces().Informer())
	if c.k.IngressClassName() != "" {
		ic := kAll.Networking().V1().IngressClasses()
		l.ingClass = func() ([]*networkingv1.IngressClass, error) { return ic.Lister().List(all) }
		l.informer = append(l.informer, ic.Informer())
	}
	namespaces := c.k.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{corev1.NamespaceAll}
	}
	grpcOK := c.servesGRPCRoute()
	var cmInformers []cache.SharedIndexInformer
	var starters []starter
	starters = append(starters, gwAll, kAll)
	for _, ns := range namespaces {
		gf := gwinformers.NewSharedInformerFactoryWithOptions(c.gw, resync, gwinformers.WithNamespace(ns))
		kf := informers.NewSharedInformerFactoryWithOptions(c.kube, resync, informers.WithNamespace(ns))
		// Only TLS Secrets are cached: certificates are all sturdy reads
		// of Secrets, and a cluster's other Secrets (service-account
		// tokens, Helm releases, applications' own) would otherwise sit in
		// memory, whole, in every replica (docs/kubernetes.md).
		tf := informers.NewSharedInformerFactoryWithOptions(c.kube, resync, informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = tlsSecrets }))
		starters = append(starters, gf, kf, tf)
		g, h, rg := gf.Gateway().V1().Gateways(), gf.Gateway().V1().HTTPRoutes(), gf.Gateway().V1().ReferenceGrants()
		sv, es, se, in := kf.Core().V1().Services(), kf.Discovery().V1().EndpointSlices(), tf.Core().V1().Secrets(), kf.Networking().V1().Ingresses()
		cm := kf.Core().V1().ConfigMaps()
		if err := cm.Informer().SetTransform(trimConfigMap); err != nil {
			return listers{}, nil, err
		}
		cmInformers = append(cmInformers, cm.Informer())
		l.per = append(l.per, nsListers{
			gateways:  func() ([]*gwv1.Gateway, error) { return g.Lister().List(all) },
			routes:    func() ([]*gwv1.HTTPRoute, error) { return h.Lister().List(all) },
			grants:    func() ([]*gwv1.ReferenceGrant, error) { return rg.Lister().List(all) },
			services:  func() ([]*corev1.Service, error) { return sv.Lister().List(all) },
			slices:    func() ([]*discoveryv1.EndpointSlice, error) { return es.Lister().List(all) },
			secrets:   func() ([]*corev1.Secret, error) { return se.Lister().List(all) },
			ingresses: func() ([]*networkingv1.Ingress, error) { return in.Lister().List(all) },
			cms:       func() ([]*corev1.ConfigMap, error) { return cm.Lister().List(all) },
		})
		l.informer = append(l.informer, g.Informer(), h.Informer(), rg.Informer(), sv.Informer(), es.Informer(), se.Informer(), in.Informer())
		if grpcOK {
			gr := gf.Gateway().V1().GRPCRoutes()
			l.per[len(l.per)-1].grpc = func() ([]*gwv1.GRPCRoute, error) { return gr.Lister().List(all) }
			l.informer = append(l.informer, gr.Informer())
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.poke() },
		UpdateFunc: func(old, cur any) {
			if changed(old, cur) {
				c.poke()
			}
		},
		DeleteFunc: func(any) { c.poke() },
	}
	for _, inf := range l.informer {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return listers{}, nil, err
		}
	}
	named := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			ns, name, _ := strings.Cut(key, "/")
			if m := c.configMaps.Load(); m != nil && (*m)[Ref{Kind: "ConfigMap", Namespace: ns, Name: name}] {
				c.poke()
			}
		}
	}
	cmHandler := cache.ResourceEventHandlerFuncs{
		AddFunc: named,
		UpdateFunc: func(old, cur any) {
			if changed(old, cur) {
				named(cur)
			}
		},
		DeleteFunc: named,
	}
	for _, inf := range cmInformers {
		if _, err := inf.AddEventHandler(cmHandler); err != nil {
			return listers{}, nil, err
		}
		l.informer = append(l.informer, inf)
	}
	return l, starters, nil
}

// tlsSecrets selects the Secrets sturdy caches.
var tlsSecrets = fields.OneTermEqualSelector("type", string(corev1.SecretTypeTLS)).String()

// changed is false for the informers' periodic resync, which repeats
// what they have.
func changed(old, cur any) bool {
	if o, ok := old.(metav1.Object); ok {
		if n, ok := cur.(metav1.Object); ok && o.GetResourceVersion() == n.GetResourceVersion() {
			return false
		}
	}
	return true
}

// servesGRPCRoute reports whether the API server has the GRPCRoute CRD
// (Gateway API's standard channel since v1.1). Without it, a GRPCRoute
// informer would never sync and no route of any kind would be served, so
// GRPCRoutes are left unwatched, with a warning.
func (c *Controller) servesGRPCRoute() bool {
	list, err := c.kube.Discovery().ServerResourcesForGroupVersion(gwv1.GroupVersion.String())
	if err == nil {
		for _, r := range list.APIResources {
			if r.Name == "grpcroutes" {
				return true
			}
		}
	}
	c.log.Warn("kubernetes: the API server has no GRPCRoute CRD; GRPCRoutes are not watched (install Gateway API's standard channel v1.1 or later, then restart sturdy)", "err", err)
	return false
}

// snapshot reads every watched object from the informers' caches.
func (c *Controller) snapshot() (*Snapshot, error) {
	l := c.listen
	s := &Snapshot{}
	var errs []error
	collect := func(err error) { errs = append(errs, err) }
	var err error
	s.GatewayClasses, err = l.classes()
	collect(err)
	s.Namespaces, err = l.nsList()
	collect(err)
	if l.ingClass != nil {
		s.IngressClasses, err = l.ingClass()
		collect(err)
	}
	for _, p := range l.per {
		g, err := p.gateways()
		collect(err)
		h, err := p.routes()
		collect(err)
		rg, err := p.grants()
		collect(err)
		sv, err := p.services()
		collect(err)
		es, err := p.slices()
		collect(err)
		se, err := p.secrets()
		collect(err)
		in, err := p.ingresses()
		collect(err)
		if p.grpc != nil {
			gr, err := p.grpc()
			collect(err)
			s.GRPCRoutes = append(s.GRPCRoutes, gr...)
		}
		s.Gateways, s.HTTPRoutes, s.ReferenceGrants = append(s.Gateways, g...), append(s.HTTPRoutes, h...), append(s.ReferenceGrants, rg...)
		s.Services, s.EndpointSlices, s.Secrets, s.Ingresses = append(s.Services, sv...), append(s.EndpointSlices, es...), append(s.Secrets, se...), append(s.Ingresses, in...)
	}
	// The ConfigMaps the Ingresses name are noted before the ConfigMaps
	// are read: one created in between is then either read here or
	// announced by its informer, never missed.
	named := map[Ref]bool{}
	for _, ing := range s.Ingresses {
		if v := ing.Annotations[nginxPrefix+"custom-headers"]; v != "" {
			named[configMapRef(ing.Namespace, strings.TrimSpace(v))] = true
		}
	}
	c.configMaps.Store(&named)
	for _, p := range l.per {
		cms, err := p.cms()
		collect(err)
		s.ConfigMaps = append(s.ConfigMaps, cms...)
	}
	return s, errors.Join(errs...)
}
