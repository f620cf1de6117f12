// Package scenes builds status snapshots of the demo's site (pools web
// and api on three backends, routes site, cached and api) in the
// situations the status page must tell apart: all good, one redundant
// backend down while every client is served, and every backend down. The
// status page's tests assert on them and its screenshots are taken of
// them (internal/ops/status/screenshot.sh).
package scenes

import (
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// The situations.
const (
	Healthy     = "healthy"
	OneHostDown = "one-host-down"
	AllDown     = "all-down"
)

// Names lists the situations in the order the docs show them.
var Names = []string{Healthy, OneHostDown, AllDown}

// The demo's backends.
const (
	B1 = "127.0.0.1:9101"
	B2 = "127.0.0.1:9102"
	B3 = "127.0.0.1:9103"
)

// Start is when the scenes' sturdy started.
var Start = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

// Probe answers of a dead backend, as the health checker records them.
const (
	probeRefused = "request failed: connection refused"
	probeTimeout = "request failed: context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
	probe503     = "status 503, expected 200-399"
)

// Demo returns the snapshot of situation name at poll step (counters grow
// with it, two seconds a step, so a page polling it has rates). The
// verdicts are judged as the server judges them; Problems is left for the
// status handler to fill.
func Demo(name string, step int) view.Status {
	n := uint64(step)
	now := Start.Add(10*time.Minute + time.Duration(step)*2*time.Second)
	outAt := Start.Add(8*time.Minute + 12*time.Second)
	// dead says, per backend, how it is dead in this situation ("" alive).
	dead := map[string]string{}
	switch name {
	case OneHostDown:
		dead[B2] = probeTimeout
	case AllDown:
		dead[B1], dead[B2], dead[B3] = probeRefused, probeTimeout, probe503
	}
	hist := func(scale uint64) view.Histogram {
		return view.Histogram{
			Bounds: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
			Counts: []uint64{100 * scale, 300 * scale, 420 * scale, 470 * scale, 490 * scale, 497 * scale, 499 * scale, 500 * scale, 500 * scale, 500 * scale, 500 * scale},
			Count:  500 * scale, Sum: 0.02 * 500 * float64(scale),
		}
	}
	host := func(addr string, i int) view.Host {
		h := view.Host{Addr: addr, Weight: 1, State: view.Healthy, Since: Start,
			Attempts:       map[string]uint64{"ok": 3000 + 5*n + uint64(i)*11},
			WindowRequests: 30, LastCheck: now.Add(-time.Second), LastCheckOK: true, CheckDetail: "status 200",
			Recent:     view.HostRecent{Seconds: 60, Attempts: 80 + uint64(i)},
			HeaderTime: hist(6 + n), BytesReceived: (3000 + 5*n) * 1800, BytesSent: (3000 + 5*n) * 30}
		if why := dead[addr]; why != "" {
			h.State, h.Since, h.Reason, h.Evidence = view.Down, outAt.Add(time.Duration(i)*time.Second), "readiness probe failed", why
			h.LastCheckOK, h.CheckDetail = false, why
			h.Attempts = map[string]uint64{"ok": 2400, "connect_refused": 3, "response_timeout": 2}
			h.WindowRequests, h.WindowFailures = 0, 0
			h.Recent = view.HostRecent{Seconds: 60, Attempts: 6, Failures: 6}
			h.HeaderTime, h.BytesReceived, h.BytesSent = hist(6), 2400*1800, 2400*30
		}
		return h
	}
	pool := func(name, balance string, addrs ...string) view.Pool {
		p := view.Pool{Name: name, Balance: balance, ActiveCheck: "GET /healthz every 2s"}
		for i, a := range addrs {
			h := host(a, i)
			if h.State == view.Healthy {
				p.Available++
			}
			p.Hosts = append(p.Hosts, h)
		}
		if p.Available == 0 {
			p.Empty, p.EmptySince = true, outAt.Add(2*time.Second)
		}
		return p
	}
	web := pool("web", "round_robin", B1, B2, B3)
	api := pool("api", "least_conn", B1, B2)

	route := func(name, pool string, def bool) view.Route {
		return view.Route{Name: name, Pool: pool, Default: def, Serving: view.ServingNormal,
			Requests: map[string]uint64{"2xx": 9000 + 6*n, "3xx": 40, "4xx": 12},
			Recent:   view.RouteRecent{Seconds: 60, Requests: map[string]uint64{"2xx": 180, "4xx": 2}},
			Duration: hist(18 + n), Answers: map[string]uint64{}}
	}
	site, cached, apiRoute := route("site", "web", true), route("cached", "web", false), route("api", "api", false)
	cached.Cache = map[string]uint64{"hit": 5000 + 4*n, "miss": 800 + n, "stale": 0}
	cached.OriginRequests = 800 + n
	if name == AllDown {
		for _, r := range []*view.Route{&site, &apiRoute} {
			r.Serving, r.ServingSince = view.ServingSorry, outAt.Add(2*time.Second)
			r.Requests["5xx"] = 60 + 3*n
			r.Answers["sorry"] = 60 + 3*n
			r.Recent.Requests = map[string]uint64{"2xx": 90, "5xx": 90}
		}
		site.Degraded, site.DegradedSince, site.DegradedReason = true, outAt, "response_timeout on 3 hosts"
		cached.Serving, cached.ServingSince = view.ServingStale, outAt.Add(2*time.Second)
		cached.Answers["stale"], cached.Cache["stale"] = 30+n, 30+n
		cached.OriginErrors, cached.HiddenErrors = 30+n, 30+n
	}
	st := view.Status{
		Time: now, Started: Start, Version: "v0.1.0", ConfigFile: "sturdy demo", ConfigHash: "9f86d081884c7d65",
		Ready: true, Pools: []view.Pool{web, api}, Routes: []view.Route{apiRoute, cached, site},
		Attributed: view.Attribution{"host": 0}, Reloads: view.Reloads{OK: 0},
		Retries:   view.Retries{Made: map[string]uint64{"web": 0, "api": 0}, Refused: map[string]uint64{}},
		AccessLog: view.AccessLog{},
		Events:    []event.Event{},
	}
	for _, a := range []string{B1, B2, B3} {
		if why := dead[a]; why != "" {
			st.Attributed["host"] += 5
			st.Events = append([]event.Event{{Seq: uint64(len(st.Events) + 1), Time: outAt, Type: event.HostDown, Severity: event.Warning, Pool: "web", Host: a,
				Message: "host down: readiness probe failed (" + why + ")"}}, st.Events...)
		}
	}
	if name == AllDown {
		st.Events = append([]event.Event{{Seq: uint64(len(st.Events) + 1), Time: outAt.Add(2 * time.Second), Type: event.PoolEmpty, Severity: event.Critical, Pool: "web",
			Message: "pool has no host in rotation"}}, st.Events...)
	}
	view.Judge(&st)
	for _, r := range st.Routes {
		if r.Serving == view.ServingSorry {
			st.NotReady = append(st.NotReady, view.NotReadyRoute(r, st.Pools))
		}
	}
	st.Ready = len(st.NotReady) == 0
	return st
}
