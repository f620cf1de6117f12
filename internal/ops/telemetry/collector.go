// Package telemetry exposes sturdy's state as Prometheus metrics. It keeps
// no counters of its own: at scrape time its Collector takes one
// view.Status and turns it into constant metrics, so /metrics, the status
// page and /api/status never disagree, and the request path pays nothing
// for metrics it has not already counted.
package telemetry

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sturdyproxy/sturdy/internal/outcome"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// hostStates are the states host_state reports, one series each.
var hostStates = []string{view.Healthy, view.Suspect, view.Ejected, view.Down, view.Drained, view.Maintenance}

// Collector is a prometheus.Collector that reads one view.Status per
// scrape. It is safe for concurrent scrapes if the snapshot function is.
type Collector struct {
	snapshot func() view.Status
	d        *descs
}

// NewCollector returns a collector that calls snapshot once per scrape.
func NewCollector(snapshot func() view.Status) *Collector {
	return &Collector{snapshot: snapshot, d: newDescs()}
}

// NewRegistry returns a registry holding a Collector for snapshot plus the
// Go runtime and process collectors: everything /metrics serves.
func NewRegistry(snapshot func() view.Status) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		NewCollector(snapshot),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Describe sends every metric's descriptor.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.d.all() {
		ch <- d
	}
}

// Collect takes one snapshot and sends every metric derived from it.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.snapshot()
	e := emitter{ch: ch}
	c.process(e, &st)
	for i := range st.Routes {
		c.route(e, &st.Routes[i], st.Started)
	}
	for i := range st.Pools {
		c.pool(e, &st.Pools[i], &st.Retries, st.Started)
	}
	c.attribution(e, &st)
	c.sinks(e, &st)
	c.edge(e, &st)
}

// edge emits what was decided without a backend, and sturdy's own
// exhaustion. Every label comes from a fixed list (see internal/edge and
// internal/ops/exhaust) or the config.
func (c *Collector) edge(e emitter, st *view.Status) {
	d := c.d
	for _, class := range sortedKeys(st.Edge.Requests) {
		if class == "other" {
			continue // nothing answers outside 1xx..5xx before a route
		}
		e.counter(d.requests, float64(st.Edge.Requests[class]), view.EdgeRoute, class)
	}
	for _, kind := range sortedKeys(st.Edge.Decisions) {
		m := st.Edge.Decisions[kind]
		for _, reason := range sortedKeys(m) {
			e.counter(d.edgeDecisions, float64(m[reason]), kind, reason)
		}
	}
	for _, op := range sortedKeys(st.Local.Failures) {
		m := st.Local.Failures[op]
		for _, res := range sortedKeys(m) {
			e.counter(d.localErrors, float64(m[res]), op, res)
		}
	}
	e.gauge(d.localExhausted, b2f(st.Local.Exhausted))
	for _, name := range sortedKeys(st.Local.AcceptErrors) {
		e.counter(d.acceptErrors, float64(st.Local.AcceptErrors[name]), name)
	}
	for _, name := range sortedKeys(st.Local.Handoffs) {
		e.counter(d.handoffs, float64(st.Local.Handoffs[name]), name)
	}
}

func (c *Collector) process(e emitter, st *view.Status) {
	d := c.d
	e.gauge(d.up, 1)
	e.gauge(d.ready, b2f(st.Ready))
	e.gauge(d.draining, b2f(st.Draining))
	e.gauge(d.buildInfo, 1, st.Version)
	e.gauge(d.configInfo, 1, st.ConfigHash)
	e.counter(d.reloads, float64(st.Reloads.OK), "success")
	e.counter(d.reloads, float64(st.Reloads.Failed), "failure")
	e.gauge(d.lastReloadOK, b2f(st.Reloads.LastErr == ""))
	// Before any reload, the config in force is the one loaded at start.
	e.timestamp(d.lastReloadTime, orStart(st.Reloads.Last, st.Started))
}

func (c *Collector) route(e emitter, r *view.Route, started time.Time) {
	d := c.d
	for _, class := range sortedKeys(r.Requests) {
		e.counter(d.requests, float64(r.Requests[class]), r.Name, class)
	}
	e.histogram(d.duration, r.Duration, r.Name)
	e.gauge(d.routeInFlight, float64(r.InFlight), r.Name)
	e.gauge(d.routeDegraded, b2f(r.Degraded), r.Name)
	serving := r.Serving
	if serving == "" {
		serving = view.ServingNormal
	}
	for _, mode := range withExtra(view.ServingModes[:], serving) {
		e.gauge(d.routeServing, b2f(mode == serving), r.Name, mode)
	}
	e.timestamp(d.routeServingSince, orStart(r.ServingSince, started), r.Name)
	for _, kind := range withKeys(view.AnswerKinds[:], r.Answers) {
		e.counter(d.answers, float64(r.Answers[kind]), r.Name, kind)
	}
	if r.Mirror != nil {
		for _, res := range sortedKeys(r.Mirror) {
			e.counter(d.mirrored, float64(r.Mirror[res]), r.Name, res)
		}
	}
	// A route without a cache has no cache results; zeros would suggest
	// it has one that is never hit.
	if r.Cache != nil {
		for _, res := range withKeys(cacheResults, r.Cache) {
			e.counter(d.cacheResults, float64(r.Cache[res]), r.Name, res)
		}
	}
	e.counter(d.originRequests, float64(r.OriginRequests), r.Name)
	e.counter(d.originErrors, float64(r.OriginErrors), r.Name)
	e.counter(d.originHidden, float64(r.HiddenErrors), r.Name)
}

func (c *Collector) pool(e emitter, p *view.Pool, rt *view.Retries, started time.Time) {
	d := c.d
	e.gauge(d.poolHosts, float64(len(p.Hosts)), p.Name)
	e.gauge(d.poolAvailable, float64(p.Available), p.Name)
	e.gauge(d.poolEmpty, b2f(p.Empty), p.Name)
	e.counter(d.poolEmptySecs, p.EmptySecs, p.Name)
	e.gauge(d.poolPanic, b2f(p.Panic), p.Name)
	e.gauge(d.poolFailing, b2f(p.Failing), p.Name)
	e.counter(d.retries, float64(rt.Made[p.Name]), p.Name)
	e.counter(d.retriesRefused, float64(rt.Refused[p.Name]), p.Name)
	classes := make([]string, 0, len(outcome.All()))
	for _, cl := range outcome.All() {
		classes = append(classes, cl.String())
	}
	for i := range p.Hosts {
		h := &p.Hosts[i]
		for _, cl := range withKeys(classes, h.Attempts) {
			e.counter(d.attempts, float64(h.Attempts[cl]), p.Name, h.Addr, cl)
		}
		for _, s := range withExtra(hostStates, h.State) {
			e.gauge(d.hostState, b2f(s == h.State), p.Name, h.Addr, s)
		}
		e.timestamp(d.hostStateSince, orStart(h.Since, started), p.Name, h.Addr)
		e.gauge(d.hostInFlight, float64(h.InFlight), p.Name, h.Addr)
		e.counter(d.hostEjections, float64(h.Ejections), p.Name, h.Addr)
		if h.Name != "" {
			e.gauge(d.hostInfo, 1, p.Name, h.Addr, h.Name)
		}
		if !h.LastCheck.IsZero() {
			e.gauge(d.hostCheckOK, b2f(h.LastCheckOK), p.Name, h.Addr)
		}
		e.histogram(d.headerTime, h.HeaderTime, p.Name, h.Addr)
		e.counter(d.bytesReceived, float64(h.BytesReceived), p.Name, h.Addr)
		e.counter(d.bytesSent, float64(h.BytesSent), p.Name, h.Addr)
	}
}

func (c *Collector) attribution(e emitter, st *view.Status) {
	d := c.d
	for _, a := range withKeys(attributions, st.Attributed) {
		e.counter(d.attributed, float64(st.Attributed[a]), a)
	}
	// Clients are counted, never labelled: a label per client key would
	// let any client grow the series count without bound.
	shed := 0
	for _, cl := range st.Clients {
		if cl.Shed {
			shed++
		}
	}
	e.gauge(d.attributedClients, float64(len(st.Clients)))
	e.gauge(d.shedClients, float64(shed))
}

func (c *Collector) sinks(e emitter, st *view.Status) {
	d := c.d
	for _, w := range st.Webhooks {
		e.counter(d.whSent, float64(w.Sent), w.Name)
		e.counter(d.whFailed, float64(w.Failed), w.Name)
		e.counter(d.whDropped, float64(w.Dropped), w.Name)
		e.counter(d.whRetries, float64(w.Retries), w.Name)
		e.gauge(d.whQueue, float64(w.Queued), w.Name)
	}
	if st.AccessLog.Enabled {
		e.counter(d.accessRecords, float64(st.AccessLog.Written), "written")
		e.counter(d.accessRecords, float64(st.AccessLog.Dropped), "dropped")
		e.counter(d.accessErrors, float64(st.AccessLog.Errors))
	}
	for _, c := range st.Certificates {
		e.timestamp(d.certExpiry, c.NotAfter, c.Listener, c.Names, c.Source)
	}
	for _, r := range st.Access.RateLimits {
		for result, n := range r.Decisions {
			e.counter(d.rateDecisions, float64(n), r.Route, r.Zone, r.Key, result)
		}
	}
	for _, z := range st.Access.Zones {
		e.gauge(d.rateKeys, float64(z.Keys), z.Zone)
		e.gauge(d.rateSize, float64(z.Size), z.Zone)
		e.counter(d.rateEvicted, float64(z.Evicted), z.Zone)
		if z.Shared {
			e.gauge(d.rateSharedUp, b2f(z.SharedUp), z.Zone)
		}
	}
	for _, c := range st.Access.ConnLimits {
		e.counter(d.connDecisions, float64(c.Passed), c.Route, c.Zone, c.Key, "passed")
		e.counter(d.connDecisions, float64(c.Rejected), c.Route, c.Zone, c.Key, "rejected")
	}
	for _, a := range st.Access.Auth {
		for result, n := range a.Results {
			e.counter(d.authResults, float64(n), a.Route, a.Kind, result)
		}
	}
	edge := map[string]uint64{"denied": st.Edge.Denied, "rejected": st.Edge.Rejected, "reencoded": st.Edge.Reencoded, "normalized": st.Edge.Normalized}
	for _, dec := range edgeDecisions {
		e.counter(d.edge, float64(edge[dec]), dec)
	}
	for name, n := range st.Panics {
		e.counter(d.panics, float64(n), name)
	}
}

// emitter sends const metrics. Label values come from the snapshot, so a
// malformed one (e.g. histogram bounds and counts of different lengths)
// becomes an invalid metric that the HTTP handler reports, instead of a
// panic in a scrape.
type emitter struct{ ch chan<- prometheus.Metric }

func (e emitter) send(m prometheus.Metric, err error, d *prometheus.Desc) {
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	e.ch <- m
}

func (e emitter) counter(d *prometheus.Desc, v float64, labels ...string) {
	m, err := prometheus.NewConstMetric(d, prometheus.CounterValue, v, labels...)
	e.send(m, err, d)
}

func (e emitter) gauge(d *prometheus.Desc, v float64, labels ...string) {
	m, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, v, labels...)
	e.send(m, err, d)
}

// timestamp emits t as Unix seconds, or nothing when t is unset (a zero
// would read as "since 1970").
func (e emitter) timestamp(d *prometheus.Desc, t time.Time, labels ...string) {
	if t.IsZero() {
		return
	}
	e.gauge(d, float64(t.UnixNano())/1e9, labels...)
}

func (e emitter) histogram(d *prometheus.Desc, h view.Histogram, labels ...string) {
	if len(h.Bounds) != len(h.Counts) {
		e.send(nil, fmt.Errorf("histogram has %d bounds but %d counts", len(h.Bounds), len(h.Counts)), d)
		return
	}
	buckets := make(map[float64]uint64, len(h.Bounds))
	for i, b := range h.Bounds {
		buckets[b] = h.Counts[i]
	}
	m, err := prometheus.NewConstHistogram(d, h.Count, h.Sum, buckets, labels...)
	e.send(m, err, d)
}

// orStart returns t, or the process start when t is unset: a route that
// never changed how it answers has answered that way since the start, and
// a host that never changed state has been in it since then. Without this
// the series would be absent until the first change, and an alert on
// "time() - since" or a dashboard panel would see nothing.
func orStart(t, started time.Time) time.Time {
	if t.IsZero() {
		return started
	}
	return t
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// withKeys returns known followed by the keys of m not in known, sorted.
func withKeys[V any](known []string, m map[string]V) []string {
	out := slices.Clone(known)
	for _, k := range sortedKeys(m) {
		if !slices.Contains(known, k) {
			out = append(out, k)
		}
	}
	return out
}

// withExtra returns known plus v when v is not among them and not empty.
func withExtra(known []string, v string) []string {
	if v == "" || slices.Contains(known, v) {
		return known
	}
	return append(slices.Clone(known), v)
}
