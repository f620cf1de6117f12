// Package config holds sturdy's configuration: plain structs, decoded strictly
// from YAML, defaulted and validated in one place (Load). Every error it
// returns names the file, the line and the key path, so that `sturdy check`
// can print `FILE:LINE: key.path: message`.
package config

import "time"

// Config is one complete, validated sturdy configuration.
type Config struct {
	// Admin is the operators' listener (status, metrics, runtime API).
	Admin Admin `yaml:"admin"`
	// Listeners accept client traffic. At least one is required.
	Listeners []Listener `yaml:"listeners"`
	// Routes map a request's Host and path to a pool. At least one is required.
	Routes []Route `yaml:"routes"`
	// Pools are groups of backend hosts. At least one is required.
	Pools []Pool `yaml:"pools"`
	// TrustedProxies lists the peers (CIDRs or single addresses) whose
	// X-Forwarded-* headers are believed. From anyone else those headers are
	// dropped and replaced. Default: none.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// ShutdownGrace is how long in-flight requests (and WebSockets) may
	// run once listeners stop accepting, before connections are closed.
	// Default 30s.
	ShutdownGrace Duration `yaml:"shutdown_grace"`
	// PIDFile, when set, is where sturdy writes its process id once it
	// serves (and, after a binary upgrade, the new process's): for
	// systemd's PIDFile= and `kill -USR2 $(cat FILE)`. Default: none.
	PIDFile string `yaml:"pid_file"`
	// ShutdownDelay is how long sturdy keeps accepting and serving after
	// SIGTERM while /readyz already answers 503, so that a load balancer
	// (or Kubernetes) stops sending traffic before the listeners close.
	// Default 0s: listeners close at once.
	ShutdownDelay Duration `yaml:"shutdown_delay"`
	// Log configures sturdy's own log (state changes, never one line per request).
	Log Log `yaml:"log"`
	// Attribution decides whether a failure is a client's, a route's, a
	// request's or a host's.
	Attribution Attribution `yaml:"attribution"`
	// Edge is request hygiene and the deny list.
	Edge Edge `yaml:"edge"`
	// ClientBodyTemp is where request bodies larger than a route's
	// buffer_request_body wait, whole, for a backend (faults.go).
	ClientBodyTemp ClientBodyTemp `yaml:"client_body_temp"`
	// Cache sizes the shared cache that routes opt into.
	Cache Cache `yaml:"cache"`
	// DNS is how host names in pools are resolved.
	DNS DNS `yaml:"dns"`
	// Webhooks receive events (state transitions).
	Webhooks []Webhook `yaml:"webhooks"`
	// ACME obtains certificates for listeners with tls.acme (tls.go).
	ACME *ACME `yaml:"acme"`
	// Zones for routes' rate_limit and conn_limit, and their shared store (access.go).
	RateLimitZones []RateLimitZone `yaml:"rate_limit_zones"` // nginx limit_req_zone (access.go)
	ConnLimitZones []ConnLimitZone `yaml:"conn_limit_zones"` // nginx limit_conn_zone (access.go)
	SharedLimits   *SharedLimits   `yaml:"shared_limits"`    // Redis for shared zones (access.go)
	// RequestID gives every request an id, unless its route says otherwise
	// (routing.go). Default: off.
	RequestID *RequestID `yaml:"request_id"`
	// Kubernetes, when set, adds the listeners, routes and pools that
	// Gateway API and Ingress objects describe (kubernetes.go).
	Kubernetes *Kubernetes `yaml:"kubernetes"`

	// File is the path the config was loaded from ("" when embedded).
	File string `yaml:"-"`
	// Hash identifies the loaded bytes (hex SHA-256 prefix).
	Hash string `yaml:"-"`

	lines map[string]int // key path -> line in File
}

// Admin is the admin listener.
type Admin struct {
	// Listen is host:port. Default 127.0.0.1:9901. "off" disables it.
	Listen string `yaml:"listen"`
	// Token guards state-changing endpoints (drain, reload) and is required
	// to listen on a non-loopback address. Default: none, which leaves the
	// runtime API refused.
	Token string `yaml:"token"`
	// ReadyRoutes lists the routes /readyz counts. Default: all routes.
	ReadyRoutes []string `yaml:"ready_routes"`
	// ExpiredCertificateNotReady makes /readyz answer 503 while a served
	// certificate is expired. Default false: an expired certificate is
	// usually the whole fleet's, and readiness would then take every
	// instance out at once (docs/tls.md).
	ExpiredCertificateNotReady bool `yaml:"expired_certificate_not_ready"`
}

// Webhook posts events to a URL.
type Webhook struct {
	// Name identifies the webhook in logs and metrics. Required, unique.
	Name string `yaml:"name"`
	// URL receives a POST per event. Required; http or https.
	URL string `yaml:"url"`
	// Format is "json" (default: the event as JSON), "slack" (a Slack
	// incoming-webhook message) or "alertmanager" (an Alertmanager v2 alert list).
	Format string `yaml:"format"`
	// Events filters by event type (see docs/observability.md). Default: all.
	Events []string `yaml:"events"`
	// Timeout bounds one delivery attempt. Default 5s.
	Timeout Duration `yaml:"timeout"`
}

// AccessLog is the optional per-request log, written in JSON lines through
// a buffer so that it never slows the request path.
type AccessLog struct {
	// Enabled turns the access log on. Default false.
	Enabled bool `yaml:"enabled"`
	// Path is the file to append to; "-" or "" means standard output.
	Path string `yaml:"path"`
	// Format is "json" (default: one JSON object per line) or "combined"
	// (nginx's and Apache's combined format).
	Format string `yaml:"format"`
	// Fields are the JSON fields, in order (docs/observability.md).
	// Default: the standard set.
	Fields []string `yaml:"fields"`
}

// Log configures the process log.
type Log struct {
	// Format is "text" (default) or "json".
	Format string `yaml:"format"`
	// Level is "debug", "info" (default), "warn" or "error".
	Level string `yaml:"level"`
	// Access is the optional access log.
	Access AccessLog `yaml:"access"`
	// AggregateInterval is how often repeated conditions (N requests answered
	// by a sorry page, ...) are summarised as one line. Default 10s.
	AggregateInterval Duration `yaml:"aggregate_interval"`
}

// Listener is one address that accepts client connections.
type Listener struct {
	// Name identifies the listener in routes, logs and metrics. Required, unique.
	Name string `yaml:"name"`
	// Listen is host:port. Required.
	Listen string `yaml:"listen"`
	// TLS, when set, makes the listener HTTPS with HTTP/2. Both files must
	// exist and hold a matching certificate and key.
	TLS *TLS `yaml:"tls"`
	// RedirectHTTPS answers every request with a redirect to HTTPS (tls.go).
	RedirectHTTPS *RedirectHTTPS `yaml:"redirect_https"`
	// ReadHeaderTimeout bounds how long a client may take to send request
	// headers. Default 10s.
	ReadHeaderTimeout Duration `yaml:"read_header_timeout"`
	// IdleTimeout closes idle keep-alive client connections. Default 75s.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// MaxHeaderBytes bounds the request line plus headers. Default 64KiB.
	MaxHeaderBytes Size `yaml:"max_header_bytes"`
	// Protocols beyond HTTP/1.1 and HTTPS with HTTP/2 (protocols.go).
	H2C           bool   `yaml:"h2c"`            // HTTP/2 with prior knowledge on a plain listener; default false
	ProxyProtocol string `yaml:"proxy_protocol"` // off (default), optional or required: PROXY v1/v2 from trusted_proxies
	// MergeSlashes merges repeated slashes in the path (//a///b is /a/b)
	// before routing, as nginx's merge_slashes on; the backend gets the
	// merged path. Default true; false routes and forwards runs of
	// slashes as sent (see MergesSlashes).
	MergeSlashes *bool  `yaml:"merge_slashes"`
	HTTP3        *HTTP3 `yaml:"http3"` // HTTP/3 over QUIC beside a TLS listener; default none
	// AllowUnderscoresInHeaders keeps request header fields whose names
	// hold "_" (X_Forwarded_For, x_auth_user). Default false: they are
	// dropped at the edge, before routing, access rules and forwarding, as
	// nginx's underscores_in_headers off, because a backend that maps "_"
	// to "-" (CGI, WSGI, Rack, PHP) cannot tell them from the fields
	// sturdy sets.
	AllowUnderscoresInHeaders bool `yaml:"allow_underscores_in_headers"`
	// Frontend picks the HTTP/1.1 server of a plain listener: native,
	// sturdy's own (internal/wire/h1), which hands anything unusual to
	// net/http's on the same connection, or net/http. Default: native on
	// Linux for a listener without tls or proxy_protocol, net/http
	// elsewhere.
	Frontend string `yaml:"frontend"`
}

// MergesSlashes reports whether the listener merges runs of slashes in
// the path: unless merge_slashes says false.
func (l *Listener) MergesSlashes() bool { return l.MergeSlashes == nil || *l.MergeSlashes }

// Route sends matching requests to a pool.
type Route struct {
	// Name identifies the route in logs, metrics and error bodies. Required, unique.
	Name string `yaml:"name"`
	// Listeners restricts the route to these listeners. Default: all.
	Listeners []string `yaml:"listeners"`
	// Hosts are exact names ("api.example.com") or one-level-or-deeper
	// wildcards ("*.example.com"), matched case-insensitively with the port
	// ignored. Empty means any host.
	Hosts []string `yaml:"hosts"`
	// Path is a prefix that must start with "/". Default "/". The longest
	// matching prefix wins among routes whose hosts match; match.path
	// offers exact, starts_with and regex paths (routing.go).
	Path string `yaml:"path"`
	// Default marks the route that answers requests whose Host matches no
	// route. At most one route may be the default.
	Default bool `yaml:"default"`
	// Pool names the pool that serves this route. Required, unless static
	// files answer every request (a try_files chain without @pool), the
	// route redirects or responds, or backends names several pools.
	Pool string `yaml:"pool"`
	// Timeouts bound each phase of a proxied request.
	Timeouts Timeouts `yaml:"timeouts"`
	// MaxBodyBytes bounds the request body; larger bodies get 413.
	// Default 10MiB; 0 after defaulting is impossible, use a large value to lift it.
	MaxBodyBytes Size `yaml:"max_body_bytes"`
	// BufferRequestBody is the largest request body read whole into
	// memory before a backend is chosen, so that a body that breaks is
	// answered 400 and no backend ever gets half a request; larger bodies
	// wait in client_body_temp, or stream without request_buffering
	// (faults.go). Default 64KiB; 0 streams every body.
	BufferRequestBody Size `yaml:"buffer_request_body"`
	// TrailingSlashRedirect makes a prefix route whose path ends in "/"
	// answer its path without the slash (GET /admin for /admin/) with 301
	// to the path with it, query kept, as nginx does for a prefix location
	// ending in "/", unless a route matches the path itself more closely
	// (docs/routing.md). Default true; false lets /admin take whatever
	// route it matches.
	TrailingSlashRedirect *bool `yaml:"trailing_slash_redirect"`
	// RequestBuffering reads bodies larger than buffer_request_body whole
	// too, into a file of client_body_temp, before a backend is chosen
	// (nginx's proxy_request_buffering). false streams them as they
	// arrive: for uploads a backend must see while they happen. Default
	// true.
	RequestBuffering bool `yaml:"request_buffering"`
	// AllowEncodedSlashes lets paths with %2F or %5C through, routed on
	// the decoded path and forwarded as sent (GitLab, npm scopes, RabbitMQ
	// vhosts). Default false: such paths get 400 (faults.go).
	AllowEncodedSlashes bool `yaml:"allow_encoded_slashes"`
	// Retry is the route's retry policy.
	Retry Retry `yaml:"retry"`
	// Fallback is where requests go while the route's pool is empty.
	Fallback Fallback `yaml:"fallback"`
	// Sorry is the last answer when nothing else can answer.
	Sorry Sorry `yaml:"sorry"`
	// Limits are the route's bulkheads.
	Limits Limits `yaml:"limits"`
	// Cache opts the route into the shared cache.
	Cache RouteCache `yaml:"cache"`
	// ClientCert is none (default) or required: a certificate verified against the listener's client_auth.ca, else 403.
	ClientCert string `yaml:"client_cert"`
	// Access control at the edge, before any upstream attempt (access.go).
	Methods []string `yaml:"methods"` // allowed methods, nginx limit_except (access.go)
	// MethodsStatus answers a method methods refuses: 405 (default, with Allow), 403 as nginx's
	// limit_except, or 444: the connection closed with no answer, as nginx's return 444.
	MethodsStatus int          `yaml:"methods_status"`
	Access        []AccessRule `yaml:"access"`       // allow/deny rules, first match wins (access.go)
	RateLimit     []RateLimit  `yaml:"rate_limit"`   // nginx limit_req (access.go)
	ConnLimit     []ConnLimit  `yaml:"conn_limit"`   // nginx limit_conn (access.go)
	BasicAuth     *BasicAuth   `yaml:"basic_auth"`   // nginx auth_basic (access.go)
	ForwardAuth   *ForwardAuth `yaml:"forward_auth"` // nginx auth_request (access.go)
	// Static serves the route from files (see static.go); default: none.
	Static *Static `yaml:"static"`
	// Compress compresses the route's responses; default: off.
	Compress *Compress `yaml:"compress"`
	// Routing a real site (routing.go, docs/routing.md); default: none.
	Match               *RouteMatch  `yaml:"match"`                 // method, header, query and exact/regex path conditions
	Redirect            *Redirect    `yaml:"redirect"`              // answer with a redirect, before any upstream
	Respond             *Respond     `yaml:"respond"`               // answer with a fixed status and body; no pool
	RequestHeaders      *HeaderRules `yaml:"request_headers"`       // set/add/remove on the way to the backend
	ResponseHeaders     *HeaderRules `yaml:"response_headers"`      // set/add/remove on every answer
	HideResponseHeaders []string     `yaml:"hide_response_headers"` // nginx proxy_hide_header
	HostHeader          string       `yaml:"host_header"`           // the Host the backend gets; default the client's
	// ForwardingHeaders lists which of sturdy's X-Forwarded-For,
	// X-Forwarded-Host, X-Forwarded-Proto and X-Real-IP the backend gets
	// (routing.go). Nil (not set): all four; [] none, as nginx sends none
	// unless proxy_set_header says so.
	ForwardingHeaders []string    `yaml:"forwarding_headers"`
	Rewrite           *Rewrite    `yaml:"rewrite"`     // the path the backend gets
	Backends          []Backend   `yaml:"backends"`    // several pools: weights, header or cookie
	Mirror            *Mirror     `yaml:"mirror"`      // copies of requests to another pool
	RequestID         *RequestID  `yaml:"request_id"`  // overrides the top-level request_id
	ErrorPages        []ErrorPage `yaml:"error_pages"` // nginx error_page + proxy_intercept_errors
	// Upgrades are the protocols a client may switch to through the route
	// (the Upgrade field, answered 101 by the backend). Default
	// [websocket]; [] allows none. h2c is never allowed (protocols.go).
	Upgrades []string `yaml:"upgrades"`
}

// Timeouts of a route.
type Timeouts struct {
	// Connect bounds dialing a backend. Default 5s.
	Connect Duration `yaml:"connect"`
	// ResponseHeader bounds the wait for the backend's response headers after
	// the request was sent. Default 30s.
	ResponseHeader Duration `yaml:"response_header"`
	// Total bounds the whole exchange including the response body. Default 0:
	// no limit, so that long downloads and event streams are not cut.
	Total Duration `yaml:"total"`
	// ClientBody bounds the wait between two reads of the request body
	// (nginx client_body_timeout): a client that stops sending is cut, a
	// slow one is not. Default 30s; 0s means no limit.
	ClientBody Duration `yaml:"client_body"`
	// ClientSend bounds the wait between two writes of the response to the
	// client (nginx send_timeout): a client that stops reading is cut and
	// the backend's connection released. Default 30s; 0s means no limit.
	ClientSend Duration `yaml:"client_send"`
}

// Pool is a group of interchangeable backend hosts.
type Pool struct {
	// Name identifies the pool. Required, unique.
	Name string `yaml:"name"`
	// Balance is round_robin (default, smooth weighted), least_conn,
	// random_two (power of two choices) or hash (consistent hashing).
	Balance string `yaml:"balance"`
	// HashKey selects what hash balancing hashes: "client_ip" (default),
	// "header:NAME" or "cookie:NAME". Only for balance: hash.
	HashKey string `yaml:"hash_key"`
	// Hosts are the backends. At least one is required.
	Hosts []Host `yaml:"hosts"`
	// MaxIdleConnsPerHost bounds kept-alive idle connections to each host.
	// Default 64 (nginx's incident-001 setting was 10240).
	MaxIdleConnsPerHost int `yaml:"max_idle_conns_per_host"`
	// MaxConnsPerHost bounds all connections to each host, 0 means no limit.
	// Default 0.
	MaxConnsPerHost int `yaml:"max_conns_per_host"`
	// IdleConnTimeout closes idle upstream connections. Default 90s.
	IdleConnTimeout Duration `yaml:"idle_conn_timeout"`
	// Health is the pool's health model (see docs/health.md).
	Health Health `yaml:"health"`
	// TLS, when set, makes sturdy speak HTTPS to the pool's hosts (HTTP/1.1
	// over TLS 1.2+, or HTTP/2 with protocol h2). Default: plain HTTP.
	TLS *UpstreamTLS `yaml:"tls"`
	// HostHeader is the Host its routes send unless they set their own: a
	// name, or $proxy_host for each host's address (nginx's default).
	// Default: the client's Host (routing.go).
	HostHeader string `yaml:"host_header"`
	// Protocol is http1 (default), h2 (HTTP/2 over TLS) or h2c (HTTP/2
	// without TLS); MaxStreamsPerConn caps the requests in flight on one
	// HTTP/2 connection (default 100, lower when the host says so).
	// See protocols.go.
	Protocol          string `yaml:"protocol"`
	MaxStreamsPerConn int    `yaml:"max_streams_per_conn"`
	// Discovered marks a pool whose hosts come from service discovery
	// (Kubernetes EndpointSlices) rather than from the file: it may be
	// empty for a while (a Service scaled to zero, pods not ready yet),
	// and then the route's empty-pool chain answers. Never read from YAML.
	Discovered bool `yaml:"-"`
	// Unresolved, set by the Kubernetes source with Discovered, is why
	// the pool has no hosts and will have none until a reference
	// resolves (a backendRef naming no usable Service): a route's share
	// of it is answered 500 with this reason, never with the sorry page
	// (waiting resolves nothing), and it is no empty pool (no pool_empty
	// event). Never read from YAML.
	Unresolved string `yaml:"-"`
}

// UpstreamTLS is how sturdy connects to backends over TLS.
type UpstreamTLS struct {
	// ServerName is the name checked against the backends' certificates
	// (and sent as SNI). Default: the host part of each host's address.
	ServerName string `yaml:"server_name"`
	// CA is a PEM file of the authorities that sign the backends'
	// certificates. Default: the system's roots.
	CA string `yaml:"ca"`
	// InsecureSkipVerify accepts any certificate. Default false; sturdy
	// check warns when it is set.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
	// Cert and Key are a client certificate (PEM) shown to the backends. Default: none.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Host is one backend, or a DNS name that stands for several: each address
// of a name (each target of an SRV record) is a host of its own.
type Host struct {
	// Addr is host:port, with an IP address or a DNS name. Required unless
	// SRV is set.
	Addr string `yaml:"addr"`
	// SRV is a DNS SRV name (like _http._tcp.web.service.consul, or a
	// Kubernetes headless service's _http._tcp.web.default.svc.cluster.local)
	// whose records are the hosts: their targets' addresses and ports,
	// their weights, and their priorities (records of a later priority are
	// backups, used while no earlier one is healthy). Instead of addr.
	SRV string `yaml:"srv"`
	// Weight is the host's share relative to its peers. Default 1, at most
	// 1000. SRV hosts take their records' weights.
	Weight int `yaml:"weight"`
}

// Balance policies.
const (
	BalanceRoundRobin = "round_robin"
	BalanceLeastConn  = "least_conn"
	BalanceRandomTwo  = "random_two"
	BalanceHash       = "hash"
)

// Defaults, in one place. docs/config.md lists the same values.
const (
	DefaultAdminListen         = "127.0.0.1:9901"
	DefaultShutdownGrace       = 30 * time.Second
	DefaultReadHeaderTimeout   = 10 * time.Second
	DefaultIdleTimeout         = 75 * time.Second
	DefaultMaxHeaderBytes      = 64 << 10
	DefaultConnectTimeout      = 5 * time.Second
	DefaultResponseHeader      = 30 * time.Second
	DefaultMaxBodyBytes        = 10 << 20
	DefaultMaxIdleConnsPerHost = 64
	DefaultIdleConnTimeout     = 90 * time.Second
	DefaultHashKey             = "client_ip"
	MaxWeight                  = 1000
)
