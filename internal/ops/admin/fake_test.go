package admin

import (
	"fmt"
	"sync"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/testing/scenes"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// fakeBackend plays a scripted incident: every Status call is the next step
// of it, two seconds later than the previous one.
type fakeBackend struct {
	mu        sync.Mutex
	step      int
	ready     bool
	notReady  []string
	draining  bool
	modes     []string // "pool/addr=mode" in call order
	reloadErr error
	modeErr   error
	// scene, when set, is the scenes.Demo situation to play instead of
	// the incident.
	scene string
}

var start = time.Date(2026, 9, 26, 6, 40, 0, 0, time.UTC)

func (f *fakeBackend) Status() view.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.step++
	if f.scene != "" {
		return scenes.Demo(f.scene, f.step)
	}
	st := scenario(f.step)
	if f.notReady != nil || f.draining {
		st.Ready, st.NotReady, st.Draining = f.ready, f.notReady, f.draining
	}
	return st
}

func (f *fakeBackend) SetHostMode(pool, addr, mode string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.modeErr != nil {
		return f.modeErr
	}
	f.modes = append(f.modes, pool+"/"+addr+"="+mode)
	return nil
}

func (f *fakeBackend) Reload() error { return f.reloadErr }

// The incident the fake plays: from step 2 on, host 10.0.0.12:8080 of pool
// web refuses connections and is ejected, client 203.0.113.7 is attributed
// (a WAF blocks it, incident 000), and route catalog answers from stale
// copies because its origin fails.
const (
	deadHost = "10.0.0.12:8080"
	client   = "203.0.113.7"
)

func scenario(step int) view.Status {
	now := start.Add(time.Duration(step) * 2 * time.Second).Add(5 * time.Minute)
	n := uint64(step)
	incident := step >= 2
	ejectedAt := start.Add(4*time.Minute + 31*time.Second)
	hist := func(scale uint64) view.Histogram {
		return view.Histogram{
			Bounds: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
			Counts: []uint64{10 * scale, 40 * scale, 120 * scale, 300 * scale, 420 * scale, 470 * scale, 490 * scale, 497 * scale, 499 * scale, 500 * scale, 500 * scale},
			Count:  500 * scale, Sum: 0.06 * 500 * float64(scale),
		}
	}
	web := view.Pool{Name: "web", Balance: "round_robin", Available: 3, ActiveCheck: "GET /healthz every 5s"}
	for i, addr := range []string{"10.0.0.11:8080", deadHost, "10.0.0.13:8080"} {
		h := view.Host{Addr: addr, Weight: 1, State: view.Healthy, Since: start,
			Attempts: map[string]uint64{"ok": 4000 + 300*n + uint64(i)*7}, WindowRequests: 600, LastCheck: now.Add(-2 * time.Second), LastCheckOK: true,
			CheckDetail: "GET /healthz: 200 in 3ms",
			// Traffic figures grow every step, so the page has rates.
			Recent:     view.HostRecent{Seconds: 60, Attempts: 9000 + uint64(i)*20},
			HeaderTime: hist(8 + 2*n), BytesReceived: (4000 + 300*n) * 2300, BytesSent: (4000 + 300*n) * 40}
		if addr == deadHost && incident {
			h.State, h.Since, h.Ejections = view.Ejected, ejectedAt, 1
			h.Reason = "refused 5 connections in a row; ejected for 30s (backoff 1 of 6)"
			h.Evidence = "5 of 5 attempts connect_refused in 1.2s from 4 clients; peers 0%"
			h.Attempts["connect_refused"] = 5 + 3*n
			h.WindowFailures, h.WindowRequests = 5, 5
			h.Recent = view.HostRecent{Seconds: 60, Attempts: 6100, Failures: 5}
			h.HeaderTime, h.BytesReceived, h.BytesSent = hist(8), 4000*2300, 4000*40 // nothing new since it left
			h.LastCheckOK, h.CheckDetail = false, "GET /healthz: dial tcp 10.0.0.12:8080: connection refused"
			web.Available = 2
		}
		web.Hosts = append(web.Hosts, h)
	}
	api := view.Pool{Name: "api", Balance: "least_conn", Available: 2, Hosts: []view.Host{
		{Addr: "10.0.1.21:9000", Weight: 2, State: view.Healthy, Since: start, Attempts: map[string]uint64{"ok": 900 + 80*n, "status_5xx": 3}, InFlight: 2},
		{Addr: "10.0.1.22:9000", Weight: 1, State: view.Drained, Since: start.Add(2 * time.Minute), Reason: "drained by an operator",
			Attempts: map[string]uint64{"ok": 450}},
		{Addr: "10.0.1.23:9000", Weight: 1, State: view.Healthy, Since: start, Attempts: map[string]uint64{"ok": 700 + 40*n}},
	}}
	site := view.Route{Name: "site", Pool: "web", Default: true, Serving: "normal", InFlight: 3,
		Requests: map[string]uint64{"2xx": 12000 + 900*n, "3xx": 400 + 10*n, "4xx": 80 + n, "5xx": 2},
		Recent:   view.RouteRecent{Seconds: 60, Requests: map[string]uint64{"2xx": 27000, "3xx": 300, "4xx": 30}},
		Duration: hist(24 + 2*n), Answers: map[string]uint64{}}
	catalog := view.Route{Name: "catalog", Pool: "web", Serving: "normal",
		Requests: map[string]uint64{"2xx": 3000 + 100*n},
		Recent:   view.RouteRecent{Seconds: 60, Requests: map[string]uint64{"2xx": 3000}},
		Duration: hist(6 + n/2), Answers: map[string]uint64{},
		Cache: map[string]uint64{"hit": 2500 + 80*n, "miss": 500 + 10*n, "stale": 0}, OriginRequests: 510 + 10*n}
	apiRoute := view.Route{Name: "api", Pool: "api", Serving: "normal", InFlight: 2,
		Requests: map[string]uint64{"2xx": 1600 + 120*n, "4xx": 40, "5xx": 3},
		Recent:   view.RouteRecent{Seconds: 60, Requests: map[string]uint64{"2xx": 3600, "4xx": 12, "5xx": 1}},
		Duration: hist(3 + n/4), Answers: map[string]uint64{"shed": 0}}
	st := view.Status{
		Time: now, Started: start, Version: "v0.3.0", ConfigFile: "/etc/sturdy/sturdy.yaml", ConfigHash: "5d41402abc4b2a76",
		Ready: true, Pools: []view.Pool{web, api}, Routes: []view.Route{site, catalog, apiRoute},
		Attributed: view.Attribution{"host": 5}, Reloads: view.Reloads{OK: 1, Last: start.Add(time.Minute)},
		Retries:   view.Retries{Made: map[string]uint64{"web": 5}, Refused: map[string]uint64{}},
		Webhooks:  []view.Webhook{{Name: "ops-slack", Format: "slack", Sent: 3}},
		AccessLog: view.AccessLog{Enabled: true, Written: 20000 + 1000*n},
		Events: []event.Event{
			{Seq: 1, Time: start.Add(2 * time.Minute), Type: event.HostDrained, Severity: event.Info, Pool: "api", Host: "10.0.1.22:9000", Message: "host drained by an operator"},
		},
	}
	if incident {
		// A host down on its probe comes after the routes in the page's
		// list of problems, but it is the worst: the headline must name it.
		down := &st.Pools[1].Hosts[2]
		down.State, down.Since = view.Down, start.Add(4*time.Minute+40*time.Second)
		down.Reason, down.Evidence = "readiness probe failed", "GET /healthz: status 500, expected 200-399"
		down.LastCheck, down.CheckDetail = now.Add(-time.Second), down.Evidence
		st.Pools[1].Available = 1
		st.Routes[1].Serving, st.Routes[1].ServingSince = "stale", start.Add(4*time.Minute+50*time.Second)
		st.Routes[1].Answers["stale"] = 40 + 15*n
		st.Routes[1].Cache["stale"] = 40 + 15*n
		st.Routes[1].OriginErrors, st.Routes[1].HiddenErrors = 40+15*n, 40+15*n
		st.Clients = []view.Client{{Key: client, Since: start.Add(4*time.Minute + 12*time.Second), Shed: false,
			Evidence: "24 of 24 requests status_5xx on 3 hosts in 30s; 612 other clients 0%"}}
		st.Attributed["client"] = 24 + 2*n
		st.Events = append([]event.Event{
			{Seq: 4, Time: start.Add(4*time.Minute + 50*time.Second), Type: event.StaleStarted, Severity: event.Warning, Route: "catalog",
				Message: "route catalog serves stale copies: its origin fails", Evidence: map[string]any{"first_error": "GET /catalog/shoes: origin status 502"}},
			{Seq: 3, Time: ejectedAt, Type: event.HostEjected, Severity: event.Warning, Pool: "web", Host: deadHost,
				Message: fmt.Sprintf("host %s ejected: refused 5 connections in a row", deadHost), Evidence: map[string]any{"connect_refused": 5, "eject_for": "30s"}},
			{Seq: 2, Time: start.Add(4*time.Minute + 12*time.Second), Type: event.ClientAttributed, Severity: event.Info, Client: client,
				Message: "failures of client " + client + " are its own: 24 of 24 failed on 3 hosts while others succeed", Evidence: map[string]any{"hosts": 3, "failures": 24}},
		}, st.Events...)
	}
	view.Judge(&st) // as the server does for every snapshot
	return st
}
