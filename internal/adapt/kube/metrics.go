package kube

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

type gwParent = gwv1.RouteParentStatus

// metrics are the controller's own counters, served on /metrics beside
// the proxy's (server.WithCollector), named as the proxy's are
// (sturdy_..., _total, _timestamp_seconds).
type metrics struct {
	leader      atomic.Bool
	leaderships atomic.Uint64

	mu     sync.Mutex // guards writes and syncs
	writes map[[2]string]uint64
	syncs  map[string]uint64
}

var (
	mObjects      = prometheus.NewDesc("sturdy_kubernetes_objects", "Objects of sturdy's classes in the last translation, by kind and state: served (translated and applied), or refused (not accepted, left out, or not programmed; their status says why).", []string{"kind", "state"}, nil)
	mSyncs        = prometheus.NewDesc("sturdy_kubernetes_syncs_total", "Translations of the caches, by result: applied, unchanged (nothing that serves changed), refused (the previous config keeps serving).", []string{"result"}, nil)
	mLastSync     = prometheus.NewDesc("sturdy_kubernetes_last_sync_timestamp_seconds", "Unix time of the last translation that was applied or found unchanged; absent before the first.", nil, nil)
	mWrites       = prometheus.NewDesc("sturdy_kubernetes_status_writes_total", "Status writes (and Events posted) by this replica, by kind and result (success, failure).", []string{"kind", "result"}, nil)
	mLeader       = prometheus.NewDesc("sturdy_kubernetes_status_leader", "1 while this replica holds the Lease and writes status.", nil, nil)
	mLeaderships  = prometheus.NewDesc("sturdy_kubernetes_status_leaderships_total", "Times this replica took the Lease.", nil, nil)
	objectKinds   = []string{"Gateway", "HTTPRoute", "GRPCRoute", "Ingress"}
	syncResults   = []string{"applied", "unchanged", "refused"}
	writeKinds    = []string{"GatewayClass", "Gateway", "HTTPRoute", "GRPCRoute", "Ingress", "Event"}
	writeResults  = []string{"success", "failure"}
	controllerSet = []*prometheus.Desc{mObjects, mSyncs, mLastSync, mWrites, mLeader, mLeaderships}
)

func (m *metrics) wrote(kind string, err error) {
	r := "success"
	if err != nil {
		r = "failure"
	}
	m.mu.Lock()
	if m.writes == nil {
		m.writes = map[[2]string]uint64{}
	}
	m.writes[[2]string{kind, r}]++
	m.mu.Unlock()
}

func (m *metrics) synced(result string) {
	m.mu.Lock()
	if m.syncs == nil {
		m.syncs = map[string]uint64{}
	}
	m.syncs[result]++
	m.mu.Unlock()
}

// Describe is prometheus.Collector's.
func (c *Controller) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range controllerSet {
		ch <- d
	}
}

// Collect is prometheus.Collector's: every known label value is sent,
// zero or not, so that rate() works from the first scrape.
func (c *Controller) Collect(ch chan<- prometheus.Metric) {
	m := &c.m
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(mLeader, b2f(m.leader.Load()))
	counter(mLeaderships, m.leaderships.Load())
	m.mu.Lock()
	for _, r := range syncResults {
		counter(mSyncs, m.syncs[r], r)
	}
	for _, k := range writeKinds {
		for _, r := range writeResults {
			counter(mWrites, m.writes[[2]string{k, r}], k, r)
		}
	}
	m.mu.Unlock()
	o := c.latest()
	if o == nil {
		return
	}
	if !o.synced.IsZero() {
		gauge(mLastSync, float64(o.synced.UnixNano())/1e9)
	}
	served, refused := objectCounts(o)
	for _, k := range objectKinds {
		gauge(mObjects, float64(served[k]), k, "served")
		gauge(mObjects, float64(refused[k]), k, "refused")
	}
}

// objectCounts counts the objects of one translation as served or
// refused: a Gateway by its Programmed condition, a route by whether any
// parent accepted it, an Ingress by whether it was translated. When the
// config was refused, nothing of it serves.
func objectCounts(o *outcome) (served, refused map[string]int) {
	served, refused = map[string]int{}, map[string]int{}
	count := func(kind string, ok bool) {
		if ok && o.applyErr == nil {
			served[kind]++
		} else {
			refused[kind]++
		}
	}
	res := o.res
	for _, st := range res.Gateways {
		count("Gateway", hasTrue(st.Conditions, "Programmed"))
	}
	for _, st := range res.Routes {
		count("HTTPRoute", slices.ContainsFunc(st.Parents, func(p gwParent) bool { return hasTrue(p.Conditions, "Accepted") }))
	}
	for _, st := range res.GRPCRoutes {
		count("GRPCRoute", slices.ContainsFunc(st.Parents, func(p gwParent) bool { return hasTrue(p.Conditions, "Accepted") }))
	}
	for _, ir := range res.Ingresses {
		count("Ingress", ir.Served)
	}
	return served, refused
}

func hasTrue(cs []metav1.Condition, typ string) bool {
	return slices.ContainsFunc(cs, func(c metav1.Condition) bool { return c.Type == typ && c.Status == metav1.ConditionTrue })
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
