// Package health is sturdy's health model: it decides whose fault each
// failed upstream attempt was (a host's, a client's, a request's or a
// route's), turns host-attributed evidence into suspect and ejected hosts,
// runs active readiness checks, and announces every transition once.
//
// The request path calls Pool.Success, Pool.ConnectFailed and
// Monitor.Settle; they use atomics and, only on failures, small sharded
// locks. Everything periodic (outlier detection, eject expiry, releasing
// clients and routes, probes) runs on goroutines owned by the Monitor.
package health

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/outcome"
	"github.com/sturdyproxy/sturdy/internal/pool"
)

// Attribution is whom a failed attempt was attributed to.
type Attribution uint8

// Attributions.
const (
	None Attribution = iota // the attempt succeeded, or the client cancelled
	AttrHost
	AttrClient
	AttrRequest
	AttrRoute
	numAttributions
)

var attributionNames = [...]string{"", "host", "client", "request", "route"}

func (a Attribution) String() string { return attributionNames[a] }

// Monitor owns the health state shared by all pools: the client tracker,
// route trackers, attribution counters, and the goroutines that act on
// evidence. Stop it with Close.
type Monitor struct {
	bus   event.Emitter
	attrP atomic.Pointer[attrConfig]

	clients *clientTracker

	// attributed counts failed attempts by attribution since start.
	attributed [numAttributions]atomic.Uint64

	mu     sync.Mutex // guards pools, routes, checkers, dial
	dial   func(*net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error)
	pools  map[string]*Pool
	routes map[string]*RouteTracker
	checks []*checker

	stop      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// NewMonitor starts a monitor whose periodic work runs every tick (the
// attribution window's tenth when tick is 0).
func NewMonitor(attr config.Attribution, bus event.Emitter, tick time.Duration) *Monitor {
	m := &Monitor{
		bus:     bus,
		clients: newClientTracker(),
		pools:   map[string]*Pool{},
		routes:  map[string]*RouteTracker{},
		stop:    make(chan struct{}),
	}
	m.Configure(attr)
	if tick <= 0 {
		tick = min(max(attr.Window.D()/10, 100*time.Millisecond), time.Second)
	}
	m.wg.Add(1)
	go m.loop(tick)
	return m
}

// SetDialer makes probes dial through wrap (for example the background DNS
// resolver, so that a probe sees the addresses traffic uses). It applies to
// checkers started by later Apply calls.
func (m *Monitor) SetDialer(wrap func(*net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dial = wrap
}

// Close stops every goroutine the monitor started and waits for them.
func (m *Monitor) Close() {
	m.closeOnce.Do(m.close)
}

func (m *Monitor) close() {
	close(m.stop)
	m.mu.Lock()
	checks := m.checks
	m.checks = nil
	m.mu.Unlock()
	for _, c := range checks {
		c.close()
	}
	m.wg.Wait()
}

// attrConfig is the attribution config with the client key parsed.
type attrConfig struct {
	config.Attribution
	clientKind, clientHeader string
}

// Configure applies new attribution settings (on reload).
func (m *Monitor) Configure(attr config.Attribution) {
	kind, name, _ := config.ParseClientKey(attr.ClientKey)
	m.attrP.Store(&attrConfig{Attribution: attr, clientKind: kind, clientHeader: name})
}

func (m *Monitor) attr() *attrConfig { return m.attrP.Load() }

// ClientKey returns which client key kind the monitor uses ("client_ip" or
// "header") and the header name.
func (m *Monitor) ClientKey() (kind, header string) {
	a := m.attr()
	return a.clientKind, a.clientHeader
}

// AttributedCount returns the count of failed attempts attributed to a.
func (m *Monitor) AttributedCount(a Attribution) uint64 { return m.attributed[a].Load() }

func (m *Monitor) emit(e event.Event) {
	if m.bus != nil {
		m.bus.Emit(e)
	}
}

// Pool is one pool's health: its config, its hosts, its retry budget and
// its active checker.
type Pool struct {
	m    *Monitor
	Pool *pool.Pool
	// TLS, when set, is how probes reach hosts of an HTTPS pool.
	TLS    *tls.Config
	cfg    config.Health
	failOn [100]bool // failOn[s-500] for 5xx statuses that count as failures
	Budget *Budget
	shared *poolShared
}

// poolShared is the part of a pool's health that outlives reloads.
type poolShared struct {
	panic        atomic.Bool
	empty        atomic.Bool
	mu           sync.Mutex // guards emptySince, emptyTotal, answers during the episode
	emptySince   time.Time
	emptyTotal   time.Duration
	budget       *Budget
	panicAnswers atomic.Uint64
	episode      [numBy]atomic.Uint64 // answers by other means while empty
	ejectMu      sync.Mutex           // makes "count the ejected, eject one more" one step
}

// Apply installs the pools of a new config. Pools and routes present before
// keep their shared state (retry budget, empty-pool episode, degraded
// routes); active checkers are restarted for the new host sets.
func (m *Monitor) Apply(pools []*Pool) {
	m.mu.Lock()
	old := m.checks
	m.checks = nil
	next := map[string]*Pool{}
	for _, p := range pools {
		// Only now, with the config accepted: a refused reload must not
		// touch the windows of hosts that are serving.
		for _, h := range p.Pool.Hosts {
			h.Window.SetSpan(p.cfg.Passive.Window.D())
		}
		next[p.Pool.Name] = p
		if p.cfg.Active != nil {
			c := newChecker(m, p)
			m.checks = append(m.checks, c)
		}
	}
	m.pools = next
	checks := m.checks
	m.mu.Unlock()
	for _, c := range old {
		c.close()
	}
	for _, c := range checks {
		c.start()
	}
}

// NewPool prepares a pool's health for Apply. It reuses the state a pool of
// the same name had before.
func (m *Monitor) NewPool(p *pool.Pool, cfg config.Health) *Pool {
	m.mu.Lock()
	var shared *poolShared
	if prev := m.pools[p.Name]; prev != nil {
		shared = prev.shared
	}
	m.mu.Unlock()
	if shared == nil {
		shared = &poolShared{budget: newBudget()}
	}
	hp := &Pool{m: m, Pool: p, cfg: cfg, shared: shared, Budget: shared.budget}
	for _, s := range cfg.FailStatuses {
		if s >= 500 && s < 600 {
			hp.failOn[s-500] = true
		}
	}
	return hp
}

// Route returns the tracker for a route name, creating it on first use
// (with bit as its sketch bit). The tracker survives reloads; a kept
// tracker's bit changes only through SetBit, once a config is accepted.
func (m *Monitor) Route(name string, bit uint64) *RouteTracker {
	m.mu.Lock()
	defer m.mu.Unlock()
	rt := m.routes[name]
	if rt == nil {
		rt = &RouteTracker{name: name, m: m}
		rt.bit.Store(bit)
		m.routes[name] = rt
	}
	return rt
}

// FailStatus reports whether a response status counts as a failed attempt.
func (p *Pool) FailStatus(status int) bool {
	return status >= 500 && status < 600 && p.failOn[status-500]
}

// HasActiveChecks reports whether the pool probes its hosts.
func (p *Pool) HasActiveChecks() bool { return p.cfg.Active != nil }

// ActiveCheck describes the pool's probe for people, or "".
func (p *Pool) ActiveCheck() string {
	a := p.cfg.Active
	if a == nil {
		return ""
	}
	return fmt.Sprintf("%s %s every %s (expect %s)", a.Method, a.Path, a.Interval, a.ExpectStatus)
}

// Success records a successful attempt on h.
func (p *Pool) Success(h *pool.Host, client, route uint64, now time.Time) {
	h.Attempts[outcome.OK].Add(1)
	if h.ConnectFailures.Load() != 0 {
		h.ConnectFailures.Store(0)
	}
	if p.cfg.Passive.On() {
		h.Window.Success(now, client, route)
	}
	if h.Mode() == pool.Ejected && p.shared.panic.Load() {
		// A panic-routed request got through: the host is back, whatever
		// its eject timer says.
		p.restore(h, "a request routed in panic mode succeeded", now)
	}
}

// ConnectFailed records an attempt on h that failed before anything was
// sent. That is evidence against the host alone; enough of them in a row
// make it suspect at once.
func (p *Pool) ConnectFailed(h *pool.Host, class outcome.Class, now time.Time) {
	h.Attempts[class].Add(1)
	h.LastFailure.Store(now.UnixNano())
	p.m.attributed[AttrHost].Add(1)
	if !p.cfg.Passive.On() {
		return
	}
	h.Window.Failure(now, 0, 0)
	n := h.ConnectFailures.Add(1)
	if int(n) >= p.cfg.Passive.ConsecutiveConnectFailures && h.Mode() == pool.Healthy {
		p.suspect(h, "connection failures in a row",
			fmt.Sprintf("%d consecutive %s", n, class), now)
	}
}

// PanicPick records that a request is being routed to a host that is out on
// passive evidence because no host is left, and announces panic mode once.
func (p *Pool) PanicPick(now time.Time) {
	p.shared.panicAnswers.Add(1)
	if p.shared.panic.CompareAndSwap(false, true) {
		p.m.emit(event.Event{
			Type: event.PanicEntered, Severity: event.Critical, Pool: p.Pool.Name,
			Message:  "every host of the pool is out on passive evidence; trying them anyway (panic routing)",
			Evidence: map[string]any{"hosts": len(p.Pool.Hosts)},
		})
	}
}

// InPanic reports whether the pool is panic routing.
func (p *Pool) InPanic() bool { return p.shared.panic.Load() }

// Empty reports whether the pool has no host in rotation, and since when.
func (p *Pool) Empty() (bool, time.Time, time.Duration) {
	p.shared.mu.Lock()
	defer p.shared.mu.Unlock()
	total := p.shared.emptyTotal
	if p.shared.empty.Load() {
		total += time.Since(p.shared.emptySince)
	}
	return p.shared.empty.Load(), p.shared.emptySince, total
}

// Ways an empty pool's requests were answered, counted per episode.
const (
	ByFallback = iota
	ByStale
	BySorry
	numBy
)

var byNames = [numBy]string{"fallback", "stale", "sorry"}

// EpisodeAnswer counts a request answered some other way while the pool was
// empty (fallback pool, stale copy, sorry page); the counts go into the
// pool_restored event.
func (p *Pool) EpisodeAnswer(by int) { p.shared.episode[by].Add(1) }
