package status

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/scenes"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// Issue 36's three situations, as the problems list says them.
func TestProblemsOfTheThreeSituations(t *testing.T) {
	if ps := Problems(scenes.Demo(scenes.Healthy, 3)); len(ps) != 0 {
		t.Errorf("healthy: %+v", ps)
	}

	// One redundant backend down, in both pools, every client served: one
	// warning, its pools and routes beneath it.
	ps := Problems(scenes.Demo(scenes.OneHostDown, 3))
	if len(ps) != 1 {
		t.Fatalf("one host down: %d problems, want 1: %+v", len(ps), ps)
	}
	p := ps[0]
	if p.Level != view.LevelWarning || p.Kind != "host" || p.Title != "Host "+scenes.B2+" is down" {
		t.Errorf("one host down: %s %s %q", p.Level, p.Kind, p.Title)
	}
	want := []string{"pool web: here down; 2 of 3 hosts in rotation", "route cached: clients served as usual", "route site: clients served as usual",
		"pool api: here down; 1 of 2 hosts in rotation", "route api: clients served as usual"}
	if got := affects(p); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("affects:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(p.Why, "GET /healthz") || !strings.Contains(p.Why, "does not answer in time") || strings.Contains(p.Why, "deadline") {
		t.Errorf("why %q", p.Why)
	}
	if !strings.Contains(p.Detail, "context deadline exceeded") {
		t.Errorf("the recorded error is gone from the detail: %q", p.Detail)
	}

	// Every backend down: one critical problem per backend, each with the
	// routes on the sorry page and on stale copies; no "Not ready" of its
	// own, no route problems (the hosts explain them).
	ps = Problems(scenes.Demo(scenes.AllDown, 3))
	var subjects []string
	for _, p := range ps {
		subjects = append(subjects, p.Level+" "+p.Kind+" "+p.Subject)
	}
	if got, want := strings.Join(subjects, ", "), "critical host "+scenes.B1+", critical host "+scenes.B2+", critical host "+scenes.B3; got != want {
		t.Fatalf("all down: %s, want %s", got, want)
	}
	for i, w := range []string{"nothing accepts connections", "does not answer in time", "answers 503 instead of 200-399"} {
		if !strings.Contains(ps[i].Why, w) {
			t.Errorf("%s: why %q lacks %q", ps[i].Subject, ps[i].Why, w)
		}
	}
	a := strings.Join(affects(ps[0]), "\n")
	for _, w := range []string{"pool web: here down; no host left of 3", "route site: answers with the sorry page (503); /readyz answers 503; 50.0% of its answers 5xx",
		"route cached: answers with stale cached copies", "pool api: here down; no host left of 2", "route api: answers with the sorry page (503); /readyz answers 503"} {
		if !strings.Contains(a, w) {
			t.Errorf("%s affects:\n%s\nlacks %q", ps[0].Subject, a, w)
		}
	}
	if a := strings.Join(affects(ps[2]), "\n"); strings.Contains(a, "route api") {
		t.Errorf("%s is not in pool api:\n%s", ps[2].Subject, a)
	}
}

func affects(p view.Problem) []string {
	var out []string
	for _, a := range p.Affects {
		out = append(out, a.Kind+" "+a.Name+": "+a.What)
	}
	return out
}

// goText is error text Go and the outcome classes write: it may be a
// problem's detail, never its title or why.
var goText = []string{"context deadline exceeded", "Client.Timeout", "dial tcp", "EOF", "connect_refused", "response_timeout", "status_5xx", "x509:", "tls:", "i/o timeout"}

// Problems over generated hosts, pools and routes: one problem per
// failing cause (a host once however many pools it is in; a route only
// for trouble no failing host explains), critical exactly where clients
// are failed or get degraded answers, and no Go error text as a reason.
func TestProblemsGroupByCauseAndRankByImpact(t *testing.T) {
	for seed := range uint64(3000) {
		st := generate(rand.New(rand.NewPCG(seed, 36)))
		ps := Problems(st)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Errorf("seed %d: "+format, append([]any{seed}, args...)...)
			for _, p := range st.Pools {
				for _, h := range p.Hosts {
					t.Logf("  pool %s (avail %d empty %v failing %v panic %v) host %s %s verdict %s", p.Name, p.Available, p.Empty, p.Failing, p.Panic, h.Addr, h.State, h.Verdict.Level)
				}
			}
			for _, r := range st.Routes {
				t.Logf("  route %s on %s serving %s verdict %s degraded %v", r.Name, r.Pool, r.Serving, r.Verdict.Level, r.Degraded)
			}
			for _, p := range ps {
				t.Logf("  problem %s %s %s %q %v", p.Level, p.Kind, p.Subject, p.Title, affects(p))
			}
		}

		// The causes, worked out apart from the code under test.
		pools := map[string]view.Pool{}
		hostCause := map[string]bool{}
		poolHasCause := map[string]bool{}
		for _, p := range st.Pools {
			pools[p.Name] = p
			for _, h := range p.Hosts {
				if h.State != view.Healthy || h.Verdict.Level != view.LevelOK || p.Failing {
					hostCause[h.Addr], poolHasCause[p.Name] = true, true
				}
			}
		}
		down := func(p view.Pool) bool { return p.Empty || p.Failing || p.Panic || p.Available == 0 }
		allFail := func(p view.Pool) bool {
			for _, h := range p.Hosts {
				if h.State == view.Healthy && h.Verdict.Level == view.LevelOK && !p.Failing {
					return false
				}
			}
			return true
		}
		routeCause := map[string]bool{}
		impacted := map[string]bool{}
		for _, r := range st.Routes {
			deg := r.Serving != view.ServingNormal
			if deg || r.Verdict.Level == view.LevelCritical {
				impacted[r.Name] = true
			}
			if poolHasCause[r.Pool] && (down(pools[r.Pool]) || allFail(pools[r.Pool])) {
				continue // the hosts' doing
			}
			if deg || r.Degraded || r.Verdict.Level != view.LevelOK {
				routeCause[r.Name] = true
			}
		}
		if len(ps) != len(hostCause)+len(routeCause) {
			fail("%d problems, want %d (hosts %v, routes %v)", len(ps), len(hostCause)+len(routeCause), hostCause, routeCause)
			continue
		}
		seen := map[string]bool{}
		anyCritical := false
		named := map[string]bool{} // impacted routes a critical problem names
		for i, p := range ps {
			key := p.Kind + " " + p.Subject
			if seen[key] {
				fail("%s twice", key)
			}
			seen[key] = true
			if (p.Kind == "host" && !hostCause[p.Subject]) || (p.Kind == "route" && !routeCause[p.Subject]) || (p.Kind != "host" && p.Kind != "route") {
				fail("%s is no cause", key)
			}
			if i > 0 && levelRank[ps[i-1].Level] < levelRank[p.Level] {
				fail("%s (%s) after %s (%s): not worst first", key, p.Level, ps[i-1].Kind+" "+ps[i-1].Subject, ps[i-1].Level)
			}
			for _, s := range goText {
				if strings.Contains(p.Title, s) || strings.Contains(p.Why, s) {
					fail("%s: Go text %q in %q / %q", key, s, p.Title, p.Why)
				}
			}
			if p.Level != view.LevelCritical {
				continue
			}
			anyCritical = true
			switch p.Kind {
			case "route":
				if !impacted[p.Subject] {
					fail("route %s critical without client impact", p.Subject)
				}
				named[p.Subject] = true
			case "host":
				impact := false
				for _, a := range p.Affects {
					if a.Kind == "route" && a.Level == view.LevelCritical {
						if !impacted[a.Name] {
							fail("host %s: route %s critical without client impact", p.Subject, a.Name)
						}
						impact, named[a.Name] = true, true
					}
				}
				if !impact {
					fail("host %s critical with no route of its pools failing clients", p.Subject)
				}
			}
		}
		if anyCritical != (len(impacted) > 0) {
			fail("critical %v, but routes with client impact: %v", anyCritical, impacted)
		}
		for r := range impacted {
			if !named[r] {
				fail("route %s fails its clients, and no critical problem names it", r)
			}
		}
	}
}

// generate makes a random snapshot: up to three pools over five
// addresses (so hosts share pools, as the demo's do), up to four routes.
func generate(rng *rand.Rand) view.Status {
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	st := view.Status{Time: scenes.Start.Add(time.Hour), Started: scenes.Start}
	for i := range 1 + rng.IntN(3) {
		p := view.Pool{Name: fmt.Sprintf("p%d", i)}
		if rng.IntN(2) == 0 {
			p.ActiveCheck = "GET /healthz every 5s"
		}
		ejected := false
		for _, a := range rng.Perm(5)[:1+rng.IntN(4)] {
			h := view.Host{Addr: fmt.Sprintf("10.0.0.%d:80", a+1), Since: scenes.Start,
				State:   pick(view.Healthy, view.Healthy, view.Healthy, view.Suspect, view.Ejected, view.Down, view.Drained, view.Maintenance),
				Verdict: view.Verdict{Level: view.LevelOK}}
			if rng.IntN(8) == 0 {
				h.Verdict = view.Verdict{Level: view.LevelWarning, Reason: "50.0% of its recent requests failed and were attributed to it (10 of 20)"}
			}
			if h.State != view.Healthy {
				h.Since = scenes.Start.Add(time.Duration(rng.IntN(600)) * time.Second)
				h.Reason = pick("readiness probe failed", "connection failures in a row", "operator: drain")
				h.Evidence = pick("3 consecutive connect_refused", "10 of 10 requests failed (status_5xx) from 4 clients in 30s; peers 0%", "")
				h.LastCheck, h.CheckDetail = st.Time, pick(probeErrors...)
			}
			if h.State == view.Healthy || h.State == view.Suspect {
				p.Available++
			}
			ejected = ejected || h.State == view.Ejected
			p.Hosts = append(p.Hosts, h)
		}
		p.Empty = p.Available == 0
		p.Panic = p.Empty && ejected && rng.IntN(2) == 0
		p.Failing = !p.Empty && rng.IntN(10) == 0
		st.Pools = append(st.Pools, p)
	}
	for i := range 1 + rng.IntN(4) {
		p := st.Pools[rng.IntN(len(st.Pools))]
		r := view.Route{Name: fmt.Sprintf("r%d", i), Pool: p.Name, Serving: view.ServingNormal, Verdict: view.Verdict{Level: view.LevelOK}}
		switch {
		case p.Panic:
			r.Serving = view.ServingPanic
		case p.Empty || p.Failing:
			r.Serving = pick(view.ServingSorry, view.ServingStale, view.ServingFallback)
		case rng.IntN(6) == 0:
			r.Serving = view.ServingStale // the cache hides the route's own failures
		}
		r.Verdict.Level = pick(view.LevelOK, view.LevelOK, view.LevelWarning, view.LevelCritical)
		if r.Verdict.Level != view.LevelOK {
			r.Verdict.Reason = "12.0% of answers were 5xx in the last 60s (12 of 100)"
			r.Recent.ErrorRatio = 0.12
		}
		r.Degraded = rng.IntN(6) == 0
		if r.Degraded {
			r.DegradedReason = "response_timeout on 2 hosts"
		}
		if r.Serving == view.ServingSorry {
			st.NotReady = append(st.NotReady, view.NotReadyRoute(r, st.Pools))
		}
		st.Routes = append(st.Routes, r)
	}
	return st
}

// probeErrors are what the health checker records, Go's words included.
var probeErrors = []string{
	"request failed: context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
	"request failed: connection refused",
	"request failed: EOF",
	"request failed: read: connection reset by peer",
	"request failed: tls: failed to verify certificate: x509: certificate signed by unknown authority",
	"request failed: i/o timeout",
	"request failed: no such host",
	"status 500, expected 200-399",
	"status 404, expected 200-399",
	"status 200 but the body lacks \"ok\"",
	"request failed: something nobody foresaw",
}

// Each recorded failure is worded for an operator, with what to check;
// Go's text stays in the detail only.
func TestReasonsAreWordedForOperators(t *testing.T) {
	for _, tc := range []struct{ detail, why string }{
		{probeErrors[0], "does not answer in time. Check its load"},
		{probeErrors[1], "nothing accepts connections on its address (connection refused). Check that the backend runs"},
		{probeErrors[2], "closes connections without answering"},
		{probeErrors[3], "resets connections"},
		{probeErrors[4], "TLS handshake with it fails. Check its certificate"},
		{probeErrors[5], "connecting to it times out"},
		{probeErrors[6], "its name does not resolve"},
		{probeErrors[7], "answers 500 instead of 200-399: it answers with server errors (5xx)"},
		{probeErrors[8], "answers 404 instead of 200-399: its health check gets an unexpected status. Check the pool's health.active path"},
		{probeErrors[9], "lacks the expected text"},
		{probeErrors[10], "Readiness probe failed."},
	} {
		st := view.Status{Pools: []view.Pool{{Name: "web", ActiveCheck: "GET /healthz every 5s", Available: 1, Hosts: []view.Host{
			{Addr: "10.0.0.1:80", State: view.Down, Reason: "readiness probe failed", Evidence: tc.detail, CheckDetail: tc.detail, LastCheck: time.Unix(1, 0)},
			{Addr: "10.0.0.2:80", State: view.Healthy},
		}}}}
		ps := Problems(st)
		if len(ps) != 1 || !strings.Contains(ps[0].Why, tc.why) || ps[0].Level != view.LevelWarning {
			t.Errorf("%q: %+v, want why with %q", tc.detail, ps, tc.why)
			continue
		}
		for _, s := range goText {
			if strings.Contains(ps[0].Why, s) {
				t.Errorf("%q: why %q carries %q", tc.detail, ps[0].Why, s)
			}
		}
		if !strings.Contains(ps[0].Detail, tc.detail) {
			t.Errorf("%q: detail %q", tc.detail, ps[0].Detail)
		}
	}
}

// A host an operator drained is worth knowing, not a warning, unless its
// pool has nothing else: then the route's clients get the sorry page, and
// that is critical.
func TestDrainedHostIsInfoUnlessClientsPay(t *testing.T) {
	pool := func(avail int, hosts ...view.Host) view.Pool {
		return view.Pool{Name: "web", Available: avail, Empty: avail == 0, Hosts: hosts}
	}
	drained := view.Host{Addr: "10.0.0.1:80", State: view.Drained, Reason: "operator: drain"}
	ok := view.Host{Addr: "10.0.0.2:80", State: view.Healthy}
	site := view.Route{Name: "site", Pool: "web", Serving: view.ServingNormal}
	ps := Problems(view.Status{Pools: []view.Pool{pool(1, drained, ok)}, Routes: []view.Route{site}})
	if len(ps) != 1 || ps[0].Level != view.LevelInfo || !strings.Contains(ps[0].Why, "POST /api/hosts/web/10.0.0.1:80/ready") {
		t.Errorf("drained beside a healthy host: %+v", ps)
	}
	site.Serving = view.ServingSorry
	ps = Problems(view.Status{Pools: []view.Pool{pool(0, drained)}, Routes: []view.Route{site}, NotReady: []string{view.NotReadyRoute(site, []view.Pool{pool(0, drained)})}})
	if len(ps) != 1 || ps[0].Level != view.LevelCritical || ps[0].Title != "Host 10.0.0.1:80 is drained" {
		t.Errorf("the only host drained: %+v", ps)
	}
}

// A readiness reason no other problem explains is shown as it is.
func TestOtherNotReadyReasonsStay(t *testing.T) {
	ps := Problems(view.Status{NotReady: []string{"kubernetes: the first sync of Ingresses has not finished"}})
	if len(ps) != 1 || ps[0].Level != view.LevelCritical || ps[0].Title != "Not ready" ||
		!strings.HasPrefix(ps[0].Why, "Kubernetes: the first sync of Ingresses has not finished.") {
		t.Errorf("%+v", ps)
	}
}

// A host down whose last probe passed is on its way back, and says so.
func TestDownHostComingBack(t *testing.T) {
	st := view.Status{Pools: []view.Pool{{Name: "web", Available: 1, Hosts: []view.Host{
		{Addr: "10.0.0.1:80", State: view.Down, Reason: "readiness probe failed", Evidence: "request failed: connection refused",
			LastCheck: time.Unix(1, 0), LastCheckOK: true, CheckDetail: "status 200"},
		{Addr: "10.0.0.2:80", State: view.Healthy},
	}}}}
	ps := Problems(st)
	if len(ps) != 1 || !strings.Contains(ps[0].Why, "its last probe passed") || !strings.Contains(ps[0].Why, "connection refused") {
		t.Errorf("%+v", ps)
	}
}

// Every host of a pool failing, though max_ejected keeps one in rotation
// (no active checks): the route's 5xx are the hosts' doing, and the hosts
// are critical; no route problem of its own.
func TestEveryHostFailingExplainsTheRoute(t *testing.T) {
	st := view.Status{Pools: []view.Pool{{Name: "web", Available: 1, Hosts: []view.Host{
		{Addr: "10.0.0.1:80", State: view.Ejected, Reason: "connection failures in a row", Evidence: "3 consecutive connect_refused"},
		{Addr: "10.0.0.2:80", State: view.Suspect, Reason: "connection failures in a row", Evidence: "3 consecutive connect_refused"},
	}}}, Routes: []view.Route{{Name: "site", Pool: "web", Serving: view.ServingNormal,
		Recent:  view.RouteRecent{Seconds: 60, ErrorRatio: 1},
		Verdict: view.Verdict{Level: view.LevelCritical, Reason: "100.0% of answers were 5xx in the last 60s (12 of 12)"}}}}
	ps := Problems(st)
	if len(ps) != 2 || ps[0].Level != view.LevelCritical || ps[1].Level != view.LevelCritical || ps[0].Kind != "host" || ps[1].Kind != "host" {
		t.Fatalf("%+v", ps)
	}
	if a := strings.Join(affects(ps[1]), "\n"); !strings.Contains(a, "route site: 100.0% of its answers 5xx in the last minute") ||
		!strings.Contains(ps[1].Why, "tried only when its peers cannot take a request") {
		t.Errorf("%s: %s\n%s", ps[1].Subject, ps[1].Why, a)
	}
}

// A pool whose every host fails every request, all still healthy by
// their state: each host's problem dates from the pool's failing episode,
// not from nowhere.
func TestFailingPoolProblemsSayWhenItBegan(t *testing.T) {
	began := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	st := view.Status{Pools: []view.Pool{{Name: "web", Available: 2, Failing: true, FailingSince: began, Hosts: []view.Host{
		{Addr: "10.0.0.1:80", State: view.Healthy, Since: began.Add(-time.Hour), Evidence: "12 status_5xx"},
		{Addr: "10.0.0.2:80", State: view.Healthy, Since: began.Add(-time.Hour), Evidence: "12 status_5xx"},
	}}}}
	ps := Problems(st)
	if len(ps) != 2 {
		t.Fatalf("%+v", ps)
	}
	for _, p := range ps {
		if !p.Since.Equal(began) {
			t.Errorf("%s: since %v, want the episode's start %v", p.Subject, p.Since, began)
		}
	}
}
