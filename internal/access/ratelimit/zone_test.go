package ratelimit

import (
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
)

func zones(t *testing.T, prev *Zones, zc ...config.RateLimitZone) *Zones {
	t.Helper()
	for i := range zc {
		if zc[i].Key == "" {
			zc[i].Key = "client_ip"
		}
		if zc[i].Size == 0 {
			zc[i].Size = 1024
		}
	}
	zs, err := CompileZones(zc, nil, prev)
	if err != nil {
		t.Fatal(err)
	}
	return zs
}

func perSecond(n int64) config.Rate { return config.Rate{N: n, Per: time.Second} }

func request(t testing.TB, header ...string) *http.Request {
	r, err := http.NewRequest("GET", "http://example.com/", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	return r
}

// Two limits on a route (nginx: two limit_req lines): when the second
// refuses, the first is not charged, so a refused request costs nothing.
func TestARefusalByALaterLimitRefundsTheEarlierOnes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		zs := zones(t, nil,
			config.RateLimitZone{Name: "ip", Rate: perSecond(10)},
			config.RateLimitZone{Name: "user", Key: "header:X-User", Rate: perSecond(1)})
		l, err := zs.Route("routes[0]", "api", []config.RateLimit{{Zone: "ip", Burst: 1, NoDelay: true}, {Zone: "user", Status: 503}})
		if err != nil {
			t.Fatal(err)
		}
		c := Client{Addr: "192.0.2.1"}
		if res := l.Decide(request(t, "X-User", "u1"), c, time.Now()); res.Verdict != Allow {
			t.Fatalf("first: %+v", res)
		}
		res := l.Decide(request(t, "X-User", "u1"), c, time.Now())
		if res.Verdict != Reject || res.Status != 503 || res.Zone != "user" || res.Wait != time.Second {
			t.Fatalf("second: %+v, want rejected by user with 503 and a 1s wait", res)
		}
		// ip still has its burst slot: the refusal did not spend it.
		if res := l.Decide(request(t, "X-User", "u2"), c, time.Now()); res.Verdict != Allow {
			t.Fatalf("third (another user): %+v", res)
		}
		// Without the header the user zone does not apply (nginx: empty key).
		if res := l.Decide(request(t), Client{Addr: "192.0.2.2"}, time.Now()); res.Verdict != Allow {
			t.Fatalf("no header: %+v", res)
		}
		st, _ := zs.Stats()
		want := []Stat{
			{Route: "api", Zone: "ip", KeyKind: "client_ip", Allowed: 4},
			{Route: "api", Zone: "user", KeyKind: "header", Allowed: 2, Rejected: 1, NoKey: 1},
		}
		if fmt.Sprint(st) != fmt.Sprint(want) {
			t.Fatalf("stats\n got %+v\nwant %+v", st, want)
		}
	})
}

// The longest delay of a route's limits is the one the request waits.
func TestTheLongestDelayWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		zs := zones(t, nil,
			config.RateLimitZone{Name: "fast", Rate: perSecond(10)},
			config.RateLimitZone{Name: "slow", Key: "route", Rate: perSecond(2)})
		l, _ := zs.Route("routes[0]", "api", []config.RateLimit{{Zone: "fast", Burst: 5}, {Zone: "slow", Burst: 5}})
		c := Client{Addr: "192.0.2.1"}
		l.Decide(request(t), c, time.Now())
		res := l.Decide(request(t), c, time.Now())
		if res.Verdict != Delay || res.Wait != 500*ms || res.Zone != "slow" {
			t.Fatalf("got %+v, want a 500ms delay from slow", res)
		}
	})
}

// A client attribution holds responsible gets the zone's stricter limit;
// others keep theirs.
func TestAttributedClientsGetTheStricterLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		zs := zones(t, nil, config.RateLimitZone{Name: "ip", Rate: perSecond(100), Attributed: &config.AttributedLimit{Rate: perSecond(1)}})
		l, _ := zs.Route("routes[0]", "api", []config.RateLimit{{Zone: "ip", Burst: 10, NoDelay: true}})
		bad := Client{Addr: "192.0.2.66", Attributed: true}
		good := Client{Addr: "192.0.2.7"}
		var badOK, goodOK int
		for range 5 {
			if l.Decide(request(t), bad, time.Now()).Verdict == Allow {
				badOK++
			}
			if l.Decide(request(t), good, time.Now()).Verdict == Allow {
				goodOK++
			}
		}
		if badOK != 1 || goodOK != 5 {
			t.Fatalf("attributed client passed %d of 5, innocent %d of 5; want 1 and 5", badOK, goodOK)
		}
		time.Sleep(time.Second)
		if res := l.Decide(request(t), bad, time.Now()); res.Verdict != Allow {
			t.Fatalf("attributed client after its interval: %+v", res)
		}
		st, _ := zs.Stats()
		if st[0].Strict != 6 || st[0].Rejected != 4 {
			t.Fatalf("stats %+v, want 6 strict decisions and 4 rejections", st[0])
		}
	})
}

// A reload with the same zone keeps its buckets and counters: a limited
// client does not get a fresh burst from SIGHUP. A changed rate starts anew.
func TestReloadKeepsBucketsOfUnchangedZones(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		zc := config.RateLimitZone{Name: "ip", Rate: perSecond(1)}
		old := zones(t, nil, zc)
		l, _ := old.Route("routes[0]", "api", []config.RateLimit{{Zone: "ip"}})
		c := Client{Addr: "192.0.2.1"}
		l.Decide(request(t), c, time.Now())
		next := zones(t, old, zc)
		l2, _ := next.Route("routes[0]", "api", []config.RateLimit{{Zone: "ip"}})
		if res := l2.Decide(request(t), c, time.Now()); res.Verdict != Reject {
			t.Fatalf("after reload: %+v, want still rejected", res)
		}
		if st, _ := next.Stats(); st[0].Allowed != 1 || st[0].Rejected != 1 {
			t.Fatalf("counters did not carry over: %+v", st)
		}
		zc.Rate = perSecond(2)
		changed := zones(t, next, zc)
		l3, _ := changed.Route("routes[0]", "api", []config.RateLimit{{Zone: "ip"}})
		if res := l3.Decide(request(t), c, time.Now()); res.Verdict != Allow {
			t.Fatalf("after a rate change: %+v, want a fresh bucket", res)
		}
	})
}

func TestRouteWithoutLimitsCompilesToNil(t *testing.T) {
	zs := zones(t, nil)
	if l, err := zs.Route("routes[0]", "api", nil); l != nil || err != nil {
		t.Fatalf("got %v, %v", l, err)
	}
	if _, err := zs.Route("routes[2]", "api", []config.RateLimit{{Zone: "nope"}}); err == nil || err.Error() != `routes[2].rate_limit[0].zone: no rate limit zone named "nope"` {
		t.Fatalf("error %v", err)
	}
}
