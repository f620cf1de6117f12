package translate

import (
	"go.yaml.in/yaml/v3"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// Rendering of the route features beyond proxying: files, compression,
// access control.

func renderStatic(s *staticPlan) *yaml.Node {
	c := s.config()
	m := mapping()
	if c.Root != "" {
		set(m, "root", str(c.Root), "", "")
	} else {
		set(m, "alias", str(c.Alias), "", "")
	}
	if c.Index != nil {
		set(m, "index", flowList(c.Index), "", "nginx index")
	}
	if c.TryFiles != nil {
		set(m, "try_files", flowList(c.TryFiles), "", "")
	}
	if c.Autoindex {
		set(m, "autoindex", yes(), "", "")
	}
	set(m, "dotfiles", str(c.Dotfiles), "", "nginx serves files whose names start with a dot")
	if c.CacheControl != "" {
		set(m, "cache_control", str(c.CacheControl), "", "")
	}
	if c.Expires > 0 {
		set(m, "expires", dur(c.Expires.D()), "", "nginx expires")
	}
	if c.Precompressed != nil {
		set(m, "precompressed", flowList(c.Precompressed), "", "nginx gzip_static")
	}
	return m
}

func renderCompress(cp *compressPlan) *yaml.Node {
	c := cp.config()
	m := mapping()
	set(m, "encodings", flowList(c.Encodings), "", "nginx offers gzip only")
	if c.Types != nil {
		set(m, "types", flowList(c.Types), "", "text/html and nginx gzip_types")
	}
	if c.MinLength != config.DefaultCompressMinBytes {
		set(m, "min_length", num(int(c.MinLength)), "", "nginx gzip_min_length")
	}
	lv := mapping()
	set(lv, "gzip", num(c.Level.Gzip), "", "nginx gzip_comp_level")
	set(m, "level", lv, "", "")
	return m
}

// renderGuard adds the route's access rules and limits to m.
func renderGuard(m *yaml.Node, r *route) {
	g := r.guard
	if r.clientCert {
		set(m, "client_cert", str(config.ClientCertRequired), "", "nginx ssl_verify_client on (other servers of this listener did not)")
	}
	if len(g.access) > 0 {
		l := &yaml.Node{Kind: yaml.SequenceNode}
		for _, a := range g.access {
			e := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
			if a.Allow != "" {
				set(e, "allow", str(a.Allow), "", "")
			} else {
				set(e, "deny", str(a.Deny), "", "")
			}
			l.Content = append(l.Content, e)
		}
		set(m, "access", l, "nginx allow/deny, first match wins", "")
	}
	switch {
	case len(g.methods) > 0 && g.methodsStatus != 0:
		set(m, "methods", flowList(g.methods), "", "nginx's server-level if $request_method !~")
		why := map[int]string{403: "nginx answered 403", 405: "nginx answered 405", 444: "nginx closed the connection (444)"}[g.methodsStatus]
		set(m, "methods_status", num(g.methodsStatus), "", why)
	case len(g.methods) > 0:
		set(m, "methods", flowList(g.methods), "", "nginx limit_except")
		set(m, "methods_status", num(403), "", "nginx answered 403, not 405")
	}
	if len(r.rateLimit) > 0 {
		l := &yaml.Node{Kind: yaml.SequenceNode}
		for _, x := range r.rateLimit {
			e := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
			set(e, "zone", str(x.Zone), "", "")
			if x.Burst > 0 {
				set(e, "burst", num(x.Burst), "", "")
			}
			if x.NoDelay {
				set(e, "nodelay", yes(), "", "")
			}
			if x.Delay > 0 {
				set(e, "delay", num(x.Delay), "", "")
			}
			set(e, "status", num(x.Status), "", "")
			l.Content = append(l.Content, e)
		}
		set(m, "rate_limit", l, "nginx limit_req (503 is nginx's default limit_req_status)", "")
	}
	if len(r.connLimit) > 0 {
		l := &yaml.Node{Kind: yaml.SequenceNode}
		for _, x := range r.connLimit {
			e := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
			set(e, "zone", str(x.Zone), "", "")
			set(e, "max", num(x.Max), "", "")
			set(e, "status", num(x.Status), "", "")
			l.Content = append(l.Content, e)
		}
		set(m, "conn_limit", l, "nginx limit_conn (503 is nginx's default limit_conn_status)", "")
	}
	if b := g.basic; b != nil {
		bm := mapping()
		set(bm, "realm", str(b.Realm), "", "")
		set(bm, "htpasswd", str(b.Htpasswd), "", "nginx auth_basic_user_file")
		set(bm, "forward_authorization", yes(), "", "nginx passed Authorization to the backends")
		set(m, "basic_auth", bm, "nginx auth_basic", "")
	}
	if f := g.forward; f != nil {
		fm := mapping()
		set(fm, "url", str(f.URL), "", "")
		set(fm, "pool", str(f.Pool), "", "")
		if f.Timeout > 0 {
			set(fm, "timeout", dur(f.Timeout.D()), "", "nginx proxy_read_timeout of the auth location")
		}
		if len(f.CopyHeaders) > 0 {
			set(fm, "copy_headers", flowList(f.CopyHeaders), "", "nginx auth_request_set + proxy_set_header")
		}
		if f.RequestHeaders != nil {
			note := "every client header, as nginx sent them"
			if len(f.RequestHeaders) == 0 {
				note = "nginx proxy_pass_request_headers off"
			}
			set(fm, "request_headers", flowList(f.RequestHeaders), "", note)
		}
		if f.HostHeader != "" {
			set(fm, "host_header", str(f.HostHeader), "", "nginx proxy_set_header Host of the auth location")
		}
		if f.Statuses != "" {
			set(fm, "statuses", str(f.Statuses), "", "2xx allows, 401 and 403 go back, anything else is 500, as nginx's auth_request")
		}
		set(m, "forward_auth", fm, "nginx auth_request", "")
	}
}

// renderZones adds the limit zones the routes use to the top level.
func (t *translator) renderZones(root *yaml.Node) {
	if len(t.zones.rate) > 0 {
		l := &yaml.Node{Kind: yaml.SequenceNode}
		for _, z := range t.zones.rate {
			e := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
			set(e, "name", str(z.Name), "", "")
			set(e, "key", str(z.Key), "", "")
			set(e, "rate", str(z.Rate.String()), "", "")
			if z.Size > 0 {
				set(e, "size", num(z.Size), "", "")
			}
			l.Content = append(l.Content, e)
		}
		set(root, "rate_limit_zones", l, "From nginx's limit_req_zone; size counts keys (nginx's zone kept about 16000 per megabyte).", "")
	}
	if len(t.zones.conn) > 0 {
		l := &yaml.Node{Kind: yaml.SequenceNode}
		for _, z := range t.zones.conn {
			e := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
			set(e, "name", str(z.Name), "", "")
			set(e, "key", str(z.Key), "", "")
			if z.Size > 0 {
				set(e, "size", num(z.Size), "", "")
			}
			l.Content = append(l.Content, e)
		}
		set(root, "conn_limit_zones", l, "From nginx's limit_conn_zone.", "")
	}
}

func renderTLS(ln *listener) *yaml.Node {
	m := mapping()
	if len(ln.certs) == 1 && ln.certs[0].names == nil {
		set(m, "cert", str(ln.certs[0].cert), "", "")
		set(m, "key", str(ln.certs[0].key), "", "")
	} else {
		l := &yaml.Node{Kind: yaml.SequenceNode}
		for _, e := range ln.certs {
			em := mapping()
			set(em, "cert", str(e.cert), "", "")
			set(em, "key", str(e.key), "", "")
			if e.names != nil {
				set(em, "names", flowList(e.names), "", "nginx server_name")
			} else {
				em.Content[len(em.Content)-1].LineComment = "names: those in the certificate"
			}
			if e.def {
				set(em, "default", yes(), "", "the default server's")
			}
			l.Content = append(l.Content, em)
		}
		set(m, "certificates", l, "one per certificate file, chosen by the name the client asks for (SNI)", "")
	}
	p := ln.tls
	if p.refuseUnknown {
		set(m, "unknown_sni", str("refuse"), "", "nginx ssl_reject_handshake on")
	}
	if p.minVersion != "" {
		set(m, "min_version", str(p.minVersion), "", "nginx ssl_protocols")
	}
	if len(p.ciphers) > 0 {
		set(m, "cipher_suites", flowList(p.ciphers), "", "nginx ssl_ciphers")
	}
	if p.clientAuth.Mode != "" {
		cm := mapping()
		set(cm, "mode", str(p.clientAuth.Mode), "", "nginx ssl_verify_client")
		if p.clientAuth.CA != "" {
			set(cm, "ca", str(p.clientAuth.CA), "", "nginx ssl_client_certificate")
		}
		set(m, "client_auth", cm, "", "")
	}
	if h := p.hsts; h != nil {
		hm := mapping()
		set(hm, "max_age", dur(h.MaxAge.D()), "", "")
		if h.IncludeSubdomains {
			set(hm, "include_subdomains", yes(), "", "")
		}
		if h.Preload {
			set(hm, "preload", yes(), "", "")
		}
		set(m, "hsts", hm, "nginx add_header Strict-Transport-Security", "")
	}
	return m
}
