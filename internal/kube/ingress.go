package kube

import (
	"fmt"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// Ingresses are served on port 80 and, for their hosts with a TLS
// certificate, on port 443, as ingress-nginx serves them.
const (
	ingressHTTP  = 80
	ingressHTTPS = 443
)

// legacyClass is the annotation older Ingresses name their class with.
const legacyClass = "kubernetes.io/ingress.class"

// ingressPath is one Ingress path as translated, before the canaries.
type ingressPath struct {
	host, path string
	ei         []int // indexes into t.entries
}

func (t *translator) ingresses() {
	class := t.k.IngressClassName()
	if class == "" {
		return
	}
	ings := slices.Clone(t.in.Snap.Ingresses)
	slices.SortFunc(ings, func(a, b *networkingv1.Ingress) int { return older(a, b) })
	var ours []*networkingv1.Ingress
	for _, ing := range ings {
		c := ing.Annotations[legacyClass]
		if ing.Spec.IngressClassName != nil {
			c = *ing.Spec.IngressClassName
		}
		if c == class {
			ours = append(ours, ing)
		}
	}
	paths := map[[2]string]*ingressPath{}
	var canaries []*networkingv1.Ingress
	hasDefault := slices.ContainsFunc(t.in.Base.Routes, func(r config.Route) bool { return r.Default })
	var redirectable []Ref
	for _, ing := range ours {
		ref := refOf("Ingress", ing)
		res := &IngressResult{Served: true}
		t.res.Ingresses[ref] = res
		t.res.Generations[ref] = ing.Generation
		n := parseNginx(ing.Annotations)
		res.Events = n.events
		if why, bad := t.in.Exclude[ref]; bad {
			n.refuse = why
		}
		if n.refuse != "" {
			res.Served = false
			res.Events = append(res.Events, "not served: "+n.refuse)
			continue
		}
		if n.canary {
			canaries = append(canaries, ing)
			continue
		}
		tlsHosts := t.ingressTLS(ing, res)
		zone := ""
		if z := n.zone("ingress/" + ing.Namespace + "/" + ing.Name); z != nil {
			zone = z.Name
			t.zones = append(t.zones, *z)
		}
		add := func(seq int, host, path string, be *networkingv1.IngressBackend, def bool) {
			pool, ok := t.ingressBackend(ing, be, n, res)
			if !ok {
				return
			}
			listeners := []string{}
			hp, ok80 := t.port(ingressHTTP, gwv1.HTTPProtocolType)
			if ok80 {
				listeners = append(listeners, hp.name)
			} else {
				res.Events = append(res.Events, fmt.Sprintf("port %d is an HTTPS listener of a Gateway; the Ingress is not served on it", ingressHTTP))
			}
			wantsRedirect := n.forceSSLRedirect || n.sslRedirect && tlsHosts[host]
			if tlsHosts[host] {
				if sp, ok := t.port(ingressHTTPS, gwv1.HTTPSProtocolType); ok {
					listeners = append(listeners, sp.name)
				}
			}
			r := config.Route{
				Name:      fmt.Sprintf("ingress/%s/%s/%d", ing.Namespace, ing.Name, seq),
				Listeners: listeners,
				Path:      path,
				Pool:      pool.Name,
				Default:   def,
			}
			if host != "" {
				r.Hosts = []string{strings.ToLower(host)}
			}
			n.apply(&r, zone)
			e := entry{origin: ref, obj: ing, seq: seq, route: r, pool: &pool}
			if wantsRedirect && ok80 {
				e.redirectPort = hp
				redirectable = append(redirectable, ref)
			} else if ok80 {
				hp.plain++
			}
			t.entries = append(t.entries, e)
			k := [2]string{host, path}
			if paths[k] == nil {
				paths[k] = &ingressPath{host: host, path: path}
			}
			paths[k].ei = append(paths[k].ei, len(t.entries)-1)
		}
		seq := 0
		for _, rule := range ing.Spec.Rules {
			if rule.HTTP == nil {
				continue
			}
			for _, p := range rule.HTTP.Paths {
				seq++
				path, ok := ingressPathOf(p, res)
				if !ok {
					continue
				}
				add(seq, rule.Host, path, &p.Backend, false)
			}
		}
		if be := ing.Spec.DefaultBackend; be != nil {
			if hasDefault {
				res.Events = append(res.Events, "spec.defaultBackend is not served: another Ingress or the config file already has the default route")
			} else {
				hasDefault = true
				add(0, "", "/", be, true)
			}
		}
	}
	t.canaries(canaries, paths)
	t.ingressRedirect(redirectable)
}

// ingressRedirect turns on port 80's redirect to HTTPS when every route
// there asks for it (ingress-nginx's ssl-redirect), and says so on the
// Ingresses where it cannot: today a redirect is a whole listener's.
func (t *translator) ingressRedirect(want []Ref) {
	hp := t.ports[ingressHTTP]
	if hp == nil || len(want) == 0 || hp.proto != gwv1.HTTPProtocolType {
		return
	}
	if hp.plain == 0 && (hp.redirect == nil || hp.redirect.Status == 308) {
		hp.redirect = &config.RedirectHTTPS{Status: 308, Port: ingressHTTPS}
		return
	}
	slices.SortFunc(want, func(a, b Ref) int { return strings.Compare(a.String(), b.String()) })
	for _, ref := range slices.Compact(want) {
		r := t.res.Ingresses[ref]
		r.Events = append(r.Events, fmt.Sprintf("ssl-redirect: port %d also serves hosts that do not redirect, and a redirect of only some hosts needs route-level redirects (not supported yet): these hosts are served over HTTP too", ingressHTTP))
	}
	for i := range t.entries {
		t.entries[i].redirectPort = nil
	}
}

// ingressTLS adds an Ingress's certificates to port 443 and returns the
// hosts they are for.
func (t *translator) ingressTLS(ing *networkingv1.Ingress, res *IngressResult) map[string]bool {
	hosts := map[string]bool{}
	for _, it := range ing.Spec.TLS {
		if it.SecretName == "" {
			res.Events = append(res.Events, "a tls entry names no secretName; sturdy has no default certificate for it")
			continue
		}
		sref := Ref{Kind: "Secret", Namespace: ing.Namespace, Name: it.SecretName}
		c, err := t.certificate(sref)
		if err != nil {
			res.Events = append(res.Events, "tls: "+err.Error())
			continue
		}
		sp, ok := t.port(ingressHTTPS, gwv1.HTTPSProtocolType)
		if !ok {
			res.Events = append(res.Events, fmt.Sprintf("port %d is a plain HTTP listener of a Gateway; the Ingress's TLS hosts are not served on it", ingressHTTPS))
			return map[string]bool{}
		}
		for _, h := range it.Hosts {
			c.Names = append(c.Names, strings.ToLower(h))
			hosts[h] = true
		}
		if len(it.Hosts) == 0 && !slices.ContainsFunc(sp.certs, func(c config.Certificate) bool { return c.Default }) {
			c.Default = true
		}
		sp.certs = append(sp.certs, c)
		sp.certFrom = append(sp.certFrom, sref)
	}
	return hosts
}

// ingressPathOf is an Ingress path as a sturdy path prefix.
func ingressPathOf(p networkingv1.HTTPIngressPath, res *IngressResult) (string, bool) {
	path := p.Path
	if path == "" {
		path = "/"
	}
	if p.PathType != nil && *p.PathType == networkingv1.PathTypeExact {
		res.Events = append(res.Events, fmt.Sprintf("path %s: pathType Exact needs exact path matching, which this sturdy does not have yet; the path is not served", path))
		return "", false
	}
	if !strings.HasPrefix(path, "/") {
		res.Events = append(res.Events, fmt.Sprintf("path %q does not start with /; not served", path))
		return "", false
	}
	return path, true
}

// ingressBackend resolves an Ingress backend to its pool.
func (t *translator) ingressBackend(ing *networkingv1.Ingress, be *networkingv1.IngressBackend, n *nginx, res *IngressResult) (config.Pool, bool) {
	if be.Service == nil {
		res.Events = append(res.Events, "a resource backend is not supported; sturdy routes to Services")
		return config.Pool{}, false
	}
	sref := Ref{Kind: "Service", Namespace: ing.Namespace, Name: be.Service.Name}
	svc := t.x.services[sref]
	if svc == nil {
		// As ingress-nginx, a missing Service answers 503 until it exists.
		res.Events = append(res.Events, fmt.Sprintf("Service %s does not exist; its paths answer 503", be.Service.Name))
		return n.pool(config.Pool{Name: "svc/" + ing.Namespace + "/" + be.Service.Name + "/missing", Discovered: true}), true
	}
	sp, err := servicePort(svc, be.Service.Port.Number, be.Service.Port.Name)
	if err != nil {
		res.Events = append(res.Events, err.Error()+"; its paths answer 503")
		return n.pool(config.Pool{Name: "svc/" + ing.Namespace + "/" + be.Service.Name + "/missing", Discovered: true}), true
	}
	b := backend{svc: sref, port: sp.Port}
	return n.pool(config.Pool{Name: b.poolName(), Hosts: t.x.endpoints(sref, sp), Discovered: true}), true
}

// canaries splits the traffic of a path between its Ingress's Service
// and a canary Ingress's (ingress-nginx's canary-weight).
func (t *translator) canaries(list []*networkingv1.Ingress, paths map[[2]string]*ingressPath) {
	for _, ing := range list {
		ref := refOf("Ingress", ing)
		res := t.res.Ingresses[ref]
		n := parseNginx(ing.Annotations)
		matched := 0
		for _, rule := range ing.Spec.Rules {
			if rule.HTTP == nil {
				continue
			}
			for _, p := range rule.HTTP.Paths {
				path, ok := ingressPathOf(p, res)
				if !ok {
					continue
				}
				main := paths[[2]string{rule.Host, path}]
				if main == nil {
					res.Events = append(res.Events, fmt.Sprintf("canary path %s%s has no main Ingress with the same host and path; not served", rule.Host, path))
					continue
				}
				pool, ok := t.ingressBackend(ing, &p.Backend, n, res)
				if !ok {
					continue
				}
				matched++
				for _, i := range main.ei {
					e := &t.entries[i]
					w := n.canaryWeight
					split := *e.pool
					split.Name = fmt.Sprintf("%s+canary/%s/%s/%d", e.pool.Name, ing.Namespace, ing.Name, w)
					split.Hosts = weighted([][]config.Host{e.pool.Hosts, pool.Hosts}, []int32{n.canaryTotal - w, w})
					e.pool = &split
					e.route.Pool = split.Name
				}
			}
		}
		if matched == 0 {
			res.Served = false
		}
	}
}
