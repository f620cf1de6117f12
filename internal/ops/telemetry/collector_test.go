package telemetry

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sturdyproxy/sturdy/internal/view"
)

var t0 = time.Date(2026, 9, 26, 6, 44, 0, 0, time.UTC)

// scenario is the state after a scripted incident: host b of pool web died
// (5 refused connections, then ejected), client 203.0.113.7 was attributed
// after failing on both hosts, and route site answered one request with a
// stale copy because its origin failed.
func scenario() view.Status {
	return view.Status{
		Time: t0.Add(time.Minute), Started: t0, Version: "v1.0.0", ConfigHash: "abc123",
		Ready: true,
		Pools: []view.Pool{{
			Name: "web", Available: 1,
			Hosts: []view.Host{
				{Addr: "10.0.0.1:80", State: view.Healthy, Since: t0, Attempts: map[string]uint64{"ok": 120, "status_5xx": 2},
					HeaderTime:    view.Histogram{Bounds: []float64{0.01, 0.1}, Counts: []uint64{100, 120}, Count: 122, Sum: 3.25},
					BytesReceived: 123456, BytesSent: 789},
				{Addr: "10.0.0.2:80", State: view.Ejected, Since: t0.Add(30 * time.Second), Ejections: 1,
					Reason: "refused 5 connections in a row", Evidence: "5 connect_refused in 2s",
					Attempts: map[string]uint64{"ok": 40, "connect_refused": 5}},
			},
		}},
		Routes: []view.Route{{
			Name: "site", Pool: "web", Serving: "stale", ServingSince: t0.Add(40 * time.Second),
			Requests: map[string]uint64{"2xx": 160, "4xx": 3, "5xx": 2},
			Duration: view.Histogram{Bounds: []float64{0.1, 1}, Counts: []uint64{150, 164}, Count: 165, Sum: 12.5},
			Answers:  map[string]uint64{"stale": 1},
			Cache:    map[string]uint64{"hit": 20, "miss": 144, "stale": 1},
			// The stale answer hid one origin error: counted all the same.
			OriginRequests: 145, OriginErrors: 1, HiddenErrors: 1,
		}},
		Clients:    []view.Client{{Key: "203.0.113.7", Since: t0.Add(20 * time.Second), Evidence: "2 of 2 status_5xx on 2 hosts; others 0%"}},
		Attributed: view.Attribution{"client": 2, "host": 5},
		Retries:    view.Retries{Made: map[string]uint64{"web": 5}, Refused: map[string]uint64{}},
		Reloads:    view.Reloads{OK: 1},
		Webhooks:   []view.Webhook{{Name: "ops", Sent: 3, Dropped: 1}},
		Edge:       view.Edge{Reencoded: 4, Rejected: 1},
	}
}

// Per-host time to response headers and bytes each way, labelled by pool
// and host only; and what the edge refused or rewrote.
func TestHostTrafficAndEdgeValues(t *testing.T) {
	st := scenario()
	c := NewCollector(func() view.Status { return st })
	want := `
# HELP sturdy_upstream_header_duration_seconds Time from sending a request to the host to its response headers, for attempts that got a response (any status).
# TYPE sturdy_upstream_header_duration_seconds histogram
sturdy_upstream_header_duration_seconds_bucket{host="10.0.0.1:80",pool="web",le="0.01"} 100
sturdy_upstream_header_duration_seconds_bucket{host="10.0.0.1:80",pool="web",le="0.1"} 120
sturdy_upstream_header_duration_seconds_bucket{host="10.0.0.1:80",pool="web",le="+Inf"} 122
sturdy_upstream_header_duration_seconds_sum{host="10.0.0.1:80",pool="web"} 3.25
sturdy_upstream_header_duration_seconds_count{host="10.0.0.1:80",pool="web"} 122
sturdy_upstream_header_duration_seconds_bucket{host="10.0.0.2:80",pool="web",le="+Inf"} 0
sturdy_upstream_header_duration_seconds_sum{host="10.0.0.2:80",pool="web"} 0
sturdy_upstream_header_duration_seconds_count{host="10.0.0.2:80",pool="web"} 0
# HELP sturdy_upstream_received_bytes_total Response body bytes read from the host (upgraded connections not counted).
# TYPE sturdy_upstream_received_bytes_total counter
sturdy_upstream_received_bytes_total{host="10.0.0.1:80",pool="web"} 123456
sturdy_upstream_received_bytes_total{host="10.0.0.2:80",pool="web"} 0
# HELP sturdy_upstream_sent_bytes_total Request body bytes sent to the host (upgraded connections not counted).
# TYPE sturdy_upstream_sent_bytes_total counter
sturdy_upstream_sent_bytes_total{host="10.0.0.1:80",pool="web"} 789
sturdy_upstream_sent_bytes_total{host="10.0.0.2:80",pool="web"} 0
# HELP sturdy_edge_requests_total Requests the edge refused or rewrote before any backend was asked: denied (403, deny list), rejected (400, malformed target), reencoded (raw non-ASCII bytes percent-encoded), normalized (dot segments resolved).
# TYPE sturdy_edge_requests_total counter
sturdy_edge_requests_total{decision="denied"} 0
sturdy_edge_requests_total{decision="normalized"} 0
sturdy_edge_requests_total{decision="reencoded"} 4
sturdy_edge_requests_total{decision="rejected"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "sturdy_upstream_header_duration_seconds",
		"sturdy_upstream_received_bytes_total", "sturdy_upstream_sent_bytes_total", "sturdy_edge_requests_total"); err != nil {
		t.Error(err)
	}
}

func TestScenarioExactValues(t *testing.T) {
	st := scenario()
	c := NewCollector(func() view.Status { return st })
	want := `
# HELP sturdy_requests_total Requests answered, by route and status class (1xx..5xx, 499 = client went away).
# TYPE sturdy_requests_total counter
sturdy_requests_total{code_class="2xx",route="site"} 160
sturdy_requests_total{code_class="4xx",route="site"} 3
sturdy_requests_total{code_class="5xx",route="site"} 2
# HELP sturdy_host_state 1 for the host's current state (healthy, suspect, ejected, down, drained, maintenance), 0 for the others.
# TYPE sturdy_host_state gauge
sturdy_host_state{host="10.0.0.1:80",pool="web",state="down"} 0
sturdy_host_state{host="10.0.0.1:80",pool="web",state="drained"} 0
sturdy_host_state{host="10.0.0.1:80",pool="web",state="ejected"} 0
sturdy_host_state{host="10.0.0.1:80",pool="web",state="healthy"} 1
sturdy_host_state{host="10.0.0.1:80",pool="web",state="maintenance"} 0
sturdy_host_state{host="10.0.0.1:80",pool="web",state="suspect"} 0
sturdy_host_state{host="10.0.0.2:80",pool="web",state="down"} 0
sturdy_host_state{host="10.0.0.2:80",pool="web",state="drained"} 0
sturdy_host_state{host="10.0.0.2:80",pool="web",state="ejected"} 1
sturdy_host_state{host="10.0.0.2:80",pool="web",state="healthy"} 0
sturdy_host_state{host="10.0.0.2:80",pool="web",state="maintenance"} 0
sturdy_host_state{host="10.0.0.2:80",pool="web",state="suspect"} 0
# HELP sturdy_pool_available_hosts Hosts of the pool that take new requests.
# TYPE sturdy_pool_available_hosts gauge
sturdy_pool_available_hosts{pool="web"} 1
# HELP sturdy_attributed_failures_total Failed attempts by whom they were attributed to: host, client, request or route.
# TYPE sturdy_attributed_failures_total counter
sturdy_attributed_failures_total{attribution="client"} 2
sturdy_attributed_failures_total{attribution="host"} 5
sturdy_attributed_failures_total{attribution="request"} 0
sturdy_attributed_failures_total{attribution="route"} 0
# HELP sturdy_attributed_clients Clients whose failures are currently attributed to themselves (the keys are on the status page, never labels).
# TYPE sturdy_attributed_clients gauge
sturdy_attributed_clients 1
# HELP sturdy_degraded_answers_total Requests answered by a degraded path: panic routing, fallback pool, stale copy, sorry page, or shed by a limit.
# TYPE sturdy_degraded_answers_total counter
sturdy_degraded_answers_total{kind="fallback",route="site"} 0
sturdy_degraded_answers_total{kind="panic",route="site"} 0
sturdy_degraded_answers_total{kind="shed",route="site"} 0
sturdy_degraded_answers_total{kind="sorry",route="site"} 0
sturdy_degraded_answers_total{kind="stale",route="site"} 1
# HELP sturdy_origin_errors_total Origin fetches that failed, whether or not a stale answer hid the failure from the client.
# TYPE sturdy_origin_errors_total counter
sturdy_origin_errors_total{route="site"} 1
# HELP sturdy_origin_errors_hidden_by_stale_total Origin failures the client never saw because a stale copy was served instead.
# TYPE sturdy_origin_errors_hidden_by_stale_total counter
sturdy_origin_errors_hidden_by_stale_total{route="site"} 1
# HELP sturdy_route_serving 1 for the way the route answers now: normal, panic, fallback, stale or sorry.
# TYPE sturdy_route_serving gauge
sturdy_route_serving{mode="fallback",route="site"} 0
sturdy_route_serving{mode="normal",route="site"} 0
sturdy_route_serving{mode="panic",route="site"} 0
sturdy_route_serving{mode="sorry",route="site"} 0
sturdy_route_serving{mode="stale",route="site"} 1
# HELP sturdy_route_serving_since_timestamp_seconds Unix time the route started answering the way route_serving shows.
# TYPE sturdy_route_serving_since_timestamp_seconds gauge
sturdy_route_serving_since_timestamp_seconds{route="site"} 1.79040508e+09
# HELP sturdy_cache_results_total Cache lookups by result (hit, miss, stale, bypass, revalidated).
# TYPE sturdy_cache_results_total counter
sturdy_cache_results_total{result="bypass",route="site"} 0
sturdy_cache_results_total{result="hit",route="site"} 20
sturdy_cache_results_total{result="miss",route="site"} 144
sturdy_cache_results_total{result="revalidated",route="site"} 0
sturdy_cache_results_total{result="stale",route="site"} 1
# HELP sturdy_request_duration_seconds Time from receiving a request to the end of its answer, by route.
# TYPE sturdy_request_duration_seconds histogram
sturdy_request_duration_seconds_bucket{route="site",le="0.1"} 150
sturdy_request_duration_seconds_bucket{route="site",le="1"} 164
sturdy_request_duration_seconds_bucket{route="site",le="+Inf"} 165
sturdy_request_duration_seconds_sum{route="site"} 12.5
sturdy_request_duration_seconds_count{route="site"} 165
# HELP sturdy_retries_total Retries made on another host, by pool.
# TYPE sturdy_retries_total counter
sturdy_retries_total{pool="web"} 5
# HELP sturdy_retry_budget_refused_total Retries the retry budget refused, by pool.
# TYPE sturdy_retry_budget_refused_total counter
sturdy_retry_budget_refused_total{pool="web"} 0
# HELP sturdy_webhook_events_dropped_total Events never sent: the webhook's queue was full, or sturdy stopped first.
# TYPE sturdy_webhook_events_dropped_total counter
sturdy_webhook_events_dropped_total{webhook="ops"} 1
# HELP sturdy_config_info Always 1; the hash of the loaded config file as a label.
# TYPE sturdy_config_info gauge
sturdy_config_info{hash="abc123"} 1
# HELP sturdy_config_reloads_total Config reloads by result (success, failure).
# TYPE sturdy_config_reloads_total counter
sturdy_config_reloads_total{result="failure"} 0
sturdy_config_reloads_total{result="success"} 1
`
	names := []string{
		"sturdy_requests_total", "sturdy_host_state", "sturdy_pool_available_hosts",
		"sturdy_attributed_failures_total", "sturdy_attributed_clients", "sturdy_degraded_answers_total",
		"sturdy_origin_errors_total", "sturdy_origin_errors_hidden_by_stale_total",
		"sturdy_route_serving", "sturdy_route_serving_since_timestamp_seconds", "sturdy_cache_results_total",
		"sturdy_request_duration_seconds", "sturdy_retries_total", "sturdy_retry_budget_refused_total",
		"sturdy_webhook_events_dropped_total", "sturdy_config_info", "sturdy_config_reloads_total",
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	// The dead host's refused connections and the healthy host's 5xx, by outcome.
	for _, tc := range []struct {
		host, outcome string
		want          float64
	}{
		{"10.0.0.2:80", "connect_refused", 5}, {"10.0.0.2:80", "ok", 40}, {"10.0.0.2:80", "reset", 0},
		{"10.0.0.1:80", "status_5xx", 2}, {"10.0.0.1:80", "ok", 120},
	} {
		got := valueOf(t, c, "sturdy_upstream_attempts_total", map[string]string{"pool": "web", "host": tc.host, "outcome": tc.outcome})
		if got != tc.want {
			t.Errorf("attempts %s %s = %v, want %v", tc.host, tc.outcome, got, tc.want)
		}
	}
}

// valueOf gathers c and returns the value of the one series of name with
// exactly labels.
func valueOf(t *testing.T, c prometheus.Collector, name string, labels map[string]string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue metrics
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			}
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

// Attributed clients are counted, never labelled: a thousand distinct
// clients (as in a scanner storm, incident 000) must not add one series.
func TestClientsNeverBecomeLabels(t *testing.T) {
	one := scenario()
	many := scenario()
	many.Clients = nil
	for i := range 1000 {
		many.Clients = append(many.Clients, view.Client{Key: fmt.Sprintf("198.51.%d.%d", i/256, i%256), Shed: i%2 == 0})
	}
	series := func(st view.Status) (int, string) {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(NewCollector(func() view.Status { return st }))
		n, err := testutil.GatherAndCount(reg)
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return n, rec.Body.String()
	}
	n1, _ := series(one)
	n1000, text := series(many)
	if n1 != n1000 {
		t.Errorf("%d series with 1 client, %d with 1000", n1, n1000)
	}
	if strings.Contains(text, "198.51.") {
		t.Error("a client key appears in /metrics")
	}
	if !strings.Contains(text, "sturdy_attributed_clients 1000\n") || !strings.Contains(text, "sturdy_shed_clients 500\n") {
		t.Error("client counts missing")
	}
}

func TestLintAndConsistency(t *testing.T) {
	st := scenario()
	st.Pools[0].Hosts[0].LastCheck = t0
	st.AccessLog = view.AccessLog{Enabled: true, Written: 10}
	st.Reloads = view.Reloads{OK: 1, Failed: 1, Last: t0, LastErr: "bad"}
	c := NewCollector(func() view.Status { return st })
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	// A pedantic registry fails when Collect sends a metric Describe did not.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	if got := valueOf(t, c, "sturdy_config_last_reload_successful", map[string]string{}); got != 0 {
		t.Errorf("last reload successful = %v", got)
	}
}

// A malformed histogram is reported by the scrape, not a panic.
func TestBadHistogramIsAnError(t *testing.T) {
	st := scenario()
	st.Routes[0].Duration.Counts = st.Routes[0].Duration.Counts[:1]
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(func() view.Status { return st }))
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "2 bounds but 1 counts") {
		t.Fatalf("err = %v", err)
	}
	// The HTTP handler still serves the rest.
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `sturdy_requests_total{code_class="2xx",route="site"} 160`) {
		t.Errorf("rest of the metrics missing:\n%.500s", body)
	}
}

func TestRegistryHasRuntimeCollectors(t *testing.T) {
	reg := NewRegistry(scenario)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		have[mf.GetName()] = true
	}
	for _, n := range []string{"go_goroutines", "process_start_time_seconds", "sturdy_up", "sturdy_build_info"} {
		if !have[n] {
			t.Errorf("registry lacks %s", n)
		}
	}
}

// The three timestamp metrics are present from the first scrape, before
// any state change or reload: a host or route that never changed has been
// as it is since the start, and the config in force was loaded then.
func TestTimestampsPresentFromStart(t *testing.T) {
	st := view.Status{
		Time: t0.Add(time.Second), Started: t0,
		Pools:  []view.Pool{{Name: "web", Available: 1, Hosts: []view.Host{{Addr: "10.0.0.1:80", State: view.Healthy}}}},
		Routes: []view.Route{{Name: "site", Pool: "web"}},
	}
	c := NewCollector(func() view.Status { return st })
	start := float64(t0.Unix())
	for _, tc := range []struct {
		name   string
		labels map[string]string
	}{
		{"sturdy_host_state_since_timestamp_seconds", map[string]string{"pool": "web", "host": "10.0.0.1:80"}},
		{"sturdy_route_serving_since_timestamp_seconds", map[string]string{"route": "site"}},
		{"sturdy_config_last_reload_timestamp_seconds", map[string]string{}},
	} {
		if got := valueOf(t, c, tc.name, tc.labels); got != start {
			t.Errorf("%s = %v, want the start time %v", tc.name, got, start)
		}
	}
	// Once something changed, the metric says when.
	st.Pools[0].Hosts[0].Since = t0.Add(30 * time.Second)
	st.Reloads.Last = t0.Add(40 * time.Second)
	if got := valueOf(t, c, "sturdy_host_state_since_timestamp_seconds", map[string]string{"pool": "web", "host": "10.0.0.1:80"}); got != start+30 {
		t.Errorf("host since = %v, want %v", got, start+30)
	}
	if got := valueOf(t, c, "sturdy_config_last_reload_timestamp_seconds", map[string]string{}); got != start+40 {
		t.Errorf("last reload = %v, want %v", got, start+40)
	}
}

func TestMirrorMetric(t *testing.T) {
	st := scenario()
	st.Routes = append(st.Routes, view.Route{Name: "shadowed", Pool: "web", Mirror: map[string]uint64{"sent": 3, "dropped": 1, "failed": 0, "skipped": 0}})
	c := NewCollector(func() view.Status { return st })
	want := `
# HELP sturdy_mirrored_requests_total Copies of the route's requests sent to its mirror pool, by result: sent, failed, dropped (max_in_flight), skipped (body above max_body).
# TYPE sturdy_mirrored_requests_total counter
sturdy_mirrored_requests_total{result="dropped",route="shadowed"} 1
sturdy_mirrored_requests_total{result="failed",route="shadowed"} 0
sturdy_mirrored_requests_total{result="sent",route="shadowed"} 3
sturdy_mirrored_requests_total{result="skipped",route="shadowed"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "sturdy_mirrored_requests_total"); err != nil {
		t.Fatal(err)
	}
}
