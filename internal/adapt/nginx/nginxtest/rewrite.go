package nginxtest

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
)

// Plan says where a rewritten configuration runs.
type Plan struct {
	// Dir is nginx's prefix: logs, pid, temp and cache paths, roots and
	// password files all move below it.
	Dir string
	// Cert and Key replace every certificate, and are set at http level so
	// that a TLS server without a certificate of its own gets one.
	Cert, Key string
	// RSACert and RSAKey, when set, go beside Cert and Key (nginx serves
	// one certificate of each key type): a config whose ssl_ciphers
	// lists only RSA suites, as many published ones do, then still
	// completes a handshake.
	RSACert, RSAKey string
	// User is the user directive for a root master ("" leaves it out).
	User string
	// Port gives the loopback port for a listen key (see ListenKey).
	Port func(key string) int
	// Backend gives the loopback host:port for a backend address as the
	// config names it ("10.0.0.1:8080", "app:80", "unix:/run/app.sock").
	Backend func(addr string) string
}

// ListenKey names a listen address independently of the address family:
// the port for wildcard addresses ("80" for *:80, [::]:80 and 0.0.0.0:80),
// else host:port. sturdy's translation of the same listen gets the same key
// (SturdyListenKey), so both sides are sent the same requests.
func ListenKey(l *nginx.Listen) string {
	switch l.Host {
	case "*", "[::]", "::", "0.0.0.0", "":
		return l.Port
	}
	return net.JoinHostPort(strings.Trim(l.Host, "[]"), l.Port)
}

// SturdyListenKey is ListenKey for a sturdy listen address (":80", "[::]:80", "127.0.0.1:8080").
func SturdyListenKey(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	switch host {
	case "", "::", "0.0.0.0":
		return port
	}
	return net.JoinHostPort(host, port)
}

// Rewrite returns cfg as one nginx file that runs inside p.Dir on loopback.
// cfg is not changed. What it rewrites: user, pid, daemon and worker
// settings; every log, temp, cache, root, alias and password-file path;
// certificates (and drops DH parameters and CA files it cannot supply);
// absolute roots and aliases move below Dir/www, relative ones stay
// relative to Dir, nginx's prefix;
// resolvers (to loopback, so nothing leaves the machine); listen
// directives (to 127.0.0.1 with the planned port, one per port in a
// server, a listen added where nginx would listen on *:80 implicitly);
// upstream servers and proxy_pass/fastcgi_pass/... addresses (to the
// planned backends).
//
// Rewrite creates the directories it points into (tmp, cache, www) below
// p.Dir, and an htpasswd file with one user.
func Rewrite(cfg *nginx.Config, p Plan) ([]byte, error) {
	for _, sub := range []string{"tmp", "cache", "www"} {
		// nginx's workers (another user when the tests run as root) write
		// temp and cache files here.
		dir := filepath.Join(p.Dir, sub)
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return nil, err
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			return nil, err
		}
	}
	// One user, so that sturdy (which refuses a file without users) and
	// nginx read the same file; requests without credentials get 401.
	if err := os.WriteFile(filepath.Join(p.Dir, "htpasswd"), []byte("harness:{PLAIN}not-a-secret\n"), 0o644); err != nil {
		return nil, err
	}
	site := nginx.NewSite(cfg)
	r := &rewriter{p: p, defaults: map[int]bool{}, servers: map[*nginx.Directive]*nginx.Server{}, upstreamServers: map[*nginx.Directive]*nginx.UpstreamServer{}, targets: map[*nginx.Directive]string{}}
	for _, srv := range site.Servers {
		r.servers[srv.Dir] = srv
		for _, l := range srv.Locations {
			if l.ProxyPass != nil && l.Target != nil && l.Target.Upstream == nil && !l.Target.Variable {
				r.targets[l.ProxyPass] = l.Target.HostPort()
				if l.Target.Unix {
					r.targets[l.ProxyPass] = l.Target.Host
				}
			}
		}
	}
	for _, u := range site.Upstreams {
		for _, s := range u.Servers {
			r.upstreamServers[s.Dir] = s
		}
	}
	r.upstreams = map[string]bool{}
	for _, u := range site.Upstreams {
		r.upstreams[u.Name] = true
	}
	main := r.block(cfg.Directives, "main")
	head := []*nginx.Directive{
		d("pid", filepath.Join(p.Dir, "nginx.pid")),
		d("worker_processes", "1"),
		d("error_log", filepath.Join(p.Dir, "error.log"), "info"),
	}
	if p.User != "" {
		head = append(head, d("user", strings.Fields(p.User)...))
	}
	return nginx.Format(append(head, main...)), nil
}

type rewriter struct {
	p               Plan
	defaults        map[int]bool // ports that already have a default_server
	servers         map[*nginx.Directive]*nginx.Server
	upstreamServers map[*nginx.Directive]*nginx.UpstreamServer
	targets         map[*nginx.Directive]string // direct proxy_pass targets, normalised
	upstreams       map[string]bool
	caches          int
}

func d(name string, args ...string) *nginx.Directive {
	return &nginx.Directive{Name: name, Args: args}
}

// dropped are directives with nothing to run on a test machine: process
// settings the plan sets itself, and files the test cannot supply.
var dropped = map[string]bool{
	"user": true, "pid": true, "daemon": true, "master_process": true, "worker_processes": true,
	"lock_file": true, "working_directory": true, "worker_rlimit_nofile": true, "worker_cpu_affinity": true,
	"client_body_temp_path": true, "proxy_temp_path": true, "fastcgi_temp_path": true, "uwsgi_temp_path": true, "scgi_temp_path": true,
	"ssl_dhparam": true, "ssl_trusted_certificate": true, "ssl_client_certificate": true, "ssl_crl": true,
	"ssl_stapling_file": true, "ssl_password_file": true, "ssl_session_ticket_key": true, "ssl_verify_client": true,
	"proxy_ssl_trusted_certificate": true, "proxy_ssl_certificate": true, "proxy_ssl_certificate_key": true,
}

func (r *rewriter) block(list []*nginx.Directive, ctx string) []*nginx.Directive {
	var out []*nginx.Directive
	certs := 0
	for _, src := range list {
		if dropped[src.Name] {
			continue
		}
		c := &nginx.Directive{Name: src.Name, Args: slices.Clone(src.Args), File: src.File, Line: src.Line, IsBlock: src.IsBlock, IsLua: src.IsLua, Lua: src.Lua}
		switch src.Name {
		case "error_log":
			c.Args = []string{filepath.Join(r.p.Dir, "error.log")}
			if len(src.Args) > 1 {
				c.Args = append(c.Args, src.Args[len(src.Args)-1])
			}
		case "access_log":
			if src.Arg(0) != "off" {
				c.Args[0] = filepath.Join(r.p.Dir, "access.log")
			}
		case "ssl_certificate", "ssl_certificate_key":
			if certs++; certs > 2 {
				continue // one pair per block: a second (ECDSA) pair would repeat the test pair
			}
			c.Args = []string{r.p.Cert}
			if src.Name == "ssl_certificate_key" {
				c.Args = []string{r.p.Key}
				if r.p.RSACert != "" {
					out = append(out, c, d("ssl_certificate", r.p.RSACert))
					c = d("ssl_certificate_key", r.p.RSAKey)
				}
			}
		case "proxy_cache_path", "fastcgi_cache_path", "uwsgi_cache_path", "scgi_cache_path":
			r.caches++
			c.Args[0] = filepath.Join(r.p.Dir, "cache", strconv.Itoa(r.caches))
		case "root", "alias":
			c.Args[0] = r.under("www", src.Arg(0))
		case "auth_basic_user_file":
			c.Args = []string{filepath.Join(r.p.Dir, "htpasswd")}
		case "resolver":
			c.Args = []string{"127.0.0.1"}
		case "server":
			if ctx == "upstream" {
				r.upstreamServer(c, src)
			}
		case "proxy_pass", "grpc_pass", "fastcgi_pass", "uwsgi_pass", "scgi_pass", "memcached_pass":
			r.pass(c, src)
		}
		if src.IsBlock {
			inner := src.Name
			if ctx == "http" && src.Name == "server" {
				c.Children = r.server(src)
			} else {
				c.Children = r.block(src.Children, inner)
			}
			if src.Name == "http" && ctx == "main" {
				c.Children = append(r.httpHead(src), c.Children...)
			}
		}
		out = append(out, c)
	}
	return out
}

// httpHead is what the plan adds at the top of the http block: temp paths
// and, unless the config sets one there, the test certificate.
func (r *rewriter) httpHead(http *nginx.Directive) []*nginx.Directive {
	tmp := func(name string) *nginx.Directive { return d(name+"_temp_path", filepath.Join(r.p.Dir, "tmp", name)) }
	head := []*nginx.Directive{tmp("client_body"), tmp("proxy"), tmp("fastcgi"), tmp("uwsgi"), tmp("scgi")}
	if http.Child("ssl_certificate") == nil {
		head = append(head, d("ssl_certificate", r.p.Cert), d("ssl_certificate_key", r.p.Key))
		if r.p.RSACert != "" {
			head = append(head, d("ssl_certificate", r.p.RSACert), d("ssl_certificate_key", r.p.RSAKey))
		}
	}
	return head
}

// under moves an absolute path below Dir/sub; a relative one stays, as
// nginx resolves it against its prefix, Dir.
func (r *rewriter) under(sub, path string) string {
	if strings.HasPrefix(path, "$") || !filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(r.p.Dir, sub, path) + map[bool]string{true: "/", false: ""}[strings.HasSuffix(path, "/")]
}

func (r *rewriter) server(src *nginx.Directive) []*nginx.Directive {
	srv := r.servers[src]
	var listens []*nginx.Directive
	seen := map[int]*nginx.Directive{}
	if srv != nil {
		for _, l := range srv.Listens {
			if l.Unix {
				continue
			}
			port := r.p.Port(ListenKey(l))
			ld, ok := seen[port]
			if !ok {
				ld = d("listen", "127.0.0.1:"+strconv.Itoa(port))
				seen[port] = ld
				listens = append(listens, ld)
			}
			add := func(p string) {
				if !slices.Contains(ld.Args, p) {
					ld.Args = append(ld.Args, p)
				}
			}
			if l.SSL {
				add("ssl")
			}
			if l.HTTP2 {
				add("http2")
			}
			if l.ProxyProto {
				add("proxy_protocol")
			}
			if l.Default && !r.defaults[port] {
				r.defaults[port] = true
				add("default_server")
			}
		}
	}
	var rest []*nginx.Directive
	for _, c := range r.block(src.Children, "server") {
		if c.Name != "listen" {
			rest = append(rest, c)
		}
	}
	return append(listens, rest...)
}

func (r *rewriter) upstreamServer(c, src *nginx.Directive) {
	us := r.upstreamServers[src]
	if us == nil {
		return
	}
	c.Args = []string{r.p.Backend(us.Addr)}
	for _, a := range src.Args[1:] {
		if k, _, _ := strings.Cut(a, "="); k == "resolve" || k == "service" || k == "route" || k == "slow_start" {
			continue
		}
		c.Args = append(c.Args, a)
	}
}

// pass points a proxy_pass (or fastcgi_pass, ...) at an address onto its
// planned backend, keeping the scheme and the URI part.
func (r *rewriter) pass(c, src *nginx.Directive) {
	raw := src.Arg(0)
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		scheme, rest = "", raw
	}
	hostport, uri := rest, ""
	if path, ok := strings.CutPrefix(rest, "unix:"); ok {
		// proxy_pass http://unix:/run/app.sock:/uri
		if j := strings.IndexByte(path, ':'); j >= 0 {
			hostport, uri = rest[:5+j], path[j+1:]
		}
	} else if i := strings.IndexByte(rest, '/'); i >= 0 {
		hostport, uri = rest[:i], rest[i:]
	}
	if i := nginx.PathVarIndex(hostport); i >= 0 {
		hostport, uri = hostport[:i], hostport[i:]+uri // http://127.0.0.1:3000$uri
	}
	if r.upstreams[hostport] || strings.Contains(hostport, "$") || !ok && strings.Contains(raw, "$") {
		return // an upstream name, or a backend chosen per request
	}
	addr := r.targets[src]
	if addr == "" {
		addr = hostport
		if _, _, err := net.SplitHostPort(addr); err != nil && !strings.HasPrefix(addr, "unix:") {
			port := "80"
			if scheme == "https" || scheme == "grpcs" {
				port = "443"
			}
			addr = net.JoinHostPort(addr, port)
		}
	}
	out := r.p.Backend(addr) + uri
	if scheme != "" {
		out = scheme + "://" + out
	}
	c.Args[0] = out
}
