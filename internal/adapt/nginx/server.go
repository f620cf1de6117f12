package nginx

import (
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Reading server, listen and location blocks into the typed view.

func (s *Site) newServer(d *Directive) *Server {
	srv := &Server{Scope: &Scope{Dir: d, Parent: s.HTTP, list: d.Children}}
	for _, c := range d.Children {
		switch c.Name {
		case "server_name":
			for _, n := range c.Args {
				// nginx lowercases every name but a regular expression
				// when it reads the config: $server_name and redirects
				// to it carry the lowercased name.
				if !strings.HasPrefix(n, "~") {
					n = strings.ToLower(n)
				}
				srv.Names = append(srv.Names, n)
			}
		case "listen":
			srv.Listens = append(srv.Listens, newListen(c))
		case "location":
			if c.IsBlock {
				s.addLocations(srv, srv.Scope, c)
			}
		}
	}
	if len(srv.Names) == 0 {
		srv.Names = []string{""}
	}
	if len(srv.Listens) == 0 {
		srv.Listens = []*Listen{{Dir: d, Addr: "*:80", Host: "*", Port: "80", Implicit: true}}
	}
	return srv
}

func (s *Site) addLocations(srv *Server, parent *Scope, d *Directive) {
	loc := &Location{Scope: &Scope{Dir: d, Parent: parent, list: d.Children}, Server: srv}
	switch len(d.Args) {
	case 1:
		a := d.Args[0]
		switch {
		case strings.HasPrefix(a, "@"):
			loc.Named, loc.Path = true, a
		case strings.HasPrefix(a, "^~"):
			loc.Modifier, loc.Path = "^~", a[2:]
		case strings.HasPrefix(a, "~*"):
			loc.Modifier, loc.Path = "~*", a[2:]
		case strings.HasPrefix(a, "~"):
			loc.Modifier, loc.Path = "~", a[1:]
		case strings.HasPrefix(a, "="):
			loc.Modifier, loc.Path = "=", a[1:]
		default:
			loc.Path = a
		}
	default:
		loc.Modifier, loc.Path = d.Arg(0), d.Arg(1)
	}
	if pp := loc.Local("proxy_pass"); len(pp) > 0 {
		loc.ProxyPass = pp[len(pp)-1]
		loc.Target = s.DecodeTarget(loc.ProxyPass.Arg(0))
	}
	srv.Locations = append(srv.Locations, loc)
	for _, c := range d.Children {
		if c.Name == "location" && c.IsBlock {
			s.addLocations(srv, loc.Scope, c)
		}
	}
}

// DecodeTarget decodes a proxy_pass URL, resolving upstream names.
func (s *Site) DecodeTarget(raw string) *ProxyTarget {
	t := &ProxyTarget{Variable: strings.Contains(raw, "$")}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return t
	}
	t.Scheme = strings.ToLower(scheme)
	if sock, ok := strings.CutPrefix(rest, "unix:"); ok {
		// http://unix:/run/app.sock:/uri: the socket path ends at a colon.
		t.Unix = true
		path, uri, _ := strings.Cut(sock, ":")
		t.Host, t.URI = "unix:"+path, uri
		return t
	}
	host, uri := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		host, uri = rest[:i], rest[i:]
	}
	if i := PathVarIndex(host); i >= 0 {
		// http://127.0.0.1:3000$uri: the value starts with a slash, so
		// nginx read the host before it and the URI from it.
		host, uri = host[:i], host[i:]+uri
	}
	t.Host, t.URI = host, uri
	if !t.Variable {
		t.Upstream = s.upstreams[host]
	}
	return t
}

// PathVarIndex is the index in host of the first variable whose value is a
// path starting with a slash ($uri, $document_uri, $request_uri), or -1
// when there is none or another variable comes first.
func PathVarIndex(host string) int {
	i := strings.IndexByte(host, '$')
	if i < 0 {
		return -1
	}
	name := host[i+1:]
	if strings.HasPrefix(name, "{") {
		name, _, _ = strings.Cut(name[1:], "}")
	} else if j := strings.IndexFunc(name, func(r rune) bool {
		return !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}); j >= 0 {
		name = name[:j]
	}
	switch name {
	case "uri", "document_uri", "request_uri":
		return i
	}
	return -1
}

// HostPort returns the target as host:port for a direct address (no
// upstream block), adding the scheme's default port.
func (t *ProxyTarget) HostPort() string {
	if _, _, err := net.SplitHostPort(t.Host); err == nil {
		return t.Host
	}
	port := "80"
	if t.Scheme == "https" {
		port = "443"
	}
	if u, err := url.Parse("http://" + t.Host); err == nil && u.Hostname() != "" {
		return net.JoinHostPort(u.Hostname(), port)
	}
	return net.JoinHostPort(t.Host, port)
}

func newListen(d *Directive) *Listen {
	l := &Listen{Dir: d}
	a := d.Arg(0)
	switch {
	case strings.HasPrefix(a, "unix:"):
		l.Addr, l.Host, l.Unix = a, a, true
	default:
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			if _, perr := strconv.Atoi(a); perr == nil {
				host, port = "*", a
			} else {
				host, port = a, "80"
			}
		}
		if host == "" {
			host = "*"
		}
		l.Host, l.Port = host, port
		if strings.Contains(host, ":") {
			l.Addr = "[" + host + "]:" + port
		} else {
			l.Addr = host + ":" + port
		}
	}
	for _, p := range d.Args[min(1, len(d.Args)):] {
		switch p {
		case "ssl":
			l.SSL = true
		case "http2":
			l.HTTP2 = true
		case "quic":
			l.QUIC = true
		case "default_server", "default":
			l.Default = true
		case "proxy_protocol":
			l.ProxyProto = true
		}
	}
	return l
}
