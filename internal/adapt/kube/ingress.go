package kube

import (
	"fmt"
	"net/http"
	"regexp"
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
	ei []int // the serving routes' indexes into t.entries
}

// pathKey identifies an Ingress path for its canary: the host, the path
// and its type.
type pathKey struct{ host, path, typ string }

func keyOf(host string, p networkingv1.HTTPIngressPath) pathKey {
	typ := networkingv1.PathTypeImplementationSpecific
	if p.PathType != nil {
		typ = *p.PathType
	}
	return pathKey{strings.ToLower(host), p.Path, string(typ)}
}

func (t *translator) ingresses() {
	class := t.k.IngressClassName()
	if class == "" {
		return
	}
	ings := slices.Clone(t.in.Snap.Ingresses)
	slices.SortFunc(ings, func(a, b *networkingv1.Ingress) int { return older(a, b) })
	// An Ingress that names no class is sturdy's when sturdy's
	// IngressClass is the cluster's default, as Kubernetes defines it.
	byDefault := slices.ContainsFunc(t.in.Snap.IngressClasses, func(ic *networkingv1.IngressClass) bool {
		return ic.Name == class && ic.Annotations[networkingv1.AnnotationIsDefaultIngressClass] == "true"
	})
	var ours []*networkingv1.Ingress
	for _, ing := range ings {
		c := ing.Annotations[legacyClass]
		if ing.Spec.IngressClassName != nil {
			c = *ing.Spec.IngressClassName
		}
		if c == class || c == "" && byDefault {
			ours = append(ours, ing)
		}
	}
	paths := map[pathKey]*ingressPath{}
	var canaries []*networkingv1.Ingress
	hasDefault := slices.ContainsFunc(t.in.Base.Routes, func(r config.Route) bool { return r.Default })
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
		headers, allowed := t.customHeaders(ing, n, res)
		zone := ""
		if z := n.zone("ingress/" + ing.Namespace + "/" + ing.Name); z != nil {
			zone = z.Name
			t.zones = append(t.zones, *z)
		}
		hp, ok80 := t.port("", Ref{}, ingressHTTP, gwv1.HTTPProtocolType)
		if !ok80 {
			res.Events = append(res.Events, fmt.Sprintf("port %d is an HTTPS listener of a Gateway; the Ingress is not served on it", ingressHTTP))
		}
		// add writes the routes of one path: the one that serves, and on
		// port 80 the redirect to HTTPS when the host asks for it. It
		// reports whether the last entry is a route that proxies.
		add := func(seq int, host string, m *config.RouteMatch, rw *config.Rewrite, be *networkingv1.IngressBackend, def bool) bool {
			pool, ok := t.ingressBackend(ing, be, n, res)
			if !ok {
				return false
			}
			if !allowed {
				pool = config.Pool{Name: "ingress/" + ing.Namespace + "/" + ing.Name + "/denied", Discovered: true}
			}
			var listeners []string
			if tlsHosts[host] {
				if sp, ok := t.port("", Ref{}, ingressHTTPS, gwv1.HTTPSProtocolType); ok {
					listeners = append(listeners, sp.name)
				}
			}
			redirect := ok80 && n.redirect == nil && (n.forceSSLRedirect || n.sslRedirect && tlsHosts[host])
			if ok80 && !redirect {
				listeners = append(listeners, hp.name)
			}
			r := config.Route{
				Name:      fmt.Sprintf("ingress/%s/%s/%d", ing.Namespace, ing.Name, seq),
				Listeners: listeners,
				Match:     m,
				Default:   def,
			}
			if host != "" {
				r.Hosts = append([]string{strings.ToLower(host)}, n.aliases...)
			}
			if redirect {
				// ingress-nginx's ssl-redirect: 308 to the same URL over HTTPS.
				rr := config.Route{Name: r.Name + "/to-https", Listeners: []string{hp.name}, Hosts: r.Hosts, Match: m,
					Redirect: &config.Redirect{Scheme: "https", Status: http.StatusPermanentRedirect}}
				t.entries = append(t.entries, entry{origin: ref, obj: ing, seq: seq*4 + 1, route: rr})
			}
			if n.redirect != nil {
				// permanent-redirect and temporal-redirect answer every path.
				rd := *n.redirect
				r.Redirect = &rd
				t.entries = append(t.entries, entry{origin: ref, obj: ing, seq: seq * 4, route: r})
				return false
			}
			r.Pool, r.Rewrite, r.ResponseHeaders = pool.Name, rw, headers
			n.apply(&r, zone)
			t.entries = append(t.entries, entry{origin: ref, obj: ing, seq: seq * 4, route: r, pools: []*config.Pool{&pool}})
			return true
		}
		seq := 0
		appRoot := map[string]bool{}
		for _, rule := range ing.Spec.Rules {
			if rule.HTTP == nil {
				continue
			}
			if n.appRoot != "" && !appRoot[rule.Host] {
				appRoot[rule.Host] = true
				t.appRoot(ing, n, rule.Host, tlsHosts[rule.Host], ok80, hp)
			}
			for _, p := range rule.HTTP.Paths {
				seq++
				m, rw, ok := ingressMatch(p, n, res)
				if !ok {
					continue
				}
				if add(seq, rule.Host, m, rw, &p.Backend, false) {
					k := keyOf(rule.Host, p)
					if paths[k] == nil {
						paths[k] = &ingressPath{}
					}
					paths[k].ei = append(paths[k].ei, len(t.entries)-1)
				}
			}
		}
		if be := ing.Spec.DefaultBackend; be != nil {
			if hasDefault {
				res.Events = append(res.Events, "spec.defaultBackend is not served: another Ingress or the config file already has the default route")
			} else {
				hasDefault = true
				add(0, "", nil, nil, be, true)
			}
		}
	}
	t.canaries(canaries, paths)
}

// appRoot redirects a host's "/" to the app-root annotation's path.
func (t *translator) appRoot(ing *networkingv1.Ingress, n *nginx, host string, tlsHost, ok80 bool, hp *sport) {
	var ports []*sport
	if tlsHost {
		if sp, ok := t.port("", Ref{}, ingressHTTPS, gwv1.HTTPSProtocolType); ok {
			ports = append(ports, sp)
		}
	}
	if ok80 {
		ports = append(ports, hp)
	}
	for _, sp := range ports {
		r := config.Route{
			Name:      fmt.Sprintf("ingress/%s/%s/app-root/%s/%s", ing.Namespace, ing.Name, cmpOr(host, "any"), sp.name),
			Listeners: []string{sp.name},
			Match:     &config.RouteMatch{Path: &config.PathMatch{Exact: "/"}},
			// The port is the one the client came to, not the one sturdy binds.
			Redirect: &config.Redirect{Path: literal(n.appRoot), Port: int(sp.number), Status: http.StatusFound},
		}
		if host != "" {
			r.Hosts = append([]string{strings.ToLower(host)}, n.aliases...)
		}
		t.entries = append(t.entries, entry{origin: refOf("Ingress", ing), obj: ing, seq: 0, route: r})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// ingressMatch is an Ingress path as a sturdy path condition: Exact is
// exact, Prefix matches whole segments (a trailing slash ignored, as the
// Ingress spec says), and ImplementationSpecific is what ingress-nginx
// makes of it: characters, as an nginx prefix location, or with use-regex
// or rewrite-target a case-insensitive regular expression anchored at the
// start (nginx's location ~* "^path").
func ingressMatch(p networkingv1.HTTPIngressPath, n *nginx, res *IngressResult) (*config.RouteMatch, *config.Rewrite, bool) {
	path := p.Path
	if path == "" {
		path = "/"
	}
	typ := networkingv1.PathTypeImplementationSpecific
	if p.PathType != nil {
		typ = *p.PathType
	}
	m := &config.RouteMatch{}
	switch {
	case typ == networkingv1.PathTypeImplementationSpecific && n.regex:
		if _, err := regexp.Compile("(?i)^" + path); err != nil {
			res.Events = append(res.Events, fmt.Sprintf("path %q is not an RE2 regular expression (%v); not served", path, err))
			return nil, nil, false
		}
		m.Path = &config.PathMatch{Regex: "^" + path, CaseInsensitive: true}
	case !strings.HasPrefix(path, "/"):
		res.Events = append(res.Events, fmt.Sprintf("path %q does not start with /; not served", path))
		return nil, nil, false
	case typ == networkingv1.PathTypeExact:
		m.Path = &config.PathMatch{Exact: path}
	case typ == networkingv1.PathTypePrefix:
		m.Path = &config.PathMatch{Prefix: gatewayPrefix(path)}
	default:
		m.Path = &config.PathMatch{StartsWith: path}
	}
	var rw *config.Rewrite
	if n.rewriteTarget != "" {
		if _, err := regexp.Compile("(?i)^" + path); err != nil {
			res.Events = append(res.Events, fmt.Sprintf("rewrite-target: path %q is not an RE2 regular expression (%v); not served", path, err))
			return nil, nil, false
		}
		// nginx: rewrite "(?i)^path" target break;
		rw = &config.Rewrite{Regex: "^" + path, CaseInsensitive: true, Path: n.rewriteTarget}
	}
	return m, rw, true
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
		sp, ok := t.port("", Ref{}, ingressHTTPS, gwv1.HTTPSProtocolType)
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
// and a canary Ingress's, as ingress-nginx does: canary-by-header, then
// canary-by-cookie, then canary-weight (sturdy's backends, tried in that
// order).
func (t *translator) canaries(list []*networkingv1.Ingress, paths map[pathKey]*ingressPath) {
	split := map[int]Ref{} // entry -> the canary that split it
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
				main := paths[keyOf(rule.Host, p)]
				if main == nil {
					res.Events = append(res.Events, fmt.Sprintf("canary path %s%s has no main Ingress with the same host, path and pathType; not served", rule.Host, p.Path))
					continue
				}
				pool, ok := t.ingressBackend(ing, &p.Backend, n, res)
				if !ok {
					continue
				}
				matched++
				for _, i := range main.ei {
					if by, dup := split[i]; dup {
						res.Events = append(res.Events, fmt.Sprintf("canary path %s%s: %s is already its canary, and a path has one; not served", rule.Host, p.Path, by))
						continue
					}
					split[i] = ref
					e := &t.entries[i]
					e.route.Backends = n.canaryBackends(e.route.Pool, pool.Name)
					e.route.Pool = ""
					e.pools = append(e.pools, &pool)
				}
			}
		}
		if matched == 0 {
			res.Served = false
		}
	}
}

// canaryBackends are the entries that choose between a path's main pool
// and its canary's.
func (n *nginx) canaryBackends(main, canary string) []config.Backend {
	var out []config.Backend
	if h := n.canaryHeader; h != "" {
		switch {
		case n.canaryHeaderValue != "":
			out = append(out, config.Backend{Pool: canary, Header: &config.ValueMatch{Name: h, Exact: n.canaryHeaderValue}})
		case n.canaryHeaderPattern != "":
			out = append(out, config.Backend{Pool: canary, Header: &config.ValueMatch{Name: h, Regex: n.canaryHeaderPattern}})
		default:
			out = append(out,
				config.Backend{Pool: canary, Header: &config.ValueMatch{Name: h, Exact: "always"}},
				config.Backend{Pool: main, Header: &config.ValueMatch{Name: h, Exact: "never"}})
		}
	}
	if c := n.canaryCookie; c != "" {
		out = append(out,
			config.Backend{Pool: canary, Cookie: &config.ValueMatch{Name: c, Exact: "always"}},
			config.Backend{Pool: main, Cookie: &config.ValueMatch{Name: c, Exact: "never"}})
	}
	w, total := int(n.canaryWeight), int(n.canaryTotal)
	if total-w > 0 || w == 0 {
		out = append(out, config.Backend{Pool: main, Weight: max(total-w, 1)})
	}
	if w > 0 {
		out = append(out, config.Backend{Pool: canary, Weight: w})
	}
	return out
}
