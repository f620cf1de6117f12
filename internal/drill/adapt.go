package drill

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/compile"
	"github.com/sturdyproxy/sturdy/internal/config"
	sturdyproxy "github.com/sturdyproxy/sturdy/internal/proxy"
	"github.com/sturdyproxy/sturdy/internal/route"
	"github.com/sturdyproxy/sturdy/internal/testing/fake"
)

// Limits on how an operator's pools are stood in for.
const (
	maxFakeHosts  = 8 // fakes for the pool under test, one per configured host
	maxStandIns   = 4 // healthy stand-ins for each other pool
	maxExtraPools = 40
	// maxSlowTimeout is the longest route response timeout the slow-route
	// scenario re-enacts: each slow request must outlast it, and a drill
	// run is a few seconds.
	maxSlowTimeout = 10 * time.Second
)

// FromConfig is sturdy in-process with the operator's own config: the
// pool under test (pool, or the first pool when "") gets the scenario's
// fakes, one per configured host; every other pool gets healthy stand-ins,
// so that the drill never sends a request to a real backend. Every other
// setting is kept (timeouts, retries, health, limits, cache, sorry pages),
// except what would reach outside the drill: listeners move to loopback
// addresses as plain HTTP, and the admin listener, webhooks and access log
// are off.
func FromConfig(path, pool string) (Target, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	if pool != "" && poolIndex(cfg, pool) < 0 {
		var names []string
		for _, p := range cfg.Pools {
			names = append(names, p.Name)
		}
		return nil, fmt.Errorf("%s has no pool %q; its pools are %s", path, pool, strings.Join(names, ", "))
	}
	return &fileTarget{path: path, pool: pool}, nil
}

type fileTarget struct {
	path string
	pool string
}

func (t *fileTarget) Name() string { return "sturdy (" + filepath.Base(t.path) + ")" }

func (t *fileTarget) layout(st *stage) (layout, error) {
	cfg, err := config.Load(t.path)
	if err != nil {
		return layout{}, err
	}
	m := t.mapConfig(cfg, st)
	if m.skip != "" {
		return layout{skip: m.skip}, nil
	}
	lay := layout{hosts: map[string]int{}, notes: m.notes}
	for role, name := range m.pools {
		lay.hosts[role] = min(max(len(cfg.Pools[poolIndex(cfg, name)].Hosts), 1), maxFakeHosts)
	}
	return lay, nil
}

func (t *fileTarget) start(ctx context.Context, st *stage) (proxy, error) {
	cfg, err := config.Load(t.path)
	if err != nil {
		return nil, err
	}
	m := t.mapConfig(cfg, st)
	if m.skip != "" {
		return nil, fmt.Errorf("%s", m.skip)
	}
	p := &sturdyProxy{cfg: cfg, eps: map[string]endpoint{}, routes: map[string]int{}}
	for _, need := range st.routes {
		mr, ok := m.roles[need.role]
		name := ""
		if ok {
			p.eps[need.role] = endpoint{Host: mr.host, Path: mr.path}
			p.routes[need.role] = mr.route
			name = mr.listener
		}
		p.listeners = append(p.listeners, name)
	}

	// Keep the drill inside the machine and inside its own addresses.
	cfg.Admin.Listen = "off"
	cfg.Webhooks = nil
	cfg.Log.Access.Enabled = false
	for i := range cfg.Listeners {
		cfg.Listeners[i].Listen = st.net.proxy() + ":0"
		cfg.Listeners[i].TLS = nil
	}
	roleOf := map[string]string{}
	for role, name := range m.pools {
		roleOf[name] = role
	}
	extra := 0
	for i := range cfg.Pools {
		pl := &cfg.Pools[i]
		if role, ok := roleOf[pl.Name]; ok {
			pl.Hosts = standIn(pl.Hosts, st.pools[role])
			continue
		}
		n := min(max(len(pl.Hosts), 1), maxStandIns)
		var addrs []string
		for j := range n {
			b, err := fake.NewBackend(fmt.Sprintf("%s-%d", pl.Name, j+1), st.net.host(octetExtra+extra%maxExtraPools, j))
			if err != nil {
				p.closeOwned()
				return nil, err
			}
			p.owned = append(p.owned, b.Close)
			addrs = append(addrs, b.Addr)
		}
		pl.Hosts = standIn(pl.Hosts, addrs)
		extra++
	}
	if err := p.run(st); err != nil {
		return nil, err
	}
	return p, nil
}

// standIn replaces a pool's hosts with addrs, keeping the configured
// weights in order.
func standIn(hosts []config.Host, addrs []string) []config.Host {
	out := make([]config.Host, len(addrs))
	for i, a := range addrs {
		w := 1
		if i < len(hosts) && hosts[i].Weight > 0 {
			w = hosts[i].Weight
		}
		out[i] = config.Host{Addr: a, Weight: w}
	}
	return out
}

func poolIndex(cfg *config.Config, name string) int {
	for i, p := range cfg.Pools {
		if p.Name == name {
			return i
		}
	}
	return -1
}

// mapping is how a stage's roles land on an operator's config.
type mapping struct {
	pools map[string]string // pool role -> pool name
	roles map[string]mapped // route role -> route
	notes []string
	skip  string
}

type mapped struct {
	route    int
	listener string
	host     string
	path     string
}

// routing matches requests exactly as the server will: its tables come
// from the same compile step.
type routing struct {
	tabs  map[string]*route.Table[*sturdyproxy.Route]
	index map[*sturdyproxy.Route]int // route -> its index in the config
}

func newRouting(cfg *config.Config) (routing, error) {
	rt, err := compile.Compile(cfg, nil, compile.Env{})
	if err != nil {
		return routing{}, err
	}
	defer rt.Close()
	r := routing{tabs: map[string]*route.Table[*sturdyproxy.Route]{}, index: make(map[*sturdyproxy.Route]int, len(rt.Routes))}
	for name, l := range rt.Proxy.Listeners {
		r.tabs[name] = l.Table
	}
	for i, pr := range rt.Routes {
		r.index[pr] = i
	}
	return r, nil
}

// match returns the index of the route that listener ln sends host and
// path to.
func (r routing) match(ln, host, path string) (int, bool) {
	e, ok := r.tabs[ln].Match(host, path)
	if !ok {
		return -1, false
	}
	return r.index[e.Value], true
}

// listenerOf is the first listener a route is served on.
func listenerOf(cfg *config.Config, r config.Route) string {
	if len(r.Listeners) > 0 {
		return r.Listeners[0]
	}
	return cfg.Listeners[0].Name
}

// reach finds a Host and path that the route's listener sends to route i,
// below sub (e.g. "drill-slow/"); ok is false when none does (the route is
// shadowed by another).
func reach(cfg *config.Config, tabs routing, i int, sub string) (mapped, bool) {
	r := cfg.Routes[i]
	ln := listenerOf(cfg, r)
	var hosts []string
	for _, h := range r.Hosts {
		if suffix, ok := strings.CutPrefix(h, "*."); ok {
			h = "drill." + suffix
		}
		hosts = append(hosts, h)
	}
	if len(r.Hosts) == 0 {
		hosts = append(hosts, unmatchedHost)
	}
	path := strings.TrimSuffix(r.Path, "/") + "/" + sub
	for _, h := range hosts {
		if j, ok := tabs.match(ln, h, path+"probe"); ok && j == i {
			return mapped{route: i, listener: ln, host: h, path: path}, true
		}
	}
	return mapped{}, false
}

// mapConfig decides which pool plays each pool role and which route each
// route role, or why the scenario does not apply to this config.
func (t *fileTarget) mapConfig(cfg *config.Config, st *stage) mapping {
	m := mapping{pools: map[string]string{}, roles: map[string]mapped{}}
	tabs, err := newRouting(cfg)
	if err != nil {
		m.skip = "the config does not compile: " + err.Error()
		return m
	}
	main := t.pool
	if main == "" {
		main = cfg.Pools[0].Name
	}
	for _, need := range st.routes {
		if !need.unmatched {
			continue
		}
		// Incident 001 is about whatever answers hosts nobody configured:
		// that route's pool is the one under test, whatever --pool says.
		ln := cfg.Listeners[0].Name
		ri, ok := tabs.match(ln, unmatchedHost, "/")
		if !ok {
			m.skip = "hosts that no route names get 404 at once from this config (no default route, no route for any host), so incident 001 cannot happen here"
			return m
		}
		r := cfg.Routes[ri]
		if t.pool != "" && r.Pool != t.pool {
			m.notes = append(m.notes, fmt.Sprintf("pool %q answers unmatched hosts (route %q), so it is the pool under test here, not %q", r.Pool, r.Name, t.pool))
		}
		main = r.Pool
		m.roles[need.role] = mapped{route: ri, listener: ln, host: unmatchedHost, path: "/"}
	}
	m.pools["main"] = main

	// Requests go to the pool's broadest route (the default, then the
	// shortest path), as most traffic does. The slow route is the one with
	// the shortest response timeout (where a slow endpoint would be given
	// one, the most specific on a tie), the fast one its broadest neighbour.
	var onMain []int
	for i, r := range cfg.Routes {
		if r.Pool == main {
			onMain = append(onMain, i)
		}
	}
	slices.SortStableFunc(onMain, func(a, b int) int {
		ra, rb := cfg.Routes[a], cfg.Routes[b]
		if ra.Default != rb.Default {
			if ra.Default {
				return -1
			}
			return 1
		}
		return cmp.Compare(len(ra.Path), len(rb.Path))
	})
	bySlow := slices.Clone(onMain)
	slices.SortStableFunc(bySlow, func(a, b int) int {
		ra, rb := cfg.Routes[a], cfg.Routes[b]
		if c := cmp.Compare(ra.Timeouts.ResponseHeader, rb.Timeouts.ResponseHeader); c != 0 {
			return c
		}
		return cmp.Compare(len(rb.Path), len(ra.Path))
	})
	slowRoute := -1
	for _, need := range st.routes {
		if need.unmatched {
			continue
		}
		var found mapped
		ok := false
		switch {
		case need.pool == "other":
			for i, r := range cfg.Routes {
				if r.Pool == main || r.Pool == "" {
					continue
				}
				if found, ok = reach(cfg, tabs, i, "drill/"); ok {
					m.pools["other"] = r.Pool
					break
				}
			}
			if !ok {
				m.notes = append(m.notes, fmt.Sprintf("every route uses pool %q: there is no second route to watch for collateral damage", main))
				continue
			}
		case need.slow:
			for _, i := range bySlow {
				if found, ok = reach(cfg, tabs, i, "drill-slow/"); ok {
					slowRoute = i
					break
				}
			}
		case need.fast:
			// A different route when there is one; otherwise another path
			// on the same route.
			for _, i := range onMain {
				if i == slowRoute {
					continue
				}
				if found, ok = reach(cfg, tabs, i, "drill-fast/"); ok {
					break
				}
			}
			if !ok && slowRoute >= 0 {
				found, ok = reach(cfg, tabs, slowRoute, "drill-fast/")
				m.notes = append(m.notes, fmt.Sprintf("route %q is the only route on pool %q: slow and fast requests share it", cfg.Routes[slowRoute].Name, main))
			}
		default:
			for _, i := range onMain {
				if need.cached && !cfg.Routes[i].Cache.Enabled {
					continue
				}
				if found, ok = reach(cfg, tabs, i, "drill/"); ok {
					break
				}
			}
		}
		if !ok {
			switch {
			case need.cached:
				m.skip = fmt.Sprintf("no route on pool %q has the cache enabled, so nothing can serve stale copies (incident 004 needs a cached route)", main)
			default:
				m.skip = fmt.Sprintf("no route reachable by Host and path sends requests to pool %q; pick another with --pool", main)
			}
			return m
		}
		m.roles[need.role] = found
	}
	if slowRoute >= 0 {
		if d := cfg.Routes[slowRoute].Timeouts.ResponseHeader.D(); d > maxSlowTimeout {
			m.skip = fmt.Sprintf("every route on pool %q waits %s for response headers; re-enacting a slow route needs requests slower than that, longer than a drill runs. Incident 002 is a route with a long read timeout: give slow routes their own timeouts.response_header", main, d)
			return m
		}
	}
	if len(cfg.Webhooks) > 0 || cfg.Admin.Listen != "off" || cfg.Log.Access.Enabled {
		m.notes = append(m.notes, "the admin listener, webhooks and access log are off during the drill")
	}
	for _, l := range cfg.Listeners {
		if l.TLS != nil {
			m.notes = append(m.notes, "TLS listeners are drilled as plain HTTP")
			break
		}
	}
	return m
}
