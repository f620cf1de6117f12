package h1client

// Cutting the waits on a host known dead, and forgetting an address that
// left its pool. The connections in use are linked per host under the
// lock that get and put already take, so that the request path pays
// nothing more for them.

// Cut ends, with ErrCut, every request waiting for a response head from
// the host at addr, and reports how many it ended. Responses whose body is
// already streaming are left alone. Requests sent through the fallback
// transport (https, Upgrade, Expect: 100-continue) are not cut.
func (c *Client) Cut(addr string) int {
	if v, ok := c.hosts.Load(addr); ok {
		return v.(*hostPool).cutWaiting()
	}
	return 0
}

// Forget stops reusing connections to addr (an address its DNS name no
// longer has): idle ones close now, those in use when their exchange
// ends. A later request to addr starts afresh. The fallback transport
// keeps no address of its own apart: its idle connections all close.
func (c *Client) Forget(addr string) {
	if f, ok := c.o.Fallback.(interface{ CloseIdleConnections() }); ok {
		f.CloseIdleConnections()
	}
	v, ok := c.hosts.LoadAndDelete(addr)
	if !ok {
		return
	}
	hp := v.(*hostPool)
	hp.mu.Lock()
	hp.retired = true
	hp.mu.Unlock()
	hp.closeIdle(false)
}

// use links pc into the connections in use; hp.mu is held.
func (hp *hostPool) use(pc *conn) {
	pc.inUse, pc.prev, pc.next = true, nil, hp.busy
	if hp.busy != nil {
		hp.busy.prev = pc
	}
	hp.busy = pc
}

// unuse unlinks pc from the connections in use; hp.mu is held.
func (hp *hostPool) unuse(pc *conn) {
	if !pc.inUse {
		return
	}
	if pc.prev != nil {
		pc.prev.next = pc.next
	} else {
		hp.busy = pc.next
	}
	if pc.next != nil {
		pc.next.prev = pc.prev
	}
	pc.inUse, pc.prev, pc.next = false, nil, nil
}

// cutWaiting ends the exchanges waiting for a response head on the host's
// connections, and reports how many it ended.
func (hp *hostPool) cutWaiting() int {
	n := 0
	hp.mu.Lock()
	for pc := hp.busy; pc != nil; pc = pc.next {
		if pc.awaiting.Load() {
			pc.cut.Store(true)
			pc.abort()
			n++
		}
	}
	hp.mu.Unlock()
	return n
}
