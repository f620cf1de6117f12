package cache

// flight is one origin fetch that concurrent requests for the same key wait
// for instead of asking the origin themselves (request collapsing, RFC 9111
// 4). The leader publishes res and closes done once; followers read res
// only after done is closed.
type flight struct {
	done    chan struct{}
	res     flightResult
	waiters int // followers that joined; guarded by Cache.mu
}

type flightResult struct {
	// ent is the response the leader stored or revalidated, nil if there is
	// none to share (uncacheable, too large, failed): followers then fetch
	// for themselves.
	ent *entry
	// staleOK: the origin failed and the leader answered stale-if-error;
	// followers may do the same without asking the failing origin again.
	staleOK bool
	// status and originStatus describe the leader's answer (StatusMiss
	// with 200, StatusRevalidated with 304, ...) for the followers' Result
	// and Cache-Status.
	status       string
	originStatus int
}

// join returns the running flight for key, or registers a new one and
// returns it with leader set. The leader must call finish.
func (c *Cache) join(key string) (f *flight, leader bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.flights[key]; ok {
		f.waiters++
		return f, false
	}
	f = &flight{done: make(chan struct{})}
	c.flights[key] = f
	return f, true
}

// finish publishes res and releases f's followers. Only the first call
// publishes (leaders release followers early when they learn the response
// is not shareable, and again on return); a nil flight is a no-op.
func (c *Cache) finish(key string, f *flight, res flightResult) {
	if f == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.flights[key] == f {
		delete(c.flights, key)
	}
	select {
	case <-f.done:
	default:
		f.res = res
		close(f.done)
	}
}
