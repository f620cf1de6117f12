package proxy

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/edge"
	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/route"
)

// fixture is one route on one pool behind a Handler, with no sockets: the
// upstream is whatever the test gives.
type fixture struct {
	h    *Handler
	rt   *Route
	pool *health.Pool
	mon  *health.Monitor
	evs  *events
}

// events records what the health model announces.
type events struct{ list []event.Event }

func (e *events) Emit(ev event.Event) { e.list = append(e.list, ev) }

func (e *events) count(typ string) int {
	n := 0
	for _, ev := range e.list {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// defaultPassive is the pool's passive health as the config defaults it.
func defaultPassive() health.Passive {
	return health.Passive{
		Window: config.DefaultWindow, MinRequests: config.DefaultMinRequests,
		MinClients: config.DefaultMinClients, FailureRate: float64(config.DefaultFailureRate),
		ConsecutiveConnectFailures: config.DefaultConsecutive, MaxEjected: float64(config.DefaultMaxEjected),
		EjectTime: config.DefaultEjectTime, MaxEjectTime: config.DefaultMaxEjectTime,
		TrialInterval: config.DefaultTrialInterval,
		GrayFailure:   health.GrayFailure{Disagreements: config.DefaultDisagreements, Within: config.DefaultDisagreeWithin},
	}
}

// newFixture builds a route named "site" over a pool "web" of hosts
// 10.0.0.1:80 ... 10.0.0.N:80 (n hosts), answering through up. tune may
// change the pool's config and the route before they are built.
func newFixture(tb testing.TB, n int, up Upstream, tune ...func(*health.PoolConfig, *Route)) *fixture {
	tb.Helper()
	evs := &events{}
	mon := health.NewMonitor(health.Options{Bus: evs})
	pc := health.PoolConfig{Name: "web", Balance: "round_robin", FailStatuses: []int{502, 503, 504}, Passive: defaultPassive()}
	for i := range n {
		pc.Hosts = append(pc.Hosts, health.HostSpec{Addr: fmt.Sprintf("10.0.0.%d:80", i+1), Weight: 1})
	}
	rt := &Route{
		Name: "site", Upstream: up, MaxBodyBytes: 10 << 20,
		Tries: 2, RetryBudget: 0.2, MinRetries: 3, BufferBody: 64 << 10,
		RouteBit: 1, Monitor: mon, Stats: new(Stats), Tracker: health.NewRouteTracker(mon, "site"),
		Sorry: Sorry{Status: 503, RetryAfter: "30", ContentType: "text/plain; charset=utf-8", Body: []byte("sorry\n")},
	}
	for _, t := range tune {
		t(&pc, rt)
	}
	attr := &health.Attributing{Window: config.DefaultWindow, ClientMinFailures: config.DefaultMinFailures, RouteMinFailures: config.DefaultMinFailures}
	p, err := health.NewPool(mon, attr, pc, nil)
	if err != nil {
		tb.Fatal(err)
	}
	rt.Pool = p
	rt.Prepare()
	snap := &Snapshot{
		Listeners: map[string]*Listener{"web": {Table: route.New([]*route.Entry[*Route]{{Path: "/", Default: true, Value: rt}})}},
		Trusted:   []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		Edge:      edge.New(false, nil, nil, nil),
	}
	return &fixture{
		h:  &Handler{Listener: "web", Current: func() *Snapshot { return snap }, Port: "8080"}, // the server always sets Port
		rt: rt, pool: p, mon: mon, evs: evs,
	}
}

// settle runs the health model's periodic work once, now.
func (f *fixture) settle() {
	f.mon.Tick(&health.Set{Pools: []*health.Pool{f.pool}, Routes: []*health.RouteTracker{f.rt.Tracker},
		Attributing: &health.Attributing{Window: config.DefaultWindow}}, time.Now())
}
