package health

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/health/balance"
	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// browse sends one request from each of n clients through the pool, as the
// proxy would: Next picks the host, fails decides whether it fails (reset),
// and a failed GET is retried once on another host.
func browse(p *Pool, rt testRoute, n int, fails func(*Host) bool) (failed int) {
	now := time.Now()
	for c := range n {
		r := req(rt, fmt.Sprintf("192.0.2.%d", c+1))
		var tried balance.Tried
		var fl []Failure
		ok := false
		for range 2 {
			h := p.Next(0, &tried, now)
			if h == nil {
				break
			}
			tried.Add(h.Index())
			if !fails(h) {
				p.Record(h, outcome.OK, r, now)
				ok = true
				break
			}
			fl = append(fl, Failure{Host: h, Class: outcome.Reset})
		}
		if len(fl) > 0 {
			p.Settle(r, fl, len(fl) == 2, now)
		}
		if !ok {
			failed++
		}
	}
	return failed
}

// Three of four hosts reset everything. Each failing host has peers that
// fail as badly, yet they are outliers: one peer is clearly well. Two are
// ejected (max_ejected 50%), the third stays in rotation behind the
// healthy host, and no innocent client is blamed, not even in the first
// second, when the successes from before the outage are all the window
// holds.
func TestMajorityFailureIsTheHostsNotTheClients(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, p, rec := setup(t, 4, "{ window: 10s }", nil)
		rt := route(m, "a", 0)
		set := set(p, rt)
		tick := func() { m.Tick(set, time.Now()) }
		for range 20 { // two seconds of normal traffic
			if f := browse(p, rt, 6, func(*Host) bool { return false }); f != 0 {
				t.Fatalf("%d failures before the outage", f)
			}
			time.Sleep(100 * time.Millisecond)
			tick()
		}
		bad := func(h *Host) bool { return h.Index() < 3 }
		failed, total := 0, 0
		for i := range 60 { // six seconds of outage
			failed += browse(p, rt, 6, bad)
			total += 6
			if i == 9 && m.Clients() != nil {
				t.Fatalf("clients attributed one second into the outage: %v", m.Clients())
			}
			time.Sleep(100 * time.Millisecond)
			tick()
		}
		if n := rec.count(event.ClientAttributed); n != 0 {
			t.Fatalf("%d innocent clients attributed", n)
		}
		modes := map[Mode]int{}
		for _, h := range p.Hosts[:3] {
			modes[h.Mode()]++
		}
		if modes[Ejected] != 2 || modes[Suspect] != 1 || p.Hosts[3].Mode() != Healthy {
			t.Fatalf("modes %v, healthy host %s; want 2 ejected, 1 suspect held by max_ejected", modes, p.Hosts[3].Mode())
		}
		if failed > total/20 {
			t.Fatalf("%d of %d requests failed", failed, total)
		}
		// While the cap keeps the suspect host in rotation, the healthy
		// host takes every first attempt.
		for range 100 {
			var tried balance.Tried
			if h := p.Next(0, &tried, time.Now()); h != p.Hosts[3] {
				t.Fatalf("first attempt on %s (%s), want the healthy host", h.Addr, h.Mode())
			}
		}
		// The held host is not restored by its window going quiet: it
		// returns when an ejection would have ended (10s after it was found
		// out, early in the outage), or on success.
		var held *Host
		for _, h := range p.Hosts[:3] {
			if h.Mode() == Suspect {
				held = h
			}
		}
		time.Sleep(2 * time.Second) // the window is quiet: nothing tried it
		tick()
		if held.Mode() != Suspect {
			t.Fatalf("the held host is %s 8s into its 10s", held.Mode())
		}
		p.Record(held, outcome.OK, req(rt, "192.0.2.1"), time.Now())
		tick()
		if held.Mode() != Healthy {
			t.Fatalf("the held host is %s after it succeeded again", held.Mode())
		}
	})
}

// (Status 5xx here: timeouts of a single route are that route's until
// another route's time out too; see TestOneRoutesTimeoutsInARowAreNotTheHosts.)
// Failed requests in a row from several clients make a host suspect at
// once, while its peers succeed: no tick, no window to fill.
func TestFailuresInARowFromSeveralClientsMakeSuspectAtOnce(t *testing.T) {
	_, p, rec := setup(t, 3, "{ max_ejected: 100% }", nil)
	rt := route(p.m, "a", 0)
	for _, h := range p.Hosts {
		for c := range 5 {
			p.Record(h, outcome.OK, req(rt, fmt.Sprintf("192.0.2.%d", c)), t0)
		}
	}
	h := p.Hosts[0]
	for c := range 2 {
		p.Settle(req(rt, fmt.Sprintf("192.0.2.%d", c)), []Failure{{Host: h, Class: outcome.Status5xx, Status: 0}}, false, t0)
	}
	if h.Mode() != Healthy {
		t.Fatalf("suspect after 2 failures")
	}
	// One client alone cannot do it, however often.
	for range 10 {
		p.Settle(req(rt, "192.0.2.1"), []Failure{{Host: h, Class: outcome.Status5xx, Status: 0}}, false, t0)
	}
	if h.Mode() != Healthy {
		t.Fatalf("one client's failures in a row made the host %s", h.Mode())
	}
	p.Settle(req(rt, "192.0.2.4"), []Failure{{Host: h, Class: outcome.Status5xx, Status: 0}}, false, t0)
	if h.Mode() != Ejected || rec.count(event.HostSuspect) != 1 {
		t.Fatalf("host %s after failures in a row from 3 clients", h.Mode())
	}
	// A success ends a streak.
	h2 := p.Hosts[1]
	for c := range 2 {
		p.Settle(req(rt, fmt.Sprintf("192.0.2.%d", c)), []Failure{{Host: h2, Class: outcome.Status5xx, Status: 0}}, false, t0)
	}
	p.Record(h2, outcome.OK, req(rt, "192.0.2.9"), t0)
	p.Settle(req(rt, "192.0.2.4"), []Failure{{Host: h2, Class: outcome.Status5xx, Status: 0}}, false, t0)
	if h2.Mode() != Healthy {
		t.Fatalf("host %s: the streak survived a success", h2.Mode())
	}
}

// The same failure on two hosts is the request's while those hosts serve
// other requests (incident 003), and the hosts' own when they fail
// everything.
func TestTheSameFailureTwiceIsTheRequestsOnlyWhileTheHostsServeOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, p, _ := setup(t, 2, "{ min_requests: 1000 }", nil)
		rt := route(m, "a", 0)
		h0, h1 := p.Hosts[0], p.Hosts[1]
		twice := func(client string) Attribution {
			return p.Settle(req(rt, client), []Failure{{Host: h0, Class: outcome.EOFBeforeResponse, Status: 0}, {Host: h1, Class: outcome.EOFBeforeResponse, Status: 0}}, true, time.Now())
		}
		// Poisoned requests among normal traffic: the request's.
		for i := range 30 {
			for c := range 3 {
				p.Record(p.Hosts[(i+c)%2], outcome.OK, req(rt, fmt.Sprintf("192.0.2.%d", c)), time.Now())
			}
			if a := twice(fmt.Sprintf("198.51.100.%d", i)); a != AttrRequest {
				t.Fatalf("poisoned request %d among successes: %s", i, a)
			}
			time.Sleep(50 * time.Millisecond)
		}
		// Both hosts now fail everything for everyone.
		time.Sleep(10 * time.Second)
		hosts := 0
		for i := range 30 {
			if twice(fmt.Sprintf("198.51.100.%d", i)) == AttrHost {
				hosts++
			}
			time.Sleep(50 * time.Millisecond)
		}
		if hosts < 28 {
			t.Fatalf("%d of 30 failures on hosts that fail everything were charged to them", hosts)
		}
	})
}

var testProbe = &Probe{Method: "GET", Path: "/healthz", ExpectLo: 200, ExpectHi: 399, Interval: time.Hour, FastInterval: time.Second, Timeout: time.Second, Rise: 2, Fall: 3}

// A host whose probe passes while its traffic fails: after three such
// disagreements within two minutes it is announced and taken out, with
// both sides of the evidence; with gray_failure off it loops suspect,
// restored, as before.
func TestProbeAndTrafficDisagreeing(t *testing.T) {
	for _, on := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			passive := "{ eject_time: 30s, max_eject_time: 1m }"
			if !on {
				passive = "{ gray_failure: { enabled: false } }"
			}
			m, p, rec := setup(t, 3, passive, testProbe)
			rt := route(m, "a", 0)
			h := p.Hosts[0]
			for round := range 5 {
				for c := range 3 {
					p.Record(p.Hosts[1], outcome.OK, req(rt, "192.0.2.9"), time.Now())
					p.Settle(req(rt, fmt.Sprintf("192.0.2.%d", c)), []Failure{{Host: h, Class: outcome.Status5xx, Status: 503}}, false, time.Now())
				}
				if h.Mode() == Suspect {
					p.checkResult(h, true, "status 200", time.Now())
				}
				if on && round == 2 {
					break
				}
				time.Sleep(10 * time.Second)
			}
			if !on {
				if h.Mode() != Healthy || rec.count(event.ProbeDisagrees) != 0 || rec.count(event.HostRestored) != 5 {
					t.Fatalf("off: host %s, %d probe_disagrees, %d restored", h.Mode(), rec.count(event.ProbeDisagrees), rec.count(event.HostRestored))
				}
				return
			}
			if h.Mode() != Ejected || rec.count(event.ProbeDisagrees) != 1 || rec.count(event.HostRestored) != 2 {
				t.Fatalf("host %s, %d probe_disagrees, %d restored", h.Mode(), rec.count(event.ProbeDisagrees), rec.count(event.HostRestored))
			}
			for _, e := range rec.evs {
				if e.Type == event.ProbeDisagrees && (e.Evidence["traffic"] == "" || e.Evidence["probe"] != "GET /healthz: status 200") {
					t.Fatalf("evidence %v", e.Evidence)
				}
			}
			// Out for eject_time, then back on trial (slow start).
			time.Sleep(31 * time.Second)
			p.tick(time.Now())
			if h.Mode() != Healthy {
				t.Fatalf("host %s after its eject time", h.Mode())
			}
			// It goes on failing: the next time out is twice as long,
			// bounded by max_eject_time.
			for range 3 {
				for c := range 3 {
					p.Record(p.Hosts[1], outcome.OK, req(rt, "192.0.2.9"), time.Now())
					p.Settle(req(rt, fmt.Sprintf("192.0.2.%d", c)), []Failure{{Host: h, Class: outcome.Status5xx, Status: 503}}, false, time.Now())
				}
				if h.Mode() == Suspect {
					p.checkResult(h, true, "status 200", time.Now())
				}
				if h.Mode() == Ejected {
					break
				}
				time.Sleep(10 * time.Second)
			}
			if d := time.Duration(h.ejectUntil.Load() - time.Now().UnixNano()); h.Mode() != Ejected || d != time.Minute {
				t.Fatalf("host %s for %s the second time, want ejected for 1m; %d probe_disagrees", h.Mode(), d, rec.count(event.ProbeDisagrees))
			}
		})
	}
}

// A pool is known to be failing only when no host in rotation has
// succeeded for a fifth of the window and every one of them failed, for
// min_clients clients; then each host gets one trial per trial_interval,
// and the first success ends it.
func TestAPoolIsKnownToBeFailingOnlyWhenEveryHostFailsForSeveralClients(t *testing.T) {
	for _, tc := range []struct {
		name    string
		clients int
		healthy bool // one host keeps succeeding
		// narrow: after the first second only host 0 gets requests, as
		// when the others are suspect and one host is left in the
		// healthy tier.
		narrow bool
		want   bool
	}{
		{"every host fails for 5 clients", 5, false, false, true},
		{"one client fails everywhere", 1, false, false, false},
		{"one host still succeeds", 5, true, false, false},
		{"the hosts that failed first get no more traffic", 5, false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m, p, rec := setup(t, 3, "{ window: 10s, trial_interval: 3s }", nil)
				rt := route(m, "a", 0)
				for i := range 40 {
					for c := range tc.clients {
						h := p.Hosts[(i+c)%3]
						if tc.narrow && i >= 10 {
							h = p.Hosts[0]
						}
						r := req(rt, fmt.Sprintf("192.0.2.%d", 10+c))
						if tc.healthy && h.Index() == 0 {
							p.Record(h, outcome.OK, r, time.Now())
						} else {
							p.Settle(r, []Failure{{Host: h, Class: outcome.ResponseTimeout, Status: 0}}, false, time.Now())
						}
					}
					time.Sleep(100 * time.Millisecond)
					m.Tick(set(p, rt), time.Now())
				}
				if p.Failing() != tc.want || rec.count(event.PoolFailing) != b2i(tc.want) {
					t.Fatalf("failing=%v, want %v", p.Failing(), tc.want)
				}
				if !tc.want {
					return
				}
				var tried balance.Tried
				trials := 0
				for range 10 {
					if h := p.Next(0, &tried, time.Now()); h != nil {
						trials++
						tried.Add(h.Index())
					}
				}
				if trials != 3 {
					t.Fatalf("%d trials, want one per host", trials)
				}
				time.Sleep(time.Second)
				if h := p.Next(0, &balance.Tried{}, time.Now()); h != nil {
					t.Fatalf("a second trial on %s within trial_interval", h.Addr)
				}
				time.Sleep(2 * time.Second)
				h := p.Next(0, &balance.Tried{}, time.Now())
				if h == nil {
					t.Fatal("no trial after trial_interval")
				}
				p.Record(h, outcome.OK, req(rt, "192.0.2.10"), time.Now())
				if p.Failing() || rec.count(event.PoolRecovered) != 1 {
					t.Fatal("a successful trial did not end the episode")
				}
			})
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A variant of the majority failure: the one host left takes the share of
// the three that fail everything and, overloaded, fails a third of its
// requests too. The failing hosts are outliers all the same (the survivor
// is below the failure rate), while a pool whose every host fails at the
// rate ejects nobody (TestSharedProblemEjectsNobody).
func TestMajorityFailureWithAnOverloadedSurvivor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, p, rec := setup(t, 4, "{ window: 10s }", nil)
		rt := route(m, "a", 0)
		set := set(p, rt)
		n := 0
		survivorFails := func() bool { n++; return n%3 == 0 }
		for range 30 {
			browse(p, rt, 6, func(h *Host) bool { return h.Index() < 3 || survivorFails() })
			time.Sleep(100 * time.Millisecond)
			m.Tick(set, time.Now())
		}
		modes := map[Mode]int{}
		for _, h := range p.Hosts[:3] {
			modes[h.Mode()]++
		}
		if modes[Ejected] != 2 || modes[Suspect] != 1 {
			t.Fatalf("failing hosts %v, want 2 ejected and 1 held by max_ejected", modes)
		}
		if p.Hosts[3].Mode() != Healthy {
			t.Fatalf("the survivor is %s", p.Hosts[3].Mode())
		}
		if k := rec.count(event.ClientAttributed); k != 0 {
			t.Fatalf("%d innocent clients attributed", k)
		}
	})
}

// The same at one tick: three hosts fail every request, the fourth a
// third of them; each failing host's peers fail as badly (median 100%),
// and the one that does not is above half the failure rate. The failing
// hosts are outliers because a peer is below the rate, whatever the others
// do.
// Slow traffic to a blackholed pool (few requests, each waiting its
// timeout, on a loaded machine): fewer than min_requests failures fall in
// any fifth of the window, but every failure since the last success
// counts, so the pool is known to be failing once enough of them came.
func TestAPoolFailingSlowlyIsKnownOnceEnoughFailuresCame(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, p, rec := setup(t, 3, "{ window: 10s }", nil)
		rt := route(m, "a", 0)
		for i := range 32 { // 4 failures a second, for 8 s
			r := req(rt, fmt.Sprintf("192.0.2.%d", 10+i%4))
			p.Settle(r, []Failure{{Host: p.Hosts[i%3], Class: outcome.ResponseTimeout, Status: 0}}, false, time.Now())
			time.Sleep(250 * time.Millisecond)
			m.Tick(set(p, rt), time.Now())
		}
		if !p.Failing() || rec.count(event.PoolFailing) != 1 {
			t.Fatalf("failing=%v after 32 failures in 8 s with no success; want the pool known to be failing", p.Failing())
		}
	})
}

func TestFailingAtTheRateIsAnOutlierWhileAPeerIsBelowIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, hp, rec := setup(t, 4, "{ min_requests: 5 }", nil)
		rt := route(hp.m, "a", 0)
		traffic := func() {
			// The survivor first, ending on a failure: no peer is
			// succeeding now, so the failures in a row of the others do
			// not make them suspect on the request path; the tick's
			// comparison must.
			now := time.Now()
			for i := 3; i >= 0; i-- {
				h := hp.Hosts[i]
				for j := range 21 {
					r := req(rt, fmt.Sprintf("192.0.2.%d", j%7))
					if i < 3 || j%3 == 2 {
						hp.Settle(r, []Failure{{Host: h, Class: outcome.Status5xx, Status: 503}}, false, now)
					} else {
						hp.Record(h, outcome.OK, r, now)
					}
				}
			}
		}
		traffic()
		hp.tick(time.Now())
		time.Sleep(time.Second)
		traffic()
		hp.tick(time.Now())
		modes := map[Mode]int{}
		for _, h := range hp.Hosts[:3] {
			modes[h.Mode()]++
		}
		if modes[Ejected] != 2 || modes[Suspect] != 1 || hp.Hosts[3].Mode() != Healthy {
			t.Fatalf("failing hosts %v, survivor %s; want 2 ejected, 1 held, the survivor healthy (%d suspect events)",
				modes, hp.Hosts[3].Mode(), rec.count(event.HostSuspect))
		}
	})
}

// Concurrent failures of one route are counted as sent (Settle) before
// each is noted on the route's slot, so a run can begin with a snapshot
// that already holds a failure the route notes next. Nobody else failed:
// the others' count is zero, not a wrapped-around huge number that made
// the host look failing for everyone and kept a slow route from being
// degraded (incident 002, on a loaded machine).
func TestARunsOwnConcurrentFailureIsNotSomeoneElses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, p, _ := setup(t, 2, "{}", nil)
		h := p.Hosts[0]
		span := int64(time.Second)
		h.sent.Add(2) // two failures of the route, both counted as sent
		s := hostSlot{h: h}
		ns := time.Now().UnixNano()
		s.note(ns, span, false, false) // the first starts the run, its snapshot has both
		s.note(ns+1, span, false, false)
		h.attempts[okClass].Add(5) // others succeed meanwhile
		if known, ok := s.othersSucceed(ns+2, span); !known || !ok {
			t.Fatalf("known=%v others-succeed=%v with only successes from others", known, ok)
		}
	})
}

// Timeouts in a row from several clients of one route are that route's
// slow requests (incident 002), even before the host's window has seen
// its other routes: the streak rule leaves them to the window's rules.
func TestOneRoutesTimeoutsInARowAreNotTheHosts(t *testing.T) {
	_, p, rec := setup(t, 3, "{ max_ejected: 100% }", nil)
	rt := route(p.m, "report", 0)
	for _, h := range p.Hosts {
		p.Record(h, outcome.OK, req(rt, "192.0.2.9"), t0)
	}
	h := p.Hosts[0]
	for c := range 6 {
		r := req(rt, fmt.Sprintf("192.0.2.%d", c))
		rt.tr.AttemptFailed(outcome.ResponseTimeout, r.ClientBit) // as the request path notes it
		p.Settle(r, []Failure{{Host: h, Class: outcome.ResponseTimeout, Status: 0}}, false, t0)
	}
	if h.Mode() != Healthy || rec.count(event.HostSuspect) != 0 {
		t.Fatalf("one route's timeouts made the host %s", h.Mode())
	}
}

// Unless the route is served meanwhile: a GET that timed out on the host
// and was answered by a peer shows the route serving, and timeouts in a
// row there from several clients are the host's (it hangs). They were
// excused as one route's slow requests, and a hanging host was left to
// its probes (the simulator: 0.70 of hanging hosts acted on within 10 s).
func TestTimeoutsInARowOfARouteServedElsewhereAreTheHosts(t *testing.T) {
	_, p, rec := setup(t, 3, "{}", nil)
	rt := route(p.m, "site", 0)
	for _, h := range p.Hosts {
		p.Record(h, outcome.OK, req(rt, "192.0.2.9"), t0)
	}
	h, peer := p.Hosts[0], p.Hosts[1]
	for c := range 3 {
		r := req(rt, fmt.Sprintf("192.0.2.%d", c))
		rt.tr.AttemptFailed(outcome.ResponseTimeout, r.ClientBit) // timed out on h
		p.Record(peer, outcome.OK, r, t0)                         // answered by the peer
		p.Settle(r, []Failure{{Host: h, Class: outcome.ResponseTimeout, Status: 0}}, false, t0)
	}
	if h.Mode() != Ejected || rec.count(event.HostEjected) != 1 { // no active checks: ejected at once
		t.Fatalf("host %s after timeouts in a row from 3 clients whose retries a peer answered; want ejected", h.Mode())
	}
	if peer.Mode() != Healthy {
		t.Fatalf("peer %s", peer.Mode())
	}
}
