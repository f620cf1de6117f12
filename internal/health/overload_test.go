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

// A host that sheds with only the refused request in flight can take
// nothing now, and its cap (one, at least) was no back-off: it kept its
// whole share and refused half of it (simulator seeds 2 and 22, 7–12 % of
// the innocents' requests answered 503). Until its Retry-After it takes
// only what its peers cannot; then its share again.
func TestASheddingHostIsSentNothingWhilePeersHaveRoom(t *testing.T) {
	_, p, _ := setup(t, 2, "{}", nil)
	h, peer := p.Hosts[0], p.Hosts[1]
	p.Overloaded(h, time.Second, 1, t0)
	pick := func(at time.Time, skipPeer bool) *Host {
		var tried balance.Tried
		if skipPeer {
			tried.Add(peer.Index())
		}
		return p.Next(0, &tried, at)
	}
	for i := range 20 {
		if got := pick(t0.Add(time.Duration(i)*40*time.Millisecond), false); got != peer {
			t.Fatalf("pick %d while the host is held went to %v, want its peer", i, got.Addr)
		}
	}
	// With its peer unable to take it (tried, here), the held host takes
	// the request within its cap.
	if got := pick(t0.Add(100*time.Millisecond), true); got != h {
		t.Fatalf("with no peer left the held host took nothing (%v)", got)
	}
	hits := 0
	for i := range 20 {
		if pick(t0.Add(time.Second+time.Duration(i)*time.Millisecond), false) == h {
			hits++
		}
	}
	if hits < 5 {
		t.Fatalf("after its Retry-After the host took %d of 20 picks, want its share back", hits)
	}
}
