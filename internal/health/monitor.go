// Package health is sturdy's health model. It owns every host's state: it
// decides whose fault each failed upstream attempt was (a host's, a
// client's, a request's or a route's, judged by what the hosts do now),
// turns host-attributed evidence into suspect and ejected hosts, runs
// active readiness checks and notices when they disagree with the traffic,
// keeps each pool's rotation for the balancing policy (healthy hosts
// first), knows when a whole pool is failing (and hands out its trial
// requests), and announces every transition once.
//
// The request path asks a Pool which host to try (Next, Panic) and tells it
// what happened (Record, Settle); those use atomics and, only on failures,
// small sharded locks. Everything periodic (outlier detection, eject
// expiry, releasing clients and routes, probes) runs under Monitor.Run.
package health

import (
	"context"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
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

// Attributing is the attribution settings of one config, parsed.
type Attributing struct {
	// Window is how far back failures are looked at.
	Window time.Duration
	// ClientMinFailures and RouteMinFailures are how many failures, on at
	// least two hosts, make a client or a route the cause of its own.
	ClientMinFailures, RouteMinFailures int
	// ShedClients refuses requests from attributed clients (for events;
	// the proxy does the refusing).
	ShedClients bool
}

// Set is what the monitor watches: the pools and routes of the config that
// serves now.
type Set struct {
	Pools       []*Pool
	Routes      []*RouteTracker
	Attributing *Attributing
}

// Dialer makes a dial function from a net.Dialer (for example one that
// goes through the background DNS resolver).
type Dialer func(*net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error)

// Options configure a Monitor. The zero value works.
type Options struct {
	// Bus receives every transition; nil discards them.
	Bus event.Emitter
	// Dial is how probes connect; nil means a plain net.Dialer.
	Dial Dialer
	// Current returns the set to watch (the serving config's); nil, or a
	// nil result, means nothing to watch yet.
	Current func() *Set
	// Panicked is told about a panic recovered in one of the monitor's
	// goroutines (after which that goroutine starts over); nil ignores it.
	Panicked func(component string, v any, stack []byte)
	// Tick is how often the periodic work runs; 0 derives it from the
	// attribution window (a tenth, between 100ms and 1s).
	Tick time.Duration
}

// Monitor owns the health state shared by all pools: the client tracker,
// the attribution counters, the active checkers, and the periodic work.
// Constructing one starts nothing; Run does the work until its context ends.
type Monitor struct {
	o       Options
	clients *clientTracker
	// requests follows the requests that failed lately, one host at a
	// time (see requestTracker).
	requests *requestTracker
	// attributed counts failed attempts by attribution since start.
	attributed [numAttributions]atomic.Uint64
	wake       chan struct{}
	ticks      atomic.Uint64 // periodic work done, for Ticks

	mu     sync.Mutex // guards checks
	checks map[string]*checker
}

// NewMonitor returns a monitor; nothing runs until Run.
func NewMonitor(o Options) *Monitor {
	return &Monitor{o: o, clients: newClientTracker(), requests: newRequestTracker(), wake: make(chan struct{}, 1), checks: map[string]*checker{}}
}

// AttributedCount returns the count of failed attempts attributed to a.
func (m *Monitor) AttributedCount(a Attribution) uint64 { return m.attributed[a].Load() }

// Wake makes Run look at the current set now rather than at its next tick
// (after a reload).
func (m *Monitor) Wake() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *Monitor) emit(e event.Event) {
	if m.o.Bus != nil {
		m.o.Bus.Emit(e)
	}
}

func (m *Monitor) current() *Set {
	if m.o.Current == nil {
		return nil
	}
	return m.o.Current()
}

// Run does the monitor's periodic work and runs the active checks of the
// current set's pools, restarting them when the set changes, until ctx
// ends.
func (m *Monitor) Run(ctx context.Context) error {
	var (
		cur    *Set
		checks []*checker
		tick   = time.NewTicker(time.Second)
	)
	defer tick.Stop()
	defer func() { stopCheckers(checks) }()
	for {
		if s := m.current(); s != nil && s != cur {
			stopCheckers(checks)
			checks = m.startCheckers(ctx, s)
			for _, p := range s.Pools {
				p.adopt()
			}
			cur = s
			tick.Reset(m.tickEvery(s))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-m.wake:
		case now := <-tick.C:
			if cur != nil {
				m.Tick(cur, now)
			}
		}
	}
}

func (m *Monitor) tickEvery(s *Set) time.Duration {
	if m.o.Tick > 0 {
		return m.o.Tick
	}
	return min(max(s.Attributing.Window/10, 100*time.Millisecond), time.Second)
}

// Ticks is how many times the periodic work has run: a test of a running
// server waits for the next one (where ejections and recoveries are
// decided) instead of sleeping.
func (m *Monitor) Ticks() uint64 { return m.ticks.Load() }

// Tick runs the periodic work on s once. Run calls it; tests call it to
// step time.
func (m *Monitor) Tick(s *Set, now time.Time) {
	defer m.ticks.Add(1)
	for _, p := range s.Pools {
		p.tick(now)
	}
	for _, r := range s.Routes {
		r.sweep(now, s.Attributing.Window)
	}
	m.clients.sweep(m, now, s.Attributing.Window)
	m.requests.sweep(now, s.Attributing.Window)
}

func (m *Monitor) startCheckers(ctx context.Context, s *Set) []*checker {
	var out []*checker
	byPool := map[string]*checker{}
	for _, p := range s.Pools {
		if p.cfg.Probe == nil {
			continue
		}
		c := newChecker(m, p)
		c.start(ctx)
		out = append(out, c)
		byPool[p.Name] = c
	}
	m.mu.Lock()
	m.checks = byPool
	m.mu.Unlock()
	return out
}

func stopCheckers(cs []*checker) {
	for _, c := range cs {
		c.stop()
	}
}

// expedite asks the pool's checker to probe the host at addr now.
func (m *Monitor) expedite(pool, addr string) {
	m.mu.Lock()
	c := m.checks[pool]
	m.mu.Unlock()
	if c != nil {
		c.kick(addr)
	}
}

// guard runs f, recovering a panic and reporting it; it reports whether f
// returned normally.
func (m *Monitor) guard(component string, f func()) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			if m.o.Panicked != nil {
				m.o.Panicked(component, v, debug.Stack())
			}
			ok = false
		}
	}()
	f()
	return true
}
