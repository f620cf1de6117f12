package health

import (
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/health/balance"
	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// A host that sheds load is held to what it had in flight, for the
// Retry-After (bounded), and never leaves rotation for it, however often
// it sheds.
func TestASheddingHostIsSentLessNeverEjected(t *testing.T) {
	m, p, rec := setup(t, 2, "{ min_requests: 5 }", nil)
	rt := route(m, "a", 0)
	h, peer := p.Hosts[0], p.Hosts[1]
	now := t0
	for i := range 500 {
		now = now.Add(10 * time.Millisecond)
		p.Overloaded(h, time.Second, 9, now)
		p.Record(peer, outcome.OK, req(rt, "192.0.2.1"), now)
		if i%50 == 0 {
			m.Tick(set(p, rt), now)
		}
	}
	if h.Mode() != Healthy || rec.count(event.HostSuspect) != 0 || m.AttributedCount(AttrHost) != 0 {
		t.Fatalf("host %s, %d suspect events, %d host attributions: shedding is not failing", h.Mode(), rec.count(event.HostSuspect), m.AttributedCount(AttrHost))
	}
	if limit, _ := h.Shedding(now); limit != 8 {
		t.Fatalf("held to %d, want 8 (9 in flight, less the one refused)", limit)
	}
	for range 8 {
		h.Acquire()
	}
	pick := func(at time.Time) *Host {
		var tried balance.Tried
		tried.Add(peer.Index())
		return p.Next(0, &tried, at)
	}
	if got := pick(now); got != nil {
		t.Fatalf("a host at its learned cap took a request")
	}
	// A success while held raises the cap by one: what sturdy counts in
	// flight may be more than the host has.
	p.Record(h, outcome.OK, req(rt, "192.0.2.1"), now)
	if limit, _ := h.Shedding(now); limit != 9 || pick(now) != h {
		t.Fatalf("after a success the host is held to %d, want 9, and takes a ninth request", limit)
	}
	for range 2 {
		h.Acquire()
	}
	if got := pick(now.Add(time.Second)); got != h {
		t.Fatalf("after its Retry-After the host took no request (%v)", got)
	}
	// Shedding again while held lowers the cap; a Retry-After of an hour
	// holds it for maxShedHold at most.
	p.Overloaded(h, time.Hour, 4, now)
	if limit, until := h.Shedding(now); limit != 3 || until.Sub(now) != maxShedHold {
		t.Fatalf("held to %d until %s, want 3 for %s", limit, until.Sub(now), maxShedHold)
	}
}
