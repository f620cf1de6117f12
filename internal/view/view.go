// Package view is the read-only picture of a running sturdy that operators
// see: the status page, its JSON, and the Prometheus metrics are all
// rendered from one Status value, taken at request or scrape time. The
// types are plain data with no behaviour, so that the packages that own the
// state (server, health, proxy, cache) fill them and the packages that show
// it (status, telemetry) depend on nothing else. Judge (judge.go) holds
// the thresholds that call a route or a host a problem, so that every view
// judges alike.
package view

import (
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
)

// Status is one consistent snapshot.
type Status struct {
	Time       time.Time     `json:"time"`
	Started    time.Time     `json:"started"`
	Version    string        `json:"version"`
	ConfigFile string        `json:"config_file"`
	ConfigHash string        `json:"config_hash"`
	Ready      bool          `json:"ready"`
	NotReady   []string      `json:"not_ready,omitempty"` // reasons, when !Ready
	Draining   bool          `json:"draining"`
	Pools      []Pool        `json:"pools"`
	Routes     []Route       `json:"routes"`
	Clients    []Client      `json:"attributed_clients"`
	Events     []event.Event `json:"events"` // newest first
	Reloads    Reloads       `json:"reloads"`
	Attributed Attribution   `json:"attributed_failures"`
	Retries    Retries       `json:"retries"`
	// Webhooks reports each configured webhook's delivery counts (from
	// alert.Dispatcher.Stats).
	Webhooks []Webhook `json:"webhooks,omitempty"`
	// DNS reports each host name pools use, resolved in the background.
	DNS []DNSName `json:"dns,omitempty"`
	// AccessLog reports the access log's counts (from accesslog.Logger.Stats).
	AccessLog AccessLog `json:"access_log"`
	// Certificates are the certificates served, from files and from ACME.
	Certificates []Certificate `json:"certificates,omitempty"`
	// Access is what the access controls decided.
	Access Access `json:"access"`
	// Panics counts panics recovered per background component (see
	// internal/server/supervise); empty when there were none.
	Panics map[string]uint64 `json:"panics,omitempty"`
	// Edge counts what was decided about requests without any backend.
	Edge Edge `json:"edge"`
	// Local is sturdy's own resource exhaustion.
	Local Local `json:"local"`
	// Problems is what needs attention, one entry per cause, worst
	// first: what the status page lists under "Needs attention". The
	// status handler fills it from the rest of the snapshot
	// (internal/ops/status/problems.go).
	Problems []Problem `json:"problems"`
}

// Problem is one cause that needs attention: a failing host (once, however
// many pools it is in), a route failing for reasons of its own, or one
// fact about sturdy itself (a refused reload, an expiring certificate).
type Problem struct {
	// Level is critical when clients are failed or get degraded answers
	// (the sorry page, stale copies, the fallback pool, panic routing),
	// warning when something is broken but every client is served as
	// usual (a redundant host out), info for what is worth knowing
	// (a host an operator drained, attributed clients).
	Level string `json:"level"`
	// Kind is what the cause is: "host", "route", "readiness", "process",
	// "certificate", "dns", "reload", "webhook" or "clients"; Subject
	// names it (the host's address, the route's name, ...).
	Kind    string `json:"kind"`
	Subject string `json:"subject"`
	// Title says what is wrong in a few words, e.g. "Host 10.0.0.12:8080
	// is down".
	Title string `json:"title"`
	// Why says it for an operator: what it means and what to check.
	Why string `json:"why,omitempty"`
	// Detail is the evidence as recorded: counts, the last probe's
	// answer, an error's text.
	Detail string    `json:"detail,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	// Affects lists the pools and routes the cause reaches, each with
	// its own level (ok: still served as usual).
	Affects []Affected `json:"affects,omitempty"`
}

// Affected is one pool or route a problem reaches.
type Affected struct {
	Kind  string `json:"kind"` // "pool", "route" or "listener"
	Name  string `json:"name"`
	Level string `json:"level"`
	What  string `json:"what"` // e.g. "2 of 3 hosts in rotation"
}

// EdgeRoute is the route label of the answers given before any route was
// chosen (config refuses a route of that name).
const EdgeRoute = "_edge"

// Edge counts decisions about requests that no backend made, since start.
type Edge struct {
	// Requests counts answers given before any route was chosen (edge
	// refusals, loops, ambiguous framing, no route, redirects to HTTPS) by
	// status class "1xx".."5xx"; metrics show them as route "_edge".
	Requests map[string]uint64 `json:"requests"`
	// Decisions counts by kind ("denied", "rewritten", "rejected",
	// "client_fault") and reason (see internal/edge): e.g.
	// rejected/encoded_slash, client_fault/malformed_body.
	Decisions map[string]map[string]uint64 `json:"decisions"`
	// The status page's totals, from Decisions: denied (403 by the deny
	// list), rejected (400 for a malformed or ambiguous target),
	// reencoded (raw non-ASCII bytes percent-encoded, then forwarded),
	// normalized (dot segments resolved, then forwarded).
	Denied     uint64 `json:"denied"`
	Rejected   uint64 `json:"rejected"`
	Reencoded  uint64 `json:"reencoded"`
	Normalized uint64 `json:"normalized"`
}

// Local is sturdy's own resource exhaustion: failures no backend caused.
type Local struct {
	// Exhausted is set while an episode lasts (see internal/ops/exhaust).
	Exhausted bool      `json:"exhausted"`
	Since     time.Time `json:"since,omitzero"`
	// Failures counts by operation ("upstream", "accept") and resource
	// ("file_descriptors", "socket_buffers", "memory", "local_ports").
	Failures map[string]map[string]uint64 `json:"failures"`
	// AcceptErrors counts every failed accept per listener, exhaustion
	// or not.
	AcceptErrors map[string]uint64 `json:"accept_errors"`
	// Handoffs counts, per listener with frontend: native, the
	// connections its native server handed to net/http's (a request it
	// does not read itself: chunked, Expect, Upgrade, h2c, malformed).
	Handoffs map[string]uint64 `json:"frontend_handoffs,omitempty"`
	// FileLimit is the process's soft file-descriptor limit (0: unknown).
	FileLimit uint64 `json:"file_limit"`
}

// Verdict levels, from the thresholds in judge.go.
const (
	LevelOK       = "ok"
	LevelInfo     = "info" // problems only: worth knowing, nothing broken
	LevelWarning  = "warning"
	LevelCritical = "critical"
)

// Verdict is a judgement of recent figures: its level and, unless OK, why
// in words with the figures.
type Verdict struct {
	Level  string `json:"level"`
	Reason string `json:"reason,omitempty"`
}

// Host states.
const (
	Healthy     = "healthy"
	Suspect     = "suspect"
	Ejected     = "ejected"     // out on passive evidence, returns after a backoff
	Down        = "down"        // failed active checks
	Drained     = "drained"     // operator: finish in-flight, take no new requests
	Maintenance = "maintenance" // operator: out of rotation, checks paused
)

// Pool is one pool and its hosts.
type Pool struct {
	Name        string    `json:"name"`
	Balance     string    `json:"balance"`
	Hosts       []Host    `json:"hosts"`
	Available   int       `json:"available"`
	Empty       bool      `json:"empty"`
	EmptySince  time.Time `json:"empty_since,omitzero"`
	EmptySecs   float64   `json:"empty_seconds_total"`    // cumulative
	Panic       bool      `json:"panic"`                  // routing to passively ejected hosts because none is left
	ActiveCheck string    `json:"active_check,omitempty"` // e.g. "GET /healthz every 5s"
	// Failing: every host fails everything; the empty-pool chain answers,
	// with one trial request per host now and then.
	Failing      bool      `json:"failing"`
	FailingSince time.Time `json:"failing_since,omitzero"`
}

// Host is one backend.
type Host struct {
	Addr string `json:"addr"`
	// Name is the DNS name (and port) the address came from, when the
	// host was configured by name: each address of a name is a host.
	Name   string `json:"name,omitempty"`
	Weight int    `json:"weight"`
	State  string `json:"state"`
	// Since is when the host entered its state: for a host that never
	// changed state, when it was loaded (the start, or the reload that
	// added it).
	Since  time.Time `json:"since"`
	Reason string    `json:"reason,omitempty"` // why it is in this state, in words
	// Why is Reason for an operator, with what to check, as Needs
	// attention words it (internal/ops/status fills it; Reason and
	// Evidence are the recorded text).
	Why      string `json:"why,omitempty"`
	Evidence string `json:"evidence,omitempty"` // e.g. "12 of 40 requests failed (status_5xx) from 5 clients in 30s; peers 0%"
	InFlight int64  `json:"in_flight"`
	// Window figures (the passive window, e.g. the last 30s).
	WindowRequests uint64 `json:"window_requests"`
	WindowFailures uint64 `json:"window_failures"` // host-attributed only
	Ejections      uint64 `json:"ejections"`       // total times ejected
	// Attempts counts every upstream attempt by outcome class name (ok,
	// connect_refused, ..., see internal/outcome), since start.
	Attempts map[string]uint64 `json:"attempts"`
	// Recent counts the last minute's attempts, whoever their failures
	// were attributed to.
	Recent HostRecent `json:"recent"`
	// Verdict judges Recent against the pool's other hosts (judge.go);
	// the host's state is judged apart.
	Verdict Verdict `json:"verdict"`
	// HeaderTime is the time from sending a request to the host to its
	// response headers, for attempts that got a response (any status),
	// since start.
	HeaderTime Histogram `json:"response_header_time"`
	// BytesReceived and BytesSent count body bytes: of responses read
	// from the host and of requests sent to it, since start. Upgraded
	// connections (WebSocket) are not counted.
	BytesReceived uint64 `json:"bytes_received"`
	BytesSent     uint64 `json:"bytes_sent"`
	// LastCheck is the last active check, if the pool has them.
	LastCheck   time.Time `json:"last_check,omitzero"`
	LastCheckOK bool      `json:"last_check_ok"`
	CheckDetail string    `json:"check_detail,omitempty"`
}

// Route is one route and how it is answering.
type Route struct {
	Name     string `json:"name"`
	Pool     string `json:"pool"`
	Default  bool   `json:"default"`
	Degraded bool   `json:"degraded"` // failures attributed to this route
	// DegradedReason explains Degraded, e.g. "response_timeout on 2 hosts".
	DegradedReason string    `json:"degraded_reason,omitempty"`
	DegradedSince  time.Time `json:"degraded_since,omitzero"`
	// Serving is how the route answers right now: one of ServingModes.
	Serving      string    `json:"serving"`
	ServingSince time.Time `json:"serving_since,omitzero"`
	InFlight     int64     `json:"in_flight"`
	// Requests counts answers by status class: "1xx".."5xx" and "499"
	// (client went away), since start.
	Requests map[string]uint64 `json:"requests"`
	// ClientErrors counts the 5xx answers (among Requests["5xx"]) whose
	// failures were attributed to the client itself, since start.
	ClientErrors uint64 `json:"5xx_to_attributed_clients"`
	// Recent counts the last minute's answers.
	Recent RouteRecent `json:"recent"`
	// Verdict judges Recent: is the route failing its clients now
	// (judge.go)?
	Verdict Verdict `json:"verdict"`
	// Duration is the request duration histogram, since start.
	Duration Histogram `json:"duration"`
	// Answers counts requests answered by each degraded path, by the
	// names of AnswerKinds, since start.
	Answers map[string]uint64 `json:"answers"`
	// Cache counts cache results: "hit", "miss", "stale", "bypass",
	// "revalidated"; OriginErrors counts origin failures on cached routes,
	// including those a stale answer hid.
	Cache map[string]uint64 `json:"cache,omitempty"`
	// OriginRequests counts fetches from the origin made on behalf of the
	// cache (including background revalidations): the denominator of the
	// origin error ratio.
	OriginRequests uint64 `json:"origin_requests"`
	OriginErrors   uint64 `json:"origin_errors"`
	HiddenErrors   uint64 `json:"origin_errors_hidden_by_stale"`
	// Mirror counts the route's mirrored copies by result: "sent",
	// "failed", "dropped" (max_in_flight), "skipped" (body too large);
	// only on routes that mirror.
	Mirror map[string]uint64 `json:"mirror,omitempty"`
}

// The ways a route answers now (Route.Serving): its pool; hosts out on
// passive evidence, tried anyway; the fallback pool; stale copies from the
// cache; the route's own answer (sorry page or error).
const (
	ServingNormal   = "normal"
	ServingPanic    = "panic"
	ServingFallback = "fallback"
	ServingStale    = "stale"
	ServingSorry    = "sorry"
)

// ServingModes are Route.Serving's values, in the order metrics list them.
var ServingModes = [...]string{ServingNormal, ServingPanic, ServingFallback, ServingStale, ServingSorry}

// AnswerKinds name the degraded paths a request can be answered by (the
// keys of Route.Answers), in the order of the proxy's Answer constants:
// panic routing, the fallback pool, a stale copy, the sorry page, shed at
// once (a limit was full or the client is shed).
var AnswerKinds = [...]string{"panic", "fallback", "stale", "sorry", "shed"}

// RouteRecent is a route's answers over the last minute or so.
type RouteRecent struct {
	// Seconds is the span the counts cover: about 60, less right after
	// start.
	Seconds float64 `json:"seconds"`
	// Requests counts answers by status class, as Route.Requests.
	Requests map[string]uint64 `json:"requests"`
	// ClientErrors counts the 5xx answers (among Requests["5xx"]) whose
	// failures were attributed to the client itself, such as a scanner
	// a WAF refuses: the route is not failing those clients.
	ClientErrors uint64 `json:"5xx_to_attributed_clients"`
	// ErrorRatio is the share of answers that were 5xx, as the clients
	// got them (ClientErrors included; the verdict weighs those apart);
	// 0 without answers.
	ErrorRatio float64 `json:"error_ratio"`
}

// HostRecent is a host's attempts over the last minute or so.
type HostRecent struct {
	Seconds  float64 `json:"seconds"`
	Attempts uint64  `json:"attempts"`
	// Failures counts attempts that did not succeed (any outcome but ok
	// and client_cancel), whoever they were attributed to.
	Failures uint64 `json:"failures"`
	// FailureRatio is Failures / Attempts; 0 without attempts.
	FailureRatio float64 `json:"failure_ratio"`
}

// Histogram is cumulative like Prometheus: Counts[i] is the number of
// observations <= Bounds[i] (seconds); Count and Sum cover all.
type Histogram struct {
	Bounds []float64 `json:"bounds"`
	Counts []uint64  `json:"counts"`
	Count  uint64    `json:"count"`
	Sum    float64   `json:"sum"`
}

// Client is a client key whose failures are attributed to itself.
type Client struct {
	Key      string    `json:"key"` // e.g. the client IP; never a metrics label
	Since    time.Time `json:"since"`
	Evidence string    `json:"evidence"`
	Shed     bool      `json:"shed"` // its requests are refused at the edge
}

// Attribution counts failed attempts by whom they were attributed to:
// "host", "client", "request", "route", since start.
type Attribution map[string]uint64

// Retries counts retries made and refused by the retry budget, per pool.
type Retries struct {
	Made    map[string]uint64 `json:"made"`
	Refused map[string]uint64 `json:"refused_by_budget"`
}

// Reloads counts config reloads.
type Reloads struct {
	OK      uint64    `json:"ok"`
	Failed  uint64    `json:"failed"`
	Last    time.Time `json:"last,omitzero"`
	LastErr string    `json:"last_error,omitempty"`
}

// Webhook is one webhook's delivery counts, since start.
type Webhook struct {
	Name    string `json:"name"`
	Format  string `json:"format"`
	Queued  int    `json:"queued"`  // waiting to be sent now
	Sent    uint64 `json:"sent"`    // delivered (2xx)
	Failed  uint64 `json:"failed"`  // given up after retries or refused by the receiver
	Dropped uint64 `json:"dropped"` // not sent: the queue was full, or sturdy stopped first
	Retries uint64 `json:"retries"` // attempts after the first
	// LastError is the last delivery failure, "" when the last attempt
	// succeeded.
	LastError     string    `json:"last_error,omitempty"`
	LastErrorTime time.Time `json:"last_error_time,omitzero"`
}

// AccessLog is the access log's counts, since start.
type AccessLog struct {
	Enabled bool   `json:"enabled"`
	Written uint64 `json:"written"` // records written
	Dropped uint64 `json:"dropped"` // records dropped because the writer fell behind
	Errors  uint64 `json:"errors"`  // write errors (disk full, ...)
}

// DNSName is one backend host name and its last good addresses.
type DNSName struct {
	Name      string    `json:"name"`
	Addresses []string  `json:"addresses"`
	SRV       bool      `json:"srv,omitempty"`     // an SRV name: its addresses are target=ip:port
	Failing   bool      `json:"failing"`           // the last lookup failed; the addresses are the last good ones
	Expired   bool      `json:"expired,omitempty"` // failing for longer than dns.hold: no addresses left
	Failures  uint64    `json:"failures"`          // failed lookups since start
	LastOK    time.Time `json:"last_ok,omitzero"`
	LastError string    `json:"last_error,omitempty"`
}

// Certificate is one certificate sturdy serves.
type Certificate struct {
	// Listener serves it (an ACME certificate is listed once per listener
	// with tls.acme that serves its name).
	Listener string `json:"listener,omitempty"`
	// Names are its DNS names, comma-separated.
	Names     string    `json:"names"`
	NotBefore time.Time `json:"not_before"`
	NotAfter  time.Time `json:"not_after"`
	// Source is "file" or "acme".
	Source string `json:"source"`
	// State is "ok", "expiring" (docs/tls.md says when) or "expired".
	State string `json:"state"`
}

// Certificate states.
const (
	CertOK       = "ok"
	CertExpiring = "expiring"
	CertExpired  = "expired"
)

// Access is what the routes' access controls decided, since start.
type Access struct {
	// RateLimits counts rate-limit decisions per route and zone.
	RateLimits []RateLimit `json:"rate_limits,omitempty"`
	// Zones are the rate-limit zones' tables.
	Zones []RateZone `json:"rate_limit_zones,omitempty"`
	// ConnLimits counts concurrency-limit decisions per route and zone.
	ConnLimits []ConnLimit `json:"conn_limits,omitempty"`
	// Auth counts basic and forward auth answers per route.
	Auth []Auth `json:"auth,omitempty"`
}

// RateLimit is one route's decisions in one zone.
type RateLimit struct {
	Route, Zone, Key string
	// Decisions by result: allowed, delayed, rejected, strict (refused by
	// the stricter limit of an attributed client), no_key, untracked (a
	// new key on a full table), fallback (local buckets while the shared
	// store is down).
	Decisions map[string]uint64
}

// RateZone is one zone's table.
type RateZone struct {
	Zone, Key        string
	Keys, Size       int
	Evicted          uint64
	Shared, SharedUp bool
}

// ConnLimit is one route's concurrency decisions in one zone.
type ConnLimit struct {
	Route, Zone, Key string
	Passed, Rejected uint64
}

// Auth is one route's authentication answers by result.
type Auth struct {
	Route, Kind string // kind: basic or forward
	Results     map[string]uint64
}
