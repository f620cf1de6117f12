package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/testing/fake"
	"github.com/sturdyproxy/sturdy/internal/view"
)

const scannerShareConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  - { name: other, path: /other/, pool: web }
  - { name: site, default: true, pool: web }
pools:
  - name: web
    hosts: [ { addr: "{{w1}}" }, { addr: "{{w2}}" }, { addr: "{{w3}}" } ]
`

// The demo's scanner, scaled: ten times as busy as each of four visitors
// and more than all of them together, refused with 502 by a WAF in front
// of each of three hosts, on the site's route, with the defaults.
// Share of traffic proves nothing: the failures are the scanner's, none
// is charged to a host or the route, and the route is not said to fail
// its clients.
func TestAScannerThatOutnumbersTheVisitors(t *testing.T) {
	t.Parallel()
	const scanner = "127.0.5.66"
	vars := map[string]string{}
	for i := 1; i <= 3; i++ {
		b, err := fake.NewBackend(fmt.Sprintf("b%d", i), fmt.Sprintf("127.1.5.%d", i))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		w, err := fake.NewWAF(fmt.Sprintf("127.2.5.%d", i), b.Addr, scanner, fake.WAF502)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Close)
		vars[fmt.Sprintf("w%d", i)] = w.Addr
	}
	s, url, _ := startSturdy(t, parseConfig(t, scannerShareConfig, vars))
	ev := countEvents(s)

	var visitors *tally
	done := make(chan struct{})
	go func() {
		defer close(done)
		visitors = load(t, url, ips("127.0.5.", 4), 20, 200*time.Millisecond, func(i int) string {
			if i%2 == 0 {
				return fmt.Sprintf("/page/%d", i)
			}
			return fmt.Sprintf("/other/%d", i)
		})
	}()
	bad := load(t, url, []string{scanner}, 200, 20*time.Millisecond, func(i int) string { return fmt.Sprintf("/wp-login.php?%d", i) })
	<-done

	if f := visitors.failures(); f != 0 {
		t.Errorf("visitors saw %d failures: %v", f, visitors.n)
	}
	if bad.failures() < 150 {
		t.Fatalf("the scanner saw %d failures; the WAF did not refuse it: %v", bad.failures(), bad.n)
	}
	m := s.Monitor()
	if !m.Attributed(scanner) || ev.get(event.ClientAttributed) != 1 {
		t.Errorf("the scanner is not attributed (%d client_attributed events)", ev.get(event.ClientAttributed))
	}
	for _, a := range []health.Attribution{health.AttrHost, health.AttrRoute} {
		if n := m.AttributedCount(a); n != 0 {
			t.Errorf("%d failures attributed to the %s", n, a)
		}
	}
	if n := ev.get(event.RouteDegraded); n != 0 || s.Runtime().Route("site").Tracker.Degraded() {
		t.Errorf("%d route_degraded events; events:%s", n, ev)
	}
	noEjections(t, s, ev)
	for _, r := range s.Status().Routes {
		if r.Name == "site" && r.Verdict.Level == view.LevelCritical {
			t.Errorf("the site route is said to fail its clients: %+v (recent %+v)", r.Verdict, r.Recent)
		}
	}
	t.Logf("measured: scanner %v; attributed client %d, request %d, host %d, route %d",
		bad.n, m.AttributedCount(health.AttrClient), m.AttributedCount(health.AttrRequest), m.AttributedCount(health.AttrHost), m.AttributedCount(health.AttrRoute))
}
