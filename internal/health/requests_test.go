package health

import (
	"fmt"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// get is a GET of path by client on rt: a request attribution can tell
// from others by what it is.
func get(rt testRoute, client, path string) *Request {
	r := req(rt, client)
	r.Method, r.Path = "GET", path
	return r
}

// served has n innocents' requests (other paths) succeed on h.
func served(p *Pool, rt testRoute, h *Host, n int, now time.Time) {
	for c := range n {
		p.Record(h, outcome.OK, get(rt, fmt.Sprintf("192.0.2.%d", 10+c), fmt.Sprintf("/page/%d", c)), now)
	}
}

// A pool of two with one host out for its own fault: the request that
// kills whatever serves it reaches the one host left, and no second host
// can agree that it is the request's. Its failing the same way each time
// it came, while that host served everyone else in between, is the
// evidence: from its third failure in a row it is the request's, charged
// to no host, on a kept-alive connection (the keep-alive race's look) or
// a new one alike. Before, it was charged to the host (or, on a reused
// connection, to nobody) and never named (simulator seeds 442, 772, 981).
func TestAKillingRequestOnTheOneHostLeftIsTheRequests(t *testing.T) {
	for _, stale := range []bool{false, true} {
		t.Run(fmt.Sprintf("stale=%v", stale), func(t *testing.T) {
			m, p, _ := setup(t, 2, "{}", nil)
			rt := route(m, "site", 0)
			p.SetMode(p.Hosts[1].Addr, Maintenance, t0)
			left := p.Hosts[0]
			now := t0
			var got []Attribution
			for i := range 5 {
				now = now.Add(time.Second)
				served(p, rt, left, 4, now)
				kill := get(rt, fmt.Sprintf("192.0.2.%d", 20+i%3), "/item/kill")
				got = append(got, p.Settle(kill, []Failure{{Host: left, Class: outcome.EOFBeforeResponse, Stale: stale}}, false, now))
			}
			for i, a := range got[requestMinFailures-1:] {
				if a != AttrRequest {
					t.Fatalf("failure %d of the killing request attributed to %q, want the request (all: %v)", i+requestMinFailures, a, got)
				}
			}
			if n := m.AttributedCount(AttrRequest); n != uint64(len(got)-requestMinFailures+1) {
				t.Fatalf("%d failures attributed to the request, want %d", n, len(got)-requestMinFailures+1)
			}
			if left.Mode() != Healthy {
				t.Fatalf("the host left is %s", left.Mode())
			}
		})
	}
	notTheRequests(t)
}

// But a host that fails for others too is not cleared by the same
// request failing on it again and again: a gray host's 502s to its most
// popular path are its own. Nor is a request that is served now and then
// one that kills whatever serves it, nor one whose body, not remembered,
// may be what differs.
func notTheRequests(t *testing.T) {
	t.Run("the host fails for others", func(t *testing.T) {
		m, p, _ := setup(t, 2, "{}", nil)
		rt := route(m, "site", 0)
		gray := p.Hosts[0]
		now := t0
		for i := range 8 {
			now = now.Add(time.Second)
			served(p, rt, gray, 2, now)
			for c := range 2 { // others fail there as often as they are served
				p.Settle(get(rt, fmt.Sprintf("192.0.2.%d", 30+c), fmt.Sprintf("/page/%d", i)), []Failure{{Host: gray, Class: outcome.Status5xx, Status: 502}}, false, now)
			}
			if a := p.Settle(get(rt, "192.0.2.20", "/report"), []Failure{{Host: gray, Class: outcome.Status5xx, Status: 502}}, false, now); a != AttrHost {
				t.Fatalf("failure %d of /report on a host failing for others attributed to %q, want the host", i+1, a)
			}
		}
		if n := m.AttributedCount(AttrRequest); n != 0 {
			t.Fatalf("%d failures attributed to the request", n)
		}
	})
	t.Run("the request is served in between", func(t *testing.T) {
		m, p, _ := setup(t, 2, "{}", nil)
		rt := route(m, "site", 0)
		h := p.Hosts[0]
		now := t0
		for i := range 8 {
			now = now.Add(time.Second)
			served(p, rt, h, 4, now)
			if i%2 == 1 {
				p.Record(h, outcome.OK, get(rt, "192.0.2.21", "/report"), now)
				continue
			}
			if a := p.Settle(get(rt, "192.0.2.20", "/report"), []Failure{{Host: h, Class: outcome.Reset}}, false, now); a != AttrHost {
				t.Fatalf("a reset of /report, served between its failures, attributed to %q, want the host", a)
			}
		}
	})
	t.Run("a request with a body", func(t *testing.T) {
		m, p, _ := setup(t, 2, "{}", nil)
		rt := route(m, "site", 0)
		h := p.Hosts[0]
		now := t0
		for range 5 {
			now = now.Add(time.Second)
			served(p, rt, h, 4, now)
			post := req(rt, "192.0.2.20") // no Path: its body is part of it
			post.Method = "POST"
			if a := p.Settle(post, []Failure{{Host: h, Class: outcome.Reset}}, false, now); a != AttrHost {
				t.Fatalf("a POST's reset attributed to %q, want the host", a)
			}
		}
	})
}

// The visitors who each sent the killing request to the one host left
// are not a route's failing clients: the request's failures, known by
// its own history, do not count for the route while the route's other
// requests do not fail that way. Once the request was named, they made
// its route degraded instead (seeds 194, 442 of the simulator).
func TestVisitorsSendingAKillingRequestToTheOneHostLeftDoNotDegradeTheirRoute(t *testing.T) {
	m, p, rec := setup(t, 2, "{}", nil)
	site, other := route(m, "site", 0), route(m, "other", 1)
	p.SetMode(p.Hosts[1].Addr, Maintenance, t0)
	left := p.Hosts[0]
	now := t0
	for i := range 30 {
		now = now.Add(300 * time.Millisecond)
		served(p, site, left, 2, now)
		served(p, other, left, 2, now)
		kill := get(site, fmt.Sprintf("192.0.2.%d", 40+i%6), "/item/kill")
		p.Settle(kill, []Failure{{Host: left, Class: outcome.EOFBeforeResponse, Stale: true}}, false, now)
	}
	if m.AttributedCount(AttrRequest) == 0 {
		t.Fatal("the killing request was never named")
	}
	if site.tr.Degraded() || rec.count(event.RouteDegraded) != 0 {
		t.Fatal("visitors who sent the killing request to the one host left made their route degraded")
	}
}

// Forgotten after a window without failing: the sweep drops the request,
// and its sketch bit, so that successes pay one atomic load again.
func TestAFailedRequestIsForgottenAfterAQuietWindow(t *testing.T) {
	m, p, _ := setup(t, 2, "{}", nil)
	rt := route(m, "site", 0)
	p.Settle(get(rt, "192.0.2.20", "/item/kill"), []Failure{{Host: p.Hosts[0], Class: outcome.Reset}}, false, t0)
	if m.requests.failing.Load() == 0 {
		t.Fatal("the failed request has no sketch bit")
	}
	m.Tick(set(p, rt), t0.Add(testAttributing.Window/2))
	if m.requests.failing.Load() == 0 {
		t.Fatal("the request was forgotten within the window")
	}
	m.Tick(set(p, rt), t0.Add(testAttributing.Window+time.Second))
	if m.requests.failing.Load() != 0 {
		t.Fatal("the request is remembered after a window without failing")
	}
}

// A visitor who sent the killing request twice in a row, not served in
// between, then served, is not a faulty client when it sends it again:
// its failures, the request's own, were not yet forgotten (it had not been
// served since they began), and the next one made five on two hosts while
// others succeeded there. It was attributed, and a failing host's
// failures from it were then its own (simulator seeds 288, 637).
func TestAServedVisitorIsNotJudgedOnAKillingRequestsFailures(t *testing.T) {
	m, p, rec := setup(t, 3, "{}", nil)
	rt := route(m, "site", 0)
	visitor := "192.0.2.50"
	now := t0
	kill := func() {
		now = now.Add(100 * time.Millisecond)
		served(p, rt, p.Hosts[0], 3, now)
		served(p, rt, p.Hosts[1], 3, now)
		got := p.Settle(get(rt, visitor, "/item/kill"), []Failure{{Host: p.Hosts[0], Class: outcome.EOFBeforeResponse}, {Host: p.Hosts[1], Class: outcome.EOFBeforeResponse}}, true, now)
		if got != AttrRequest {
			t.Fatalf("the killing request's failure was attributed to %v, want the request", got)
		}
	}
	kill()
	kill()
	for range 3 {
		now = now.Add(100 * time.Millisecond)
		p.Record(p.Hosts[2], outcome.OK, get(rt, visitor, "/page/1"), now)
		kill()
	}
	if m.Attributed(visitor) || rec.count(event.ClientAttributed) != 0 {
		t.Fatal("the visitor who sent a killing request is attributed as a faulty client")
	}
}

// A host held after shedding load (503 with Retry-After) is sent only
// what its peers cannot take, so nothing may have succeeded there since
// its last failure: it is full, not failing everything, and the killing
// request failing on it and on a peer is still the request's. Before, the
// killing request's failures there were charged to it, and it was ejected
// as gray (simulator seed 788).
func TestAKillingRequestOnAHostHeldAfterSheddingIsTheRequests(t *testing.T) {
	m, p, _ := setup(t, 2, "{}", nil)
	rt := route(m, "site", 0)
	full := p.Hosts[0]
	now := t0
	for i := range 4 {
		now = now.Add(time.Second)
		served(p, rt, p.Hosts[1], 4, now)
		p.Overloaded(full, time.Second, 2, now) // it sheds, and is held
		got := p.Settle(get(rt, fmt.Sprintf("192.0.2.%d", 20+i), "/item/kill"), []Failure{{Host: p.Hosts[1], Class: outcome.EOFBeforeResponse}, {Host: full, Class: outcome.EOFBeforeResponse}}, true, now)
		if got != AttrRequest {
			t.Fatalf("killing request %d, failing on a held host and its peer, attributed to %q, want the request", i+1, got)
		}
	}
	if n := m.AttributedCount(AttrHost); n != 0 {
		t.Fatalf("%d failures charged to hosts", n)
	}
}
