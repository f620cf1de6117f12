package health

import (
	"time"

	"github.com/sturdyproxy/sturdy/internal/pool"
)

func (m *Monitor) loop(tick time.Duration) {
	defer m.wg.Done()
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case now := <-t.C:
			m.Tick(now)
		}
	}
}

// Tick runs the periodic work once. The monitor's own goroutine calls it;
// tests call it to step time.
func (m *Monitor) Tick(now time.Time) {
	m.mu.Lock()
	pools := make([]*Pool, 0, len(m.pools))
	for _, p := range m.pools {
		pools = append(pools, p)
	}
	routes := make([]*RouteTracker, 0, len(m.routes))
	for _, r := range m.routes {
		routes = append(routes, r)
	}
	m.mu.Unlock()
	for _, p := range pools {
		p.tick(now)
	}
	for _, r := range routes {
		r.sweep(now)
	}
	m.clients.sweep(m, now)
}

// expedite asks the pool's checker to probe h now.
func (m *Monitor) expedite(poolName string, h *pool.Host) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.checks {
		if c.p.Pool.Name == poolName {
			c.kick(h)
		}
	}
}
