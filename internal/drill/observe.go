package drill

import (
	"bytes"
	"sync"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/server"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// keepLines is how many log lines a run keeps for -v.
const keepLines = 200

// logSink is the writer behind a proxy's logger: it counts the lines
// written while armed (incident 001's log flood is part of the behaviour
// under test) and keeps the first ones.
type logSink struct {
	mu      sync.Mutex // guards everything below
	armed   bool
	lines   int
	kept    []string
	partial []byte
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.armed {
		return len(p), nil
	}
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.lines++
		if len(l.kept) < keepLines {
			l.kept = append(l.kept, string(l.partial[:i]))
		}
		l.partial = l.partial[i+1:]
	}
	return len(p), nil
}

func (l *logSink) arm(on bool) {
	l.mu.Lock()
	l.armed = on
	l.mu.Unlock()
}

func (l *logSink) count() (int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lines, append([]string(nil), l.kept...)
}

// recorder counts a server's events: ejections, pool-empty episodes,
// attributed clients, degraded routes. It is subscribed to the server's bus
// and runs on the emitter's goroutine, so it only counts.
type recorder struct {
	mu         sync.Mutex // guards everything below
	counts     map[string]int
	emptySince map[string]time.Time // pools empty right now
	emptyTotal time.Duration
	firstEmpty time.Time
}

func newRecorder(s *server.Server) *recorder {
	r := &recorder{counts: map[string]int{}, emptySince: map[string]time.Time{}}
	s.Events().Subscribe(r.add)
	return r
}

func (r *recorder) add(e event.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts[e.Type]++
	switch e.Type {
	case event.PoolEmpty:
		if _, open := r.emptySince[e.Pool]; !open {
			r.emptySince[e.Pool] = e.Time
		}
		if r.firstEmpty.IsZero() {
			r.firstEmpty = e.Time
		}
	case event.PoolRestored:
		if since, open := r.emptySince[e.Pool]; open {
			r.emptyTotal += e.Time.Sub(since)
			delete(r.emptySince, e.Pool)
		}
	}
}

// fill writes what was recorded into o; pools still empty count up to now.
func (r *recorder) fill(o *observation, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o.ejections = r.counts[event.HostEjected] + r.counts[event.HostDown]
	o.clientsAttributed = r.counts[event.ClientAttributed]
	o.routesDegraded = r.counts[event.RouteDegraded]
	o.poolEmpty = r.emptyTotal
	for _, since := range r.emptySince {
		o.poolEmpty += now.Sub(since)
	}
	o.emptyAt = r.firstEmpty
}

// statusOf returns the server's status snapshot, if the server offers one.
// Server.Status is being built while the drill is (issue 5); asking through
// an interface lets the drill use it as soon as it exists, and say so when
// it does not, instead of guessing.
func statusOf(s *server.Server) (view.Status, bool) {
	switch v := any(s).(type) {
	case interface{ Status() view.Status }:
		return v.Status(), true
	case interface{ Status() *view.Status }:
		if st := v.Status(); st != nil {
			return *st, true
		}
	}
	return view.Status{}, false
}

// countersOf reads the origin failure counts of one route and its pool from
// the server's own status; nil when the server exposes none.
func countersOf(s *server.Server, route, pool string) *counters {
	st, ok := statusOf(s)
	if !ok {
		return nil
	}
	c := &counters{}
	for _, p := range st.Pools {
		if p.Name != pool {
			continue
		}
		for _, h := range p.Hosts {
			c.upstream5xx += int(h.Attempts["status_5xx"])
		}
	}
	for _, r := range st.Routes {
		if r.Name == route {
			c.originErrors, c.hidden = int(r.OriginErrors), int(r.HiddenErrors)
		}
	}
	return c
}
