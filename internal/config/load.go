package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads, decodes, defaults and validates the config file at path.
// On failure the error is an ErrorList with every problem found.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, ErrorList{{File: path, Msg: fmt.Sprintf("cannot read config: %v", err)}}
	}
	return Parse(data, path)
}

// Parse decodes, defaults and validates config bytes; name is used in
// messages (usually the file path). Relative TLS file paths are resolved
// against the working directory.
func Parse(data []byte, name string) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, ErrorList{syntaxError(name, data, err)}
	}
	cfg := &Config{File: name}
	d := &decoder{file: name, lines: map[string]int{}}
	if root.Kind == 0 || (root.Kind == yaml.DocumentNode && len(root.Content) == 0) {
		d.errs = append(d.errs, Error{File: name, Msg: "the file is empty; expected listeners, routes and pools"})
		d.structural = true
	} else {
		d.decode(&root, reflect.ValueOf(cfg).Elem(), "")
	}
	if len(d.errs) > 0 {
		// Every error in one pass: when the file's structure decoded, the
		// semantic checks run on what did, so that fixing one list of
		// errors does not reveal another.
		errs := d.errs
		if !d.structural {
			cfg.lines = d.lines
			errs = append(errs, alsoInvalid(cfg, d.errs)...)
		}
		sort.SliceStable(errs, func(i, j int) bool { return errs[i].Line < errs[j].Line })
		return nil, errs
	}
	sum := sha256.Sum256(data)
	cfg.Hash = hex.EncodeToString(sum[:8])
	cfg.lines = d.lines
	cfg.setDefaults()
	if errs := cfg.validate(); len(errs) > 0 {
		sort.SliceStable(errs, func(i, j int) bool { return errs[i].Line < errs[j].Line })
		return nil, errs
	}
	return cfg, nil
}

// alsoInvalid validates a config whose decode reported errors (none of
// them structural) and returns the problems found besides them: none at
// or below a key that failed to decode, whose value is missing rather
// than wrong.
func alsoInvalid(cfg *Config, decodeErrs ErrorList) (out ErrorList) {
	defer func() {
		if recover() != nil {
			out = nil // a half-decoded config that validation cannot judge
		}
	}()
	cfg.setDefaults()
	for _, e := range cfg.validate() {
		if !explained(cfg, e.Path, decodeErrs) {
			out = append(out, e)
		}
	}
	return out
}

// explained reports whether a problem at key path p follows from a decode
// error: p is at or below a key that failed to decode, or p was not
// written and sits beside an unknown key (likely its misspelling).
func explained(cfg *Config, p string, errs ErrorList) bool {
	for _, e := range errs {
		if e.Path == "" {
			continue
		}
		if p == e.Path || strings.HasPrefix(p, e.Path+".") || strings.HasPrefix(p, e.Path+"[") {
			return true
		}
		if strings.HasPrefix(e.Msg, "unknown key") && parentPath(p) == parentPath(e.Path) && !cfg.Has(p) {
			return true
		}
	}
	return false
}

func parentPath(p string) string {
	if i := strings.LastIndexAny(p, ".["); i >= 0 {
		return p[:i]
	}
	return ""
}

// Line returns the line in the file where the value at key path p was
// written, or the nearest enclosing key's line, or 0.
func (c *Config) Line(p string) int {
	for p != "" {
		if l, ok := c.lines[p]; ok {
			return l
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0
}

// Has reports whether the key path p was written in the file (as opposed to
// being defaulted).
func (c *Config) Has(p string) bool {
	_, ok := c.lines[p]
	return ok
}

func (c *Config) setDefaults() {
	c.setObservabilityDefaults()
	c.setHealthDefaults()
	c.setDegradedDefaults()
	c.setTLSDefaults()
	c.setAccessDefaults()
	c.setStaticDefaults()
	c.setRoutingDefaults()
	c.setProtocolDefaults()
	c.setFaultDefaults()
	c.setKubernetesDefaults()
	if c.Admin.Listen == "" {
		c.Admin.Listen = DefaultAdminListen
	}
	if c.ShutdownGrace == 0 && !c.Has("shutdown_grace") {
		c.ShutdownGrace = Duration(DefaultShutdownGrace)
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	for i := range c.Listeners {
		l := &c.Listeners[i]
		if l.ReadHeaderTimeout == 0 {
			l.ReadHeaderTimeout = Duration(DefaultReadHeaderTimeout)
		}
		if l.IdleTimeout == 0 {
			l.IdleTimeout = Duration(DefaultIdleTimeout)
		}
		if l.MaxHeaderBytes == 0 {
			l.MaxHeaderBytes = DefaultMaxHeaderBytes
		}
	}
	for i := range c.Routes {
		r := &c.Routes[i]
		if r.Path == "" {
			r.Path = "/"
		}
		if r.Timeouts.Connect == 0 {
			r.Timeouts.Connect = Duration(DefaultConnectTimeout)
		}
		if r.Timeouts.ResponseHeader == 0 {
			r.Timeouts.ResponseHeader = Duration(DefaultResponseHeader)
		}
		if r.MaxBodyBytes == 0 && !c.Has(fmt.Sprintf("routes[%d].max_body_bytes", i)) {
			r.MaxBodyBytes = DefaultMaxBodyBytes
		}
		for j, h := range r.Hosts {
			r.Hosts[j] = strings.ToLower(h)
		}
	}
	for i := range c.Pools {
		p := &c.Pools[i]
		if p.Balance == "" {
			p.Balance = BalanceRoundRobin
		}
		if p.Balance == BalanceHash && p.HashKey == "" {
			p.HashKey = DefaultHashKey
		}
		if p.MaxIdleConnsPerHost == 0 {
			p.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
		}
		if p.IdleConnTimeout == 0 {
			p.IdleConnTimeout = Duration(DefaultIdleConnTimeout)
		}
		for j := range p.Hosts {
			if p.Hosts[j].Weight == 0 && !c.Has(fmt.Sprintf("pools[%d].hosts[%d].weight", i, j)) && p.Hosts[j].SRV == "" {
				p.Hosts[j].Weight = 1
			}
		}
	}
}

type validator struct {
	c    *Config
	errs ErrorList
}

func (v *validator) errorf(path, format string, args ...any) {
	v.errs = append(v.errs, v.c.Errorf(path, format, args...))
}

// Errorf makes an error about the value at key path p, positioned at the
// line where it was written: for problems found after Load, such as a file
// the config names that cannot be read.
func (c *Config) Errorf(p, format string, args ...any) Error {
	return Error{File: c.File, Line: c.Line(p), Path: p, Msg: fmt.Sprintf(format, args...)}
}

func (c *Config) validate() ErrorList {
	v := &validator{c: c}
	if c.Admin.Listen != "off" {
		v.checkAddr("admin.listen", c.Admin.Listen)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		v.errorf("log.format", "unknown format %q; expected text or json", c.Log.Format)
	}
	switch c.Log.Access.Format {
	case "", "json", "combined":
	default:
		v.errorf("log.access.format", "unknown format %q; expected json or combined", c.Log.Access.Format)
	}
	if len(c.Log.Access.Fields) > 0 && c.Log.Access.Format == "combined" {
		v.errorf("log.access.fields", "fields choose what the json format writes; the combined format is fixed")
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		v.errorf("log.level", "unknown level %q; expected debug, info, warn or error", c.Log.Level)
	}
	for i, s := range c.TrustedProxies {
		if _, err := ParsePrefix(s); err != nil {
			v.errorf(fmt.Sprintf("trusted_proxies[%d]", i), "%v", err)
		}
	}
	v.listeners()
	pools := v.pools()
	v.routes(pools)
	v.observability()
	v.health()
	v.degraded(pools)
	v.dns()
	v.tls()
	v.access(pools)
	v.static()
	v.routing(pools)
	v.protocols()
	v.faults()
	v.kubernetes()
	return v.errs
}

func (v *validator) listeners() {
	c := v.c
	if len(c.Listeners) == 0 && c.Kubernetes == nil {
		v.errorf("listeners", "no listeners; expected at least one, like { name: web, listen: 127.0.0.1:8080 }")
	}
	names := map[string]int{}
	addrs := map[string]int{}
	for i, l := range c.Listeners {
		p := fmt.Sprintf("listeners[%d]", i)
		v.uniqueName(p, l.Name, "listener", names, i)
		if l.Listen == "" {
			v.errorf(p+".listen", "missing; expected host:port, like 127.0.0.1:8080")
		} else if v.checkAddr(p+".listen", l.Listen) && !strings.HasSuffix(l.Listen, ":0") {
			// Port 0 asks the kernel for a free port: never a clash.
			if j, dup := addrs[l.Listen]; dup {
				v.errorf(p+".listen", "address %s is already used by listeners[%d]", l.Listen, j)
			}
			addrs[l.Listen] = i
			if l.Listen == c.Admin.Listen {
				v.errorf(p+".listen", "address %s is also the admin address; give them different ports", l.Listen)
			}
		}
	}
}

func (v *validator) pools() map[string]bool {
	c := v.c
	// A config may have no pool at all: routes that answer with fixed
	// bodies, files or redirects need none, and a route that needs one is
	// told so by name (routes[i].pool).
	names := map[string]int{}
	for i, pl := range c.Pools {
		p := fmt.Sprintf("pools[%d]", i)
		v.uniqueName(p, pl.Name, "pool", names, i)
		switch pl.Balance {
		case BalanceRoundRobin, BalanceLeastConn, BalanceRandomTwo, BalanceHash:
		default:
			v.errorf(p+".balance", "unknown policy %q; expected round_robin, least_conn, random_two or hash", pl.Balance)
		}
		if pl.HashKey != "" {
			if _, _, err := ParseHashKey(pl.HashKey); err != nil {
				v.errorf(p+".hash_key", "%v", err)
			}
		}
		if len(pl.Hosts) == 0 && !pl.Discovered {
			v.errorf(p+".hosts", "no hosts; expected at least one, like { addr: 127.0.0.1:9001 }")
		}
		if pl.MaxIdleConnsPerHost < 0 {
			v.errorf(p+".max_idle_conns_per_host", "must not be negative")
		}
		if pl.MaxConnsPerHost < 0 {
			v.errorf(p+".max_conns_per_host", "must not be negative; 0 means no limit")
		}
		seen := map[string]int{}
		for j, h := range pl.Hosts {
			hp := fmt.Sprintf("%s.hosts[%d]", p, j)
			if h.SRV != "" {
				v.srvHost(hp, h, seen, j)
				continue
			}
			if h.Addr == "" {
				v.errorf(hp+".addr", "missing; expected host:port, like 127.0.0.1:9001 or app.internal:8080, unix:/run/app.sock, or srv: a DNS SRV name")
			} else if v.checkHostAddr(hp+".addr", h.Addr) {
				if k, dup := seen[h.Addr]; dup {
					v.errorf(hp+".addr", "%s is already listed as hosts[%d] of this pool", h.Addr, k)
				}
				seen[h.Addr] = j
			}
			if h.Weight < 1 || h.Weight > MaxWeight {
				v.errorf(hp+".weight", "weight %d out of range; expected 1 to %d", h.Weight, MaxWeight)
			}
		}
	}
	known := make(map[string]bool, len(names))
	for n := range names {
		known[n] = true
	}
	return known
}

func (v *validator) routes(pools map[string]bool) {
	c := v.c
	if len(c.Routes) == 0 && c.Kubernetes == nil {
		v.errorf("routes", "no routes; expected at least one, like { name: all, default: true, pool: web }")
	}
	listeners := map[string]bool{}
	for _, l := range c.Listeners {
		listeners[l.Name] = true
	}
	names := map[string]int{}
	defaultAt := -1
	for i, r := range c.Routes {
		p := fmt.Sprintf("routes[%d]", i)
		v.uniqueName(p, r.Name, "route", names, i)
		if r.Pool == "" && r.Static == nil && r.Redirect == nil && r.Respond == nil && len(r.Backends) == 0 && (r.Rewrite == nil || !r.Rewrite.Rematch) {
			v.errorf(p+".pool", "missing; expected the name of a pool")
		} else if r.Pool != "" && !pools[r.Pool] {
			v.errorf(p+".pool", "no pool named %q; %sdefine it under pools", r.Pool, didYouMean(r.Pool, v.poolNames()))
		}
		if !strings.HasPrefix(r.Path, "/") && !(r.Match != nil && r.Match.Path != nil) {
			v.errorf(p+".path", "path %q must start with /", r.Path)
		}
		for j, ln := range r.Listeners {
			if !listeners[ln] {
				v.errorf(fmt.Sprintf("%s.listeners[%d]", p, j), "no listener named %q; %sname one from listeners", ln, didYouMean(ln, v.listenerNames()))
			}
		}
		for j, h := range r.Hosts {
			if err := checkHostPattern(h); err != nil {
				v.errorf(fmt.Sprintf("%s.hosts[%d]", p, j), "%v", err)
			}
		}
		if r.Default {
			if defaultAt >= 0 {
				v.errorf(p+".default", "routes[%d] is already the default route; only one may be", defaultAt)
			}
			defaultAt = i
		}
		// Routes that can never be chosen (the same match as one above
		// them) are found by the compile step, which builds the tables.
		if r.Timeouts.Total > 0 && r.Timeouts.Total < r.Timeouts.Connect {
			v.errorf(p+".timeouts.total", "total %s is shorter than connect %s; no attempt could finish", r.Timeouts.Total, r.Timeouts.Connect)
		}
	}
}

func (v *validator) uniqueName(p, name, what string, seen map[string]int, i int) {
	if name == "" {
		v.errorf(p+".name", "missing; every %s needs a name", what)
		return
	}
	if strings.ContainsAny(name, " \t\"'{}") {
		v.errorf(p+".name", "name %q holds spaces, quotes or braces; use letters, digits, - and _", name)
	}
	if j, dup := seen[name]; dup {
		v.errorf(p+".name", "name %q is already used by the %s at index %d", name, what, j)
	}
	seen[name] = i
}

// checkHostAddr checks a pool host: host:port, or unix:/absolute/path for
// a unix socket.
func (v *validator) checkHostAddr(p, addr string) bool {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, "\x00 ") {
			v.errorf(p, "invalid unix socket %q; expected an absolute path like unix:/run/app.sock", addr)
			return false
		}
		return true
	}
	return v.checkAddr(p, addr)
}

func (v *validator) checkAddr(p, addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.errorf(p, "invalid address %q; expected host:port, like 127.0.0.1:8080", addr)
		return false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		v.errorf(p, "invalid port %q in %q; expected 0 to 65535", port, addr)
		return false
	}
	if strings.ContainsAny(host, " /\\") {
		v.errorf(p, "invalid host %q in %q", host, addr)
		return false
	}
	return true
}

func checkHostPattern(h string) error {
	name := strings.TrimPrefix(h, "*.")
	if name == "" || strings.ContainsAny(name, "*/: \t") {
		return fmt.Errorf("invalid host %q; expected a name like api.example.com or *.example.com (no port, no path)", h)
	}
	return nil
}

// ParsePrefix reads a CIDR ("10.0.0.0/8") or a single address ("10.1.2.3").
func ParsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("invalid CIDR %q; expected like 10.0.0.0/8 or 2001:db8::/32", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("invalid address %q; expected an IP or a CIDR like 10.0.0.0/8", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// ParseHashKey splits a hash key into its kind ("client_ip", "header",
// "cookie") and name.
func ParseHashKey(s string) (kind, name string, err error) {
	if s == "client_ip" {
		return s, "", nil
	}
	kind, name, ok := strings.Cut(s, ":")
	if ok && name != "" && (kind == "header" || kind == "cookie") {
		return kind, name, nil
	}
	return "", "", fmt.Errorf("invalid hash key %q; expected client_ip, header:NAME or cookie:NAME", s)
}
