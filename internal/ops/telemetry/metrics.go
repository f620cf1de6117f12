package telemetry

import "github.com/prometheus/client_golang/prometheus"

// Known label values that are always emitted, zero or not, so that rate()
// and absent-series alerts work from the first scrape instead of from the
// first occurrence. Values outside these lists (a newer producer) are
// emitted too; the lists only add zeros.
var (
	cacheResults  = []string{"hit", "miss", "stale", "bypass", "revalidated"}
	attributions  = []string{"host", "client", "request", "route"}
	edgeDecisions = []string{"denied", "rejected", "reencoded", "normalized"}
)

// descs holds one *prometheus.Desc per metric. Each label set is bounded
// by the config (routes, pools, hosts, webhooks) or by a fixed list
// (outcome classes, states, status classes); no label ever holds a client
// key, a path or anything else a client chooses.
type descs struct {
	up, ready, draining, buildInfo, configInfo                       *prometheus.Desc
	reloads, lastReloadOK, lastReloadTime                            *prometheus.Desc
	requests, duration, routeInFlight, routeDegraded                 *prometheus.Desc
	routeServing, routeServingSince, answers                         *prometheus.Desc
	cacheResults, originRequests, originErrors, originHidden         *prometheus.Desc
	mirrored                                                         *prometheus.Desc
	attempts, hostState, hostStateSince, hostInFlight, hostEjections *prometheus.Desc
	hostCheckOK, headerTime, bytesReceived, bytesSent                *prometheus.Desc
	poolHosts, poolAvailable, poolEmpty, poolEmptySecs, poolPanic    *prometheus.Desc
	poolFailing, hostInfo                                            *prometheus.Desc
	retries, retriesRefused                                          *prometheus.Desc
	attributed, attributedClients, shedClients                       *prometheus.Desc
	whSent, whFailed, whDropped, whRetries, whQueue                  *prometheus.Desc
	accessRecords, accessErrors                                      *prometheus.Desc
	panics, certExpiry, edge                                         *prometheus.Desc
	rateDecisions, rateKeys, rateSize, rateEvicted, rateSharedUp     *prometheus.Desc
	connDecisions, authResults                                       *prometheus.Desc
	edgeDecisions, localErrors, localExhausted, acceptErrors         *prometheus.Desc
	handoffs                                                         *prometheus.Desc
}

func newDescs() *descs {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("sturdy_"+name, help, labels, nil)
	}
	return &descs{
		up:             d("up", "1 while the process serves; present so that absent(sturdy_up) catches a dead instance."),
		ready:          d("ready", "1 when /readyz answers 200, 0 when it answers 503."),
		draining:       d("draining", "1 once shutdown has begun and in-flight requests are finishing."),
		buildInfo:      d("build_info", "Always 1; the running version as a label.", "version"),
		configInfo:     d("config_info", "Always 1; the hash of the loaded config file as a label.", "hash"),
		reloads:        d("config_reloads_total", "Config reloads by result (success, failure).", "result"),
		lastReloadOK:   d("config_last_reload_successful", "1 when the last reload was applied (or none was tried), 0 when it was refused."),
		lastReloadTime: d("config_last_reload_timestamp_seconds", "Unix time of the last reload attempt."),

		requests:          d("requests_total", "Requests answered, by route and status class (1xx..5xx, 499 = client went away).", "route", "code_class"),
		duration:          d("request_duration_seconds", "Time from receiving a request to the end of its answer, by route.", "route"),
		routeInFlight:     d("route_in_flight_requests", "Requests of the route being answered now.", "route"),
		routeDegraded:     d("route_degraded", "1 while failures are attributed to the route itself (e.g. timeouts on one path across hosts).", "route"),
		routeServing:      d("route_serving", "1 for the way the route answers now: normal, panic, fallback, stale or sorry.", "route", "mode"),
		routeServingSince: d("route_serving_since_timestamp_seconds", "Unix time the route started answering the way route_serving shows.", "route"),
		answers:           d("degraded_answers_total", "Requests answered by a degraded path: panic routing, fallback pool, stale copy, sorry page, or shed by a limit.", "route", "kind"),
		mirrored:          d("mirrored_requests_total", "Copies of the route's requests sent to its mirror pool, by result: sent, failed, dropped (max_in_flight), skipped (body above max_body).", "route", "result"),
		cacheResults:      d("cache_results_total", "Cache lookups by result (hit, miss, stale, bypass, revalidated).", "route", "result"),
		originRequests:    d("origin_requests_total", "Origin fetches made for the cache, including background revalidations.", "route"),
		originErrors:      d("origin_errors_total", "Origin fetches that failed, whether or not a stale answer hid the failure from the client.", "route"),
		originHidden:      d("origin_errors_hidden_by_stale_total", "Origin failures the client never saw because a stale copy was served instead.", "route"),

		attempts:       d("upstream_attempts_total", "Upstream attempts by pool, host and outcome class (ok, connect_refused, status_5xx, ...).", "pool", "host", "outcome"),
		hostState:      d("host_state", "1 for the host's current state (healthy, suspect, ejected, down, drained, maintenance), 0 for the others.", "pool", "host", "state"),
		hostStateSince: d("host_state_since_timestamp_seconds", "Unix time the host entered its current state.", "pool", "host"),
		hostInFlight:   d("host_in_flight_requests", "Requests in flight to the host.", "pool", "host"),
		hostEjections:  d("host_ejections_total", "Times the host was ejected on passive evidence.", "pool", "host"),
		hostCheckOK:    d("host_last_check_success", "1 when the host's last active check passed, 0 when it failed; absent without active checks.", "pool", "host"),
		headerTime:     d("upstream_header_duration_seconds", "Time from sending a request to the host to its response headers, for attempts that got a response (any status).", "pool", "host"),
		bytesReceived:  d("upstream_received_bytes_total", "Response body bytes read from the host (upgraded connections not counted).", "pool", "host"),
		bytesSent:      d("upstream_sent_bytes_total", "Request body bytes sent to the host (upgraded connections not counted).", "pool", "host"),

		poolHosts:     d("pool_hosts", "Hosts configured in the pool.", "pool"),
		poolAvailable: d("pool_available_hosts", "Hosts of the pool that take new requests.", "pool"),
		poolEmpty:     d("pool_empty", "1 while the pool has no available host.", "pool"),
		poolEmptySecs: d("pool_empty_seconds_total", "Seconds the pool has spent empty, cumulative.", "pool"),
		poolPanic:     d("pool_panic", "1 while the pool routes to passively ejected hosts because none is left.", "pool"),
		poolFailing:   d("pool_failing", "1 while every host of the pool fails everything and the empty-pool chain answers (one trial request per host now and then).", "pool"),
		hostInfo:      d("host_info", "1 for each host that came from a DNS name or SRV record: its address (host) and the name it came from.", "pool", "host", "name"),

		retries:        d("retries_total", "Retries made on another host, by pool.", "pool"),
		retriesRefused: d("retry_budget_refused_total", "Retries the retry budget refused, by pool.", "pool"),

		attributed:        d("attributed_failures_total", "Failed attempts by whom they were attributed to: host, client, request or route.", "attribution"),
		attributedClients: d("attributed_clients", "Clients whose failures are currently attributed to themselves (the keys are on the status page, never labels)."),
		shedClients:       d("shed_clients", "Attributed clients whose requests are currently refused at the edge."),

		whSent:    d("webhook_events_sent_total", "Events delivered to the webhook.", "webhook"),
		whFailed:  d("webhook_events_failed_total", "Events given up on after retries or refused by the receiver.", "webhook"),
		whDropped: d("webhook_events_dropped_total", "Events never sent: the webhook's queue was full, or sturdy stopped first.", "webhook"),
		whRetries: d("webhook_retries_total", "Delivery attempts after the first.", "webhook"),
		whQueue:   d("webhook_queue_length", "Events waiting to be sent.", "webhook"),

		accessRecords:  d("access_log_records_total", "Access log records by result (written, dropped because the writer fell behind).", "result"),
		accessErrors:   d("access_log_write_errors_total", "Access log write errors."),
		certExpiry:     d("tls_certificate_expiry_timestamp_seconds", "Unix time a served certificate stops being valid, by listener, names and source (file or acme).", "listener", "names", "source"),
		edgeDecisions:  d("edge_decisions_total", "Decisions about requests that no backend made, by decision (denied, rewritten, rejected, client_fault) and reason (deny_list, reencoded, encoded_slash, loop, malformed_body, body_timeout, send_timeout, ambiguous_framing, ...); never charged to a backend.", "decision", "reason"),
		localErrors:    d("local_errors_total", "Failures on sturdy's own limits (never a backend's), by operation (upstream, accept) and resource (file_descriptors, socket_buffers, memory, local_ports).", "op", "resource"),
		localExhausted: d("resources_exhausted", "1 while sturdy is out of its own resources (a local failure in the last 10s)."),
		acceptErrors:   d("listener_accept_errors_total", "Failed accepts on the listener's socket, whatever the cause.", "listener"),
		handoffs:       d("listener_frontend_handoffs_total", "Connections a frontend: native listener handed to net/http's server, for a request the native server does not read itself (chunked, Expect, Upgrade, h2c, malformed).", "listener"),
		rateDecisions:  d("rate_limit_decisions_total", "Rate-limit decisions by route, zone, key kind and result (allowed, delayed, rejected, strict, no_key, untracked, fallback).", "route", "zone", "key", "result"),
		rateKeys:       d("rate_limit_zone_keys", "Keys a rate-limit zone remembers now.", "zone"),
		rateSize:       d("rate_limit_zone_size", "Keys a rate-limit zone can remember (its table size).", "zone"),
		rateEvicted:    d("rate_limit_zone_evictions_total", "Idle keys a full rate-limit zone forgot to make room.", "zone"),
		rateSharedUp:   d("rate_limit_zone_shared_up", "1 while a shared zone uses the shared store, 0 while it falls back to local buckets.", "zone"),
		connDecisions:  d("conn_limit_decisions_total", "Concurrency-limit decisions by route, zone, key kind and result (passed, rejected).", "route", "zone", "key", "result"),
		authResults:    d("auth_results_total", "Basic and forward auth answers by route, kind and result.", "route", "kind", "result"),
		panics:         d("component_panics_total", "Panics recovered in a background component (which then restarted): a bug in sturdy, always worth a report.", "component"),
		edge:           d("edge_requests_total", "Requests the edge refused or rewrote before any backend was asked: denied (403, deny list), rejected (400, malformed target), reencoded (raw non-ASCII bytes percent-encoded), normalized (dot segments resolved).", "decision"),
	}
}

func (d *descs) all() []*prometheus.Desc {
	return []*prometheus.Desc{
		d.up, d.ready, d.draining, d.buildInfo, d.configInfo, d.reloads, d.lastReloadOK, d.lastReloadTime,
		d.requests, d.duration, d.routeInFlight, d.routeDegraded, d.routeServing, d.routeServingSince, d.answers,
		d.cacheResults, d.originRequests, d.originErrors, d.originHidden, d.mirrored,
		d.attempts, d.hostState, d.hostStateSince, d.hostInFlight, d.hostEjections, d.hostCheckOK,
		d.headerTime, d.bytesReceived, d.bytesSent,
		d.poolHosts, d.poolAvailable, d.poolEmpty, d.poolEmptySecs, d.poolPanic, d.poolFailing, d.hostInfo,
		d.retries, d.retriesRefused, d.attributed, d.attributedClients, d.shedClients,
		d.whSent, d.whFailed, d.whDropped, d.whRetries, d.whQueue,
		d.accessRecords, d.accessErrors, d.panics, d.certExpiry, d.edge,
		d.rateDecisions, d.rateKeys, d.rateSize, d.rateEvicted, d.rateSharedUp, d.connDecisions, d.authResults,
		d.edgeDecisions, d.localErrors, d.localExhausted, d.acceptErrors, d.handoffs,
	}
}
