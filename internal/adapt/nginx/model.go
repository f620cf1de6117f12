package nginx

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Scope is a block whose directives the blocks inside it inherit: the http
// block, a server, a location. Lookups follow nginx's rule for proxy_*,
// error_page, add_header and friends: a block that sets a directive at all
// replaces every value of that directive from the blocks around it.
type Scope struct {
	// Dir is the block directive; nil for the main context.
	Dir    *Directive
	Parent *Scope
	list   []*Directive
}

// Local returns the directives named name written directly in this block.
func (s *Scope) Local(name string) []*Directive {
	var out []*Directive
	for _, d := range s.list {
		if d.Name == name {
			out = append(out, d)
		}
	}
	return out
}

// Get returns the directives named name in effect here: those of the
// innermost enclosing block that has any.
func (s *Scope) Get(name string) []*Directive {
	for c := s; c != nil; c = c.Parent {
		if l := c.Local(name); len(l) > 0 {
			return l
		}
	}
	return nil
}

// Get1 returns the last directive named name in effect here, or nil.
func (s *Scope) Get1(name string) *Directive {
	l := s.Get(name)
	if len(l) == 0 {
		return nil
	}
	return l[len(l)-1]
}

// Site is the part of an nginx config that a proxy's behaviour depends on.
type Site struct {
	Config *Config
	// Main is the main context; HTTP the http block inside it (nil if none).
	Main *Scope
	HTTP *Scope
	// Upstreams and Servers in file order.
	Upstreams []*Upstream
	Servers   []*Server
	// Defaults maps each listen address ("*:80", "[::]:443") to the server
	// that answers requests whose Host matches no server_name there.
	Defaults map[string]*Server

	upstreams map[string]*Upstream
}

// Upstream is an upstream block.
type Upstream struct {
	Name    string
	Dir     *Directive
	Servers []*UpstreamServer
	// Balance is the load-balancing directive (ip_hash, least_conn, hash,
	// random, least_time, ...), nil for nginx's default round robin.
	Balance *Directive
	// Keepalive is the per-worker idle connection cache size, 0 when unset.
	Keepalive    int
	KeepaliveDir *Directive
	// Zone is the shared-memory zone directive, nil when failure state is per worker.
	Zone *Directive
	// Check is an active health check directive (`check` of
	// nginx_upstream_check_module / Tengine), nil when none.
	Check *Directive
	// Resolver is an upstream-level resolver directive, nil when none.
	Resolver *Directive
}

// UpstreamServer is one `server` line of an upstream.
type UpstreamServer struct {
	Dir *Directive
	// Addr is the address as written, with ":80" added when no port was given.
	Addr string
	// Host is the address without the port, Port the port.
	Host, Port string
	// Unix reports a unix-domain socket address ("unix:/path").
	Unix bool
	// Weight defaults to 1.
	Weight int
	// MaxFails defaults to 1 and FailTimeout to 10s, as in nginx; the *Set
	// fields report whether they were written.
	MaxFails       int
	MaxFailsSet    bool
	FailTimeout    time.Duration
	FailTimeoutSet bool
	MaxConns       int
	Backup, Down   bool
	Resolve        bool
	// Other holds parameters this view does not model (slow_start=, route=, ...).
	Other []string
}

// nginx's passive health defaults.
const (
	DefaultMaxFails    = 1
	DefaultFailTimeout = 10 * time.Second
)

// IsHostname reports whether the server names a DNS name rather than an
// IP address or a socket.
func (u *UpstreamServer) IsHostname() bool {
	if u.Unix {
		return false
	}
	return net.ParseIP(strings.Trim(u.Host, "[]")) == nil
}

// Server is a server block.
type Server struct {
	*Scope
	// Names are the server_name values ("" when none is set).
	Names     []string
	Listens   []*Listen
	Locations []*Location
	// DefaultFor lists the listen addresses this server is the default
	// server of, explicitly (default_server) or by being listed first.
	DefaultFor []string
}

// Listen is one listen directive.
type Listen struct {
	Dir *Directive
	// Addr is "host:port" with "*" for any address ("*:80", "[::]:443",
	// "127.0.0.1:8080"), or "unix:/path".
	Addr       string
	Host, Port string
	Unix       bool
	SSL        bool
	HTTP2      bool
	Default    bool // default_server (or the old "default") was written
	Implicit   bool // no listen directive: nginx listens on *:80
	QUIC       bool
	ProxyProto bool
}

// Location is a location block, nested ones included (their Parent scope is
// the enclosing location).
type Location struct {
	*Scope
	Server *Server
	// Modifier is "", "=", "~", "~*" or "^~"; Named locations ("@x") have
	// Named set and Path "@x".
	Modifier string
	Path     string
	Named    bool
	// ProxyPass is this location's own proxy_pass (it is not inherited),
	// nil when it does not proxy.
	ProxyPass *Directive
	// Target is ProxyPass decoded; nil when ProxyPass is nil.
	Target *ProxyTarget
}

// ProxyTarget is a decoded proxy_pass URL.
type ProxyTarget struct {
	Scheme string // http or https
	// Host is the upstream name or host[:port] as written.
	Host string
	// URI is the part after the host ("/api/"), "" when none: nginx then
	// passes the request URI unchanged.
	URI string
	// Upstream is the upstream block Host names, nil for a direct address.
	Upstream *Upstream
	// Variable reports that the URL holds nginx variables, so the target is
	// only known at request time (and is resolved through DNS then).
	Variable bool
	// Unix reports a unix-domain socket target; Host is then
	// "unix:/path" and URI what follows the path's colon.
	Unix bool
}

// NewSite builds the typed view of cfg.
func NewSite(cfg *Config) *Site {
	s := &Site{
		Config:    cfg,
		Main:      &Scope{list: cfg.Directives},
		Defaults:  map[string]*Server{},
		upstreams: map[string]*Upstream{},
	}
	for _, d := range cfg.Directives {
		if d.Name == "http" && d.IsBlock && s.HTTP == nil {
			s.HTTP = &Scope{Dir: d, Parent: s.Main, list: d.Children}
		}
	}
	if s.HTTP == nil {
		return s
	}
	for _, d := range s.HTTP.list {
		switch {
		case d.Name == "upstream" && d.IsBlock:
			u := newUpstream(d)
			s.Upstreams = append(s.Upstreams, u)
			if _, dup := s.upstreams[u.Name]; !dup {
				s.upstreams[u.Name] = u
			}
		}
	}
	for _, d := range s.HTTP.list {
		if d.Name == "server" && d.IsBlock {
			s.Servers = append(s.Servers, s.newServer(d))
		}
	}
	s.assignDefaults()
	return s
}

// Upstream returns the upstream block named name, or nil.
func (s *Site) Upstream(name string) *Upstream { return s.upstreams[name] }

// WorkerProcesses returns the worker_processes setting: a number, or 0 for
// "auto" (one per CPU), or 1 when unset.
func (s *Site) WorkerProcesses() int {
	d := s.Main.Get1("worker_processes")
	if d == nil {
		return 1
	}
	n, err := strconv.Atoi(d.Arg(0))
	if err != nil {
		return 0
	}
	return n
}

// WorkerConnections returns events { worker_connections }, or nginx's
// default of 512.
func (s *Site) WorkerConnections() int {
	for _, d := range s.Main.Local("events") {
		if wc := d.Child("worker_connections"); wc != nil {
			if n, err := strconv.Atoi(wc.Arg(0)); err == nil {
				return n
			}
		}
	}
	return 512
}

func newUpstream(d *Directive) *Upstream {
	u := &Upstream{Name: d.Arg(0), Dir: d}
	for _, c := range d.Children {
		switch c.Name {
		case "server":
			u.Servers = append(u.Servers, newUpstreamServer(c))
		case "ip_hash", "least_conn", "hash", "random", "least_time", "sticky", "ntlm":
			u.Balance = c
		case "keepalive":
			u.Keepalive, _ = strconv.Atoi(c.Arg(0))
			u.KeepaliveDir = c
		case "zone":
			u.Zone = c
		case "check":
			u.Check = c
		case "resolver":
			u.Resolver = c
		}
	}
	return u
}

func newUpstreamServer(d *Directive) *UpstreamServer {
	us := &UpstreamServer{Dir: d, Weight: 1, MaxFails: DefaultMaxFails, FailTimeout: DefaultFailTimeout}
	addr := d.Arg(0)
	if strings.HasPrefix(addr, "unix:") {
		us.Addr, us.Host, us.Unix = addr, addr, true
	} else {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			host, port = addr, "80"
		}
		us.Host, us.Port = host, port
		us.Addr = net.JoinHostPort(strings.Trim(host, "[]"), port)
	}
	for _, p := range d.Args[min(1, len(d.Args)):] {
		k, v, _ := strings.Cut(p, "=")
		switch k {
		case "weight":
			if n, err := strconv.Atoi(v); err == nil {
				us.Weight = n
			}
		case "max_fails":
			if n, err := strconv.Atoi(v); err == nil {
				us.MaxFails, us.MaxFailsSet = n, true
			}
		case "fail_timeout":
			if t, err := ParseTime(v); err == nil {
				us.FailTimeout, us.FailTimeoutSet = t, true
			}
		case "max_conns":
			us.MaxConns, _ = strconv.Atoi(v)
		case "backup":
			us.Backup = true
		case "down":
			us.Down = true
		case "resolve":
			us.Resolve = true
		default:
			us.Other = append(us.Other, p)
		}
	}
	return us
}

// assignDefaults finds the default server of every listen address: the
// one marked default_server, else the first server listening there.
func (s *Site) assignDefaults() {
	explicit := map[string]*Server{}
	for _, srv := range s.Servers {
		for _, l := range srv.Listens {
			if _, seen := s.Defaults[l.Addr]; !seen {
				s.Defaults[l.Addr] = srv
			}
			if l.Default {
				if _, seen := explicit[l.Addr]; !seen {
					explicit[l.Addr] = srv
				}
			}
		}
	}
	for a, srv := range explicit {
		s.Defaults[a] = srv
	}
	for a, srv := range s.Defaults {
		srv.DefaultFor = append(srv.DefaultFor, a)
	}
	for _, srv := range s.Servers {
		slices.Sort(srv.DefaultFor)
	}
}

// Proxied returns the server's locations that proxy_pass somewhere.
func (srv *Server) Proxied() []*Location {
	var out []*Location
	for _, l := range srv.Locations {
		if l.ProxyPass != nil {
			out = append(out, l)
		}
	}
	return out
}

// Label is a short human name for the server: its first server_name, or
// "default server" with its first listen address.
func (srv *Server) Label() string {
	if n := srv.Names[0]; n != "" && n != "_" {
		return n
	}
	return "server on " + srv.Listens[0].Addr
}
