package translate

import (
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// pool is a sturdy pool made from an upstream block or a proxy_pass address.
type pool struct {
	name     string
	balance  string
	hashKey  string
	hosts    []host
	maxIdle  int
	maxConns int
	idle     time.Duration
	passive  passive
	active   *config.ActiveCheck
	comments []string
	// fallback is the pool made of the upstream's backup servers, nil when none.
	fallback *pool
	// tls is set for https:// upstreams.
	tls *config.UpstreamTLS
	// refusal marks the pool of refusal routes (see access.go).
	refusal bool
}

// poolEntry caches poolFor's answer per target.
type poolEntry struct {
	pool  *pool
	notes notes
}

type host struct {
	addr    string
	weight  int
	comment string
}

// passive is what nginx's max_fails/fail_timeout become.
type passive struct {
	off       bool          // max_fails=0 everywhere: nginx never ejected
	ejectTime time.Duration // fail_timeout when written, else 0 (sturdy's default)
	comment   string
}

// poolFor returns the pool for a proxy_pass target, building it on first
// use. It returns nil and the reasons when the target cannot be a pool,
// else the pool and the differences it brings.
func (t *translator) poolFor(tg *nginx.ProxyTarget, pass *nginx.Directive) (*pool, notes) {
	key := tg.Scheme + "://" + tg.Host
	if tg.Upstream != nil {
		key = tg.Scheme + "://upstream " + tg.Upstream.Name
	}
	if e, ok := t.poolIdx[key]; ok {
		return e.pool, e.notes
	}
	var p *pool
	var ns notes
	if tg.Upstream != nil {
		p, ns = t.upstreamPool(tg.Upstream)
	} else {
		addr := tg.HostPort()
		if tg.Unix {
			addr = backendAddr(tg.Host)
		}
		if backendAddr(addr) == "" {
			ns.add("", "proxy_pass %s (%s): %q is not an address sturdy can connect to", pass.Arg(0), pass.Pos(), addr)
		} else {
			p = &pool{name: addr, hosts: []host{{addr: addr, weight: 1}}, comments: []string{fmt.Sprintf("proxy_pass %s (%s) names one address, not an upstream block", pass.Arg(0), pass.Pos())}}
		}
	}
	if p != nil && tg.Scheme == "https" {
		t.upstreamTLS(p, pass)
	}
	if p != nil {
		taken := map[string]bool{}
		for _, q := range t.pools {
			taken[q.name] = true
		}
		p.name = name(taken, p.name)
		t.pools = append(t.pools, p)
		if p.fallback != nil {
			p.fallback.name = name(taken, p.fallback.name)
			t.pools = append(t.pools, p.fallback)
		}
	}
	t.poolIdx[key] = poolEntry{p, ns}
	return p, ns
}

// upstreamTLS makes sturdy speak HTTPS to the pool, verifying backend
// certificates only where nginx did (proxy_ssl_verify on).
func (t *translator) upstreamTLS(p *pool, pass *nginx.Directive) {
	p.tls = &config.UpstreamTLS{InsecureSkipVerify: true}
	p.comments = append(p.comments, fmt.Sprintf("proxy_pass https:// (%s): nginx did not verify the backends' certificates (proxy_ssl_verify is off by default), so neither does this pool; set tls.ca and remove insecure_skip_verify to verify them", pass.Pos()))
}

func (t *translator) upstreamPool(u *nginx.Upstream) (*pool, notes) {
	p := &pool{name: u.Name}
	var ns notes
	var backups []*nginx.UpstreamServer
	p.comments = append(p.comments, fmt.Sprintf("upstream %s (%s)", u.Name, u.Dir.Pos()))
	t.use(u.Dir)
	for _, c := range u.Dir.Children {
		if strings.HasSuffix(c.Name, "_by_lua_block") || strings.HasSuffix(c.Name, "_by_lua") || strings.HasSuffix(c.Name, "_by_lua_file") {
			t.use(c)
			for _, s := range u.Servers {
				t.use(s.Dir)
			}
			ns.add(NeedLua, "upstream %s (%s) chooses its servers in Lua at request time (%s, %s); its server lines are placeholders", u.Name, u.Dir.Pos(), c.Name, c.Pos())
			return nil, ns
		}
	}
	for _, s := range u.Servers {
		t.use(s.Dir)
		switch {
		case s.Down:
			p.comments = append(p.comments, fmt.Sprintf("%s is marked down in nginx (%s) and was left out", s.Addr, s.Dir.Pos()))
			continue
		case s.Backup:
			backups = append(backups, s)
			continue
		}
		addr := backendAddr(s.Addr)
		if addr == "" {
			t.skip(s.Dir, fmt.Sprintf("invalid server address %q", s.Addr))
			continue
		}
		h := host{addr: addr, weight: min(max(s.Weight, 1), config.MaxWeight)}
		if s.Weight > config.MaxWeight {
			h.comment = fmt.Sprintf("nginx weight %d capped at %d", s.Weight, config.MaxWeight)
		}
		if s.Resolve {
			h.comment = "nginx re-resolved this name (resolve); sturdy resolves it too and keeps the last good answer when DNS fails"
		}
		for _, o := range s.Other {
			k, _, _ := strings.Cut(o, "=")
			t.items = append(t.items, Item{File: s.Dir.File, Line: s.Dir.Line, Directive: s.Dir.String(), Reason: fmt.Sprintf("server parameter %s has no sturdy equivalent", k)})
		}
		if s.MaxConns > p.maxConns {
			p.maxConns = s.MaxConns
		}
		if dup := hasHost(p.hosts, h.addr); dup {
			p.comments = append(p.comments, fmt.Sprintf("%s is listed twice in nginx (%s); weights were added", h.addr, s.Dir.Pos()))
			for i := range p.hosts {
				if p.hosts[i].addr == h.addr {
					p.hosts[i].weight = min(p.hosts[i].weight+h.weight, config.MaxWeight)
				}
			}
			continue
		}
		p.hosts = append(p.hosts, h)
	}
	if len(p.hosts) == 0 {
		ns.add("", "upstream %s (%s) has no server sturdy can use (all backup, down or invalid)", u.Name, u.Dir.Pos())
		return nil, ns
	}
	if len(backups) > 0 {
		fb := &pool{name: u.Name + "-backup", comments: []string{fmt.Sprintf("the backup servers of upstream %s (%s): the routes of %s fall back to them while it has no host to try", u.Name, u.Dir.Pos(), u.Name)}}
		for _, s := range backups {
			addr := backendAddr(s.Addr)
			if addr == "" || hasHost(fb.hosts, addr) {
				t.skip(s.Dir, fmt.Sprintf("invalid or repeated backup server address %q", s.Addr))
				continue
			}
			fb.hosts = append(fb.hosts, host{addr: addr, weight: min(max(s.Weight, 1), config.MaxWeight)})
		}
		fb.passive.comment = "defaults: a fallback pool has the same attributed passive health as any pool"
		if len(fb.hosts) > 0 {
			p.fallback = fb
		}
	}
	t.balance(p, u)
	t.keepalive(p, u)
	t.passiveHealth(p, u)
	t.activeHealth(p, u)
	for _, c := range u.Dir.Children {
		switch c.Name {
		case "zone", "server", "keepalive", "keepalive_timeout", "keepalive_requests", "keepalive_time", "resolver", "resolver_timeout":
			t.use(c)
		}
	}
	return p, ns
}

// backendAddr is the pool host for an nginx server address: host:port, or
// unix:/path (nginx also reads unix:///path); "" when sturdy cannot use it.
func backendAddr(a string) string {
	if p, ok := strings.CutPrefix(a, "unix:"); ok {
		if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\x00 ") || !printable(p) {
			return ""
		}
		return "unix:" + path.Clean(p)
	}
	if !validBackend(a) {
		return ""
	}
	return a
}

func hasHost(hs []host, addr string) bool {
	for _, h := range hs {
		if h.addr == addr {
			return true
		}
	}
	return false
}

func (t *translator) passiveHealth(p *pool, u *nginx.Upstream) {
	var maxFails []int
	var failTimeout time.Duration
	explicit := false
	for _, s := range u.Servers {
		if s.Backup || s.Down {
			continue
		}
		maxFails = append(maxFails, s.MaxFails)
		explicit = explicit || s.MaxFailsSet || s.FailTimeoutSet
		if s.FailTimeoutSet {
			failTimeout = max(failTimeout, s.FailTimeout)
		}
	}
	allZero := len(maxFails) > 0
	for _, n := range maxFails {
		allZero = allZero && n == 0
	}
	s := u.Servers[0]
	switch {
	case allZero:
		p.passive.off = true
		p.passive.comment = "nginx: max_fails=0, so nginx never ejected these servers on errors. Passive evidence stays\noff here too; turning it on is safe, because sturdy attributes failures before counting them."
	default:
		p.passive.comment = fmt.Sprintf("nginx: max_fails=%d fail_timeout=%s", s.MaxFails, fmtDur(s.FailTimeout))
		if !explicit {
			p.passive.comment += " (nginx's defaults)"
		}
		if failTimeout > 0 && failTimeout != config.DefaultEjectTime {
			p.passive.ejectTime = failTimeout
			p.passive.comment += "; eject_time is nginx's fail_timeout"
		}
	}
}

// activeHealth translates nginx_upstream_check_module's `check` (Tengine,
// many ingress builds) into an active readiness probe.
func (t *translator) activeHealth(p *pool, u *nginx.Upstream) {
	c := u.Check
	if c == nil {
		return
	}
	t.use(c)
	params := map[string]string{}
	for _, a := range c.Args {
		k, v, _ := strings.Cut(a, "=")
		params[k] = v
	}
	if typ := params["type"]; typ != "http" {
		t.items = append(t.items, Item{File: c.File, Line: c.Line, Directive: c.String(), Reason: fmt.Sprintf("type=%s checks only that the port answers; sturdy's active checks are HTTP readiness probes (\"the port is open\" is not readiness), so none was configured", typ)})
		return
	}
	a := &config.ActiveCheck{Path: "/"}
	if send := last(u.Dir.All("check_http_send")); send != nil {
		t.use(send)
		line, _, _ := strings.Cut(send.Arg(0), "\r\n")
		if f := strings.Fields(line); len(f) >= 2 {
			if f[0] == "HEAD" {
				a.Method = "HEAD"
			}
			a.Path = f[1]
		}
		for _, h := range strings.Split(send.Arg(0), "\r\n") {
			if v, ok := cutHeader(h, "Host"); ok {
				a.Host = v
			}
		}
	}
	if exp := last(u.Dir.All("check_http_expect_alive")); exp != nil {
		t.use(exp)
		lo, hi := 0, 0
		for _, s := range exp.Args {
			if len(s) == 8 && strings.HasPrefix(s, "http_") && strings.HasSuffix(s, "xx") {
				d := int(s[5]-'0') * 100
				if lo == 0 || d < lo {
					lo = d
				}
				hi = max(hi, d+99)
			}
		}
		if lo > 0 && (lo != 200 || hi != 399) {
			a.ExpectStatus = fmt.Sprintf("%d-%d", lo, hi)
		}
	}
	ms := func(k string) time.Duration {
		n, err := strconv.Atoi(params[k])
		if err != nil || n <= 0 {
			return 0
		}
		return time.Duration(n) * time.Millisecond
	}
	a.Interval, a.Timeout = config.Duration(ms("interval")), config.Duration(ms("timeout"))
	interval := a.Interval
	if interval == 0 {
		interval = config.Duration(config.DefaultCheckInterval)
	}
	if a.Timeout >= interval {
		a.Timeout = interval / 2
	}
	a.Rise, _ = strconv.Atoi(params["rise"])
	a.Fall, _ = strconv.Atoi(params["fall"])
	a.Rise, a.Fall = max(a.Rise, 0), max(a.Fall, 0)
	if !strings.HasPrefix(a.Path, "/") || strings.ContainsAny(a.Path, " \t") {
		a.Path = "/"
	}
	if a.ExpectStatus != "" {
		if _, _, err := config.ParseStatusRange(a.ExpectStatus); err != nil {
			a.ExpectStatus = ""
		}
	}
	p.active = a
}

func cutHeader(line, name string) (string, bool) {
	k, v, ok := strings.Cut(line, ":")
	if !ok || !strings.EqualFold(strings.TrimSpace(k), name) {
		return "", false
	}
	v = strings.TrimSpace(v)
	if h, _, err := net.SplitHostPort(v); err == nil {
		v = h
	}
	return v, true
}

// fmtDur prints durations the way nginx configs write them.
func fmtDur(d time.Duration) string { return nginx.FormatTime(d) }
