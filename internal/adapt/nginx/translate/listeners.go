package translate

import (
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// listener is a sturdy listener made from one or more nginx listen
// directives on the same address.
type listener struct {
	name string
	// proxyProtocol: nginx read the PROXY protocol here (from set_real_ip_from peers).
	proxyProtocol bool
	// keepSlashes is set when a server on the listener had merge_slashes
	// off: the listener cannot merge them for all (slashes.go).
	keepSlashes bool
	// underscores is set when a server on the listener passed header
	// names with "_" (underscores_in_headers on, or ignore_invalid_headers
	// off): sturdy drops them unless the listener allows them.
	underscores bool
	listen      string
	ssl         bool
	certs       []*certEntry // TLS listeners: one per certificate file (tls.go)
	tls         tlsPlan
	// redirect is set on a plain listener whose every server sent clients
	// to https (redirect.go).
	redirect     *config.RedirectHTTPS
	redirectNote string
	from         []*nginx.Directive
	comments     []string
	// idle and readHeader carry client-side timeouts (0: sturdy's default).
	idle, readHeader time.Duration
	// h2c: nginx spoke HTTP/2 with prior knowledge here (listen ... http2
	// without ssl).
	h2c bool
}

// sturdyAddr maps an nginx listen address to a Go listen address: nginx's
// "*:80" and "[::]:80" are both ":80" (Go listens on both families).
func sturdyAddr(l *nginx.Listen) string {
	switch l.Host {
	case "*", "[::]", "::", "0.0.0.0":
		return ":" + l.Port
	}
	return net.JoinHostPort(strings.Trim(l.Host, "[]"), l.Port)
}

// proxyProtoComment marks a listener nginx read the PROXY protocol on.
const proxyProtoComment = "nginx expected the PROXY protocol here (listen ... proxy_protocol); set proxy_protocol: required once trusted_proxies lists the load balancers"

func (t *translator) listeners() {
	t.listenerOf = map[string]*listener{}
	t.sni = map[*nginx.Server]*nginx.Directive{}
	t.clientCert = map[*nginx.Server]string{}
	t.sniSettings = map[*nginx.Server]notes{}
	t.listenNotes = map[*nginx.Server]notes{}
	byAddr := map[string]*listener{}
	for _, srv := range t.site.Servers {
		for _, l := range srv.Listens {
			if l.Implicit {
				continue
			}
			switch {
			case l.Unix:
				t.skip(l.Dir, "unix-domain socket listeners: sturdy listens on TCP addresses only")
				continue
			case l.QUIC:
				t.skip(l.Dir, "HTTP/3 (quic) is not translated; add http3: {} to the TLS listener on this port (docs/protocols.md)")
				continue
			}
			addr := sturdyAddr(l)
			if !validAddr(addr) || !printable(addr) {
				t.skip(l.Dir, fmt.Sprintf("invalid listen address %q", addr))
				continue
			}
			ln, ok := byAddr[addr]
			if !ok {
				ln = &listener{listen: addr, ssl: l.SSL || serverSSL(srv)}
				byAddr[addr] = ln
				t.listenersOut = append(t.listenersOut, ln)
			}
			ln.ssl = ln.ssl || l.SSL || serverSSL(srv)
			ln.from = append(ln.from, l.Dir)
			ln.keepSlashes = ln.keepSlashes || !mergesSlashes(srv)
			ln.underscores = ln.underscores || passesUnderscores(srv)
			if l.ProxyProto {
				switch {
				case len(t.trusted) > 0:
					// sturdy reads PROXY headers from trusted_proxies
					// (nginx's set_real_ip_from) only (docs/protocols.md).
					ln.proxyProtocol = true
				case !slices.Contains(ln.comments, proxyProtoComment):
					t.listenNotes[srv] = append(t.listenNotes[srv], note{fmt.Sprintf("nginx read the PROXY protocol on %s (%s) from any peer; sturdy believes PROXY headers only from trusted_proxies, and nginx's set_real_ip_from named none: set proxy_protocol: required on this listener and list the load balancers in trusted_proxies", addr, l.Dir.Pos()), NeedProxyProtocol})
					ln.comments = append(ln.comments, proxyProtoComment)
					t.items = append(t.items, Item{File: l.Dir.File, Line: l.Dir.Line, Directive: l.Dir.String(), Reason: "the PROXY protocol is not translated without set_real_ip_from: sturdy reads it only from trusted_proxies"})
				}
			}
			if l.HTTP2 || srv.Get1("http2") != nil && srv.Get1("http2").Arg(0) == "on" {
				// Without ssl nginx spoke HTTP/2 with prior knowledge
				// only; sturdy's h2c listener speaks it too (and HTTP/1.1
				// beside it, which nginx answered with a broken reply).
				ln.h2c = true
			}
			t.listenerOf[l.Addr] = ln
			t.use(l.Dir, srv.Get1("ssl"))
		}
		// A server without listen directives listens on *:80.
		if len(srv.Listens) == 1 && srv.Listens[0].Implicit {
			l := srv.Listens[0]
			addr := sturdyAddr(l)
			ln, ok := byAddr[addr]
			if !ok {
				ln = &listener{listen: addr}
				byAddr[addr] = ln
				t.listenersOut = append(t.listenersOut, ln)
			}
			ln.keepSlashes = ln.keepSlashes || !mergesSlashes(srv)
			ln.underscores = ln.underscores || passesUnderscores(srv)
			ln.comments = appendOnce(ln.comments, fmt.Sprintf("server at %s has no listen directive: nginx listens on *:80 for it", srv.Dir.Pos()))
			t.listenerOf[l.Addr] = ln
		}
	}
	t.certificates()
	taken := map[string]bool{}
	kept := t.listenersOut[:0]
	for _, ln := range t.listenersOut {
		if ln.ssl && len(ln.certs) == 0 {
			// nginx could not complete a handshake here (or nginx -t
			// failed): keep the listener and its routes, and say what
			// sturdy needs, rather than drop them silently.
			for _, d := range ln.from {
				t.items = append(t.items, Item{File: d.File, Line: d.Line, Directive: d.String(), Reason: "listens with ssl but no server on it has an ssl_certificate (incident 001's latent bug): the listener needs tls.cert and tls.key before sturdy can serve it"})
			}
			base := strings.NewReplacer(":", "-", "[", "", "]", "").Replace(strings.TrimPrefix(ln.listen, ":"))
			e := &certEntry{cert: filepath.Join(t.opt.ConfigDir, "sturdy-tls-"+base+".crt"), key: filepath.Join(t.opt.ConfigDir, "sturdy-tls-"+base+".key")}
			ln.certs = []*certEntry{e}
			ln.comments = append(ln.comments, "nginx had no ssl_certificate for the servers on this address; put the certificate and key at these paths")
			t.warnings = appendOnce(t.warnings, fmt.Sprintf("no ssl_certificate in nginx for %s: put a certificate and key at %s and %s (or change tls.cert and tls.key) before `sturdy check`", ln.listen, e.cert, e.key))
		}
		_, port, _ := net.SplitHostPort(ln.listen)
		scheme := "http"
		if ln.ssl {
			scheme = "https"
		}
		host, _, _ := net.SplitHostPort(ln.listen)
		switch {
		case host == "" && (port == "80" && !ln.ssl || port == "443" && ln.ssl):
			ln.name = name(taken, scheme)
		case host == "":
			ln.name = name(taken, scheme, port)
		default:
			ln.name = name(taken, scheme, host, port)
		}
		kept = append(kept, ln)
	}
	t.listenersOut = kept
	t.clientTimeouts()
}

// clientTimeouts carries http-level client timeouts to every listener.
func (t *translator) clientTimeouts() {
	if t.site.HTTP == nil {
		return
	}
	if d := last(t.site.HTTP.Local("keepalive_timeout")); d != nil {
		if v, err := nginx.ParseTime(d.Arg(0)); err == nil && v > 0 {
			for _, ln := range t.listenersOut {
				ln.idle = v
			}
			t.use(d)
		}
	}
	if d := last(t.site.HTTP.Local("client_header_timeout")); d != nil {
		if v, err := nginx.ParseTime(d.Arg(0)); err == nil && v > 0 {
			for _, ln := range t.listenersOut {
				ln.readHeader = v
			}
			t.use(d)
		}
	}
}

// serverSSL reports `ssl on;` in effect for a server (nginx before 1.25:
// every listen of the server speaks TLS).
func serverSSL(srv *nginx.Server) bool {
	d := srv.Get1("ssl")
	return d != nil && d.Arg(0) == "on"
}

func last(ds []*nginx.Directive) *nginx.Directive {
	if len(ds) == 0 {
		return nil
	}
	return ds[len(ds)-1]
}

func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// passesUnderscores reports whether nginx passed request header fields
// whose names hold "_" for srv: underscores_in_headers on, or invalid
// names not ignored (ignore_invalid_headers off), which such names are
// by default.
func passesUnderscores(srv *nginx.Server) bool {
	if d := srv.Scope.Get1("underscores_in_headers"); d != nil && d.Arg(0) == "on" {
		return true
	}
	d := srv.Scope.Get1("ignore_invalid_headers")
	return d != nil && d.Arg(0) == "off"
}
