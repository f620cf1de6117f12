package config

// Access control at the edge (docs/access.md): method restrictions,
// allow/deny lists, rate and concurrency limits, basic and forward auth.
// Every decision here happens before any upstream attempt and is charged to
// no backend. Validation reads no file: the compile functions of packages
// acl and basicauth read the files these keys name.

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Access defaults. docs/access.md lists the same values.
const (
	DefaultRateLimitStatus    = http.StatusTooManyRequests
	DefaultConnLimitStatus    = http.StatusTooManyRequests
	DefaultZoneSize           = 65536
	DefaultBasicAuthRealm     = "restricted"
	DefaultAuthFailureBurst   = 5
	DefaultForwardAuthTimeout = 5 * time.Second
	DefaultSharedTimeout      = 50 * time.Millisecond
	DefaultSharedProbe        = time.Second
	DefaultSharedPrefix       = "sturdy:rl:"
	// MaxZoneSize bounds a zone's table (about 100 bytes per key).
	MaxZoneSize = 1 << 24
)

// DefaultAuthFailureRate is how fast a client may keep failing basic auth
// once its burst is spent: 10 attempts a minute.
var DefaultAuthFailureRate = Rate{N: 10, Per: time.Minute}

// DefaultForwardAuthRequestHeaders are the client headers sent to the auth
// service when request_headers is not given.
var DefaultForwardAuthRequestHeaders = []string{"Cookie", "Authorization"}

// Methods nginx's limit_except accepts; routes[].methods takes the same.
var LimitExceptMethods = []string{
	"GET", "HEAD", "POST", "PUT", "DELETE", "MKCOL", "COPY", "MOVE",
	"OPTIONS", "PROPFIND", "PROPPATCH", "LOCK", "UNLOCK", "PATCH",
}

// Rate is a request rate written "10r/s" or "600r/m", as in nginx.
type Rate struct {
	N   int64         // requests
	Per time.Duration // per second or per minute; 0 when unset
}

func (r *Rate) decodeScalar(s string) error {
	num, unit, ok := strings.Cut(strings.TrimSpace(s), "r/")
	n, err := strconv.ParseInt(num, 10, 64)
	if !ok || err != nil || n < 1 || n > 1_000_000 || (unit != "s" && unit != "m") {
		return fmt.Errorf("invalid rate %q; expected requests per second or minute, like 10r/s or 30r/m", s)
	}
	r.N, r.Per = n, time.Second
	if unit == "m" {
		r.Per = time.Minute
	}
	return nil
}

// Set reports whether the rate was given.
func (r Rate) Set() bool { return r.N > 0 && r.Per > 0 }

// Interval is the time one request "costs": 1/rate.
func (r Rate) Interval() time.Duration { return r.Per / time.Duration(r.N) }

func (r Rate) String() string {
	if !r.Set() {
		return ""
	}
	if r.Per == time.Minute {
		return strconv.FormatInt(r.N, 10) + "r/m"
	}
	return strconv.FormatInt(r.N, 10) + "r/s"
}

// MarshalYAML writes the rate in the form it is read in.
func (r Rate) MarshalYAML() (any, error) { return r.String(), nil }

// RateLimitZone (top level, rate_limit_zones[]) is nginx's limit_req_zone:
// a table of leaky buckets, one per key, that routes refer to by name.
// Routes naming the same zone share its buckets.
type RateLimitZone struct {
	// Name identifies the zone in routes and metrics. Required, unique.
	Name string `yaml:"name"`
	// Key selects whose bucket a request fills: "client_ip" (default: the
	// client's address, behind trusted proxies and the PROXY protocol),
	// "header:NAME", "cookie:NAME" or "route". A request without the
	// header or cookie is not limited by this zone (as in nginx).
	Key string `yaml:"key"`
	// Rate is the steady rate each key may send, "10r/s" or "600r/m". Required.
	Rate Rate `yaml:"rate"`
	// Size is the most keys the zone remembers. Default 65536, at most
	// 16777216. See docs/access.md for what happens when it is full.
	Size int `yaml:"size"`
	// Attributed is a stricter limit for clients that attribution holds
	// responsible for their own failures. Default: none (they get Rate).
	Attributed *AttributedLimit `yaml:"attributed"`
	// Shared keeps the zone's buckets in shared_limits' Redis, so that
	// every sturdy instance sees one budget per key. Default false.
	Shared bool `yaml:"shared"`
}

// AttributedLimit is the stricter bucket for attributed clients.
type AttributedLimit struct {
	// Rate is required and should be lower than the zone's.
	Rate Rate `yaml:"rate"`
	// Burst is how many requests above the rate are accepted. Default 0.
	Burst int `yaml:"burst"`
}

// RateLimit (routes[].rate_limit[]) is nginx's limit_req.
type RateLimit struct {
	// Zone names a rate_limit_zones entry. Required.
	Zone string `yaml:"zone"`
	// Burst is how many requests above the rate are accepted (queued or
	// passed) before requests are refused. Default 0.
	Burst int `yaml:"burst"`
	// NoDelay passes the burst at once instead of spacing it at the rate.
	// Default false.
	NoDelay bool `yaml:"nodelay"`
	// Delay (nginx delay=N) passes the first Delay excess requests at once
	// and spaces the rest of the burst. Default 0; at most Burst.
	Delay int `yaml:"delay"`
	// Status answers refused requests (nginx limit_req_status). Default 429,
	// with Retry-After. 400 to 599.
	Status int `yaml:"status"`
}

// ConnLimitZone (top level, conn_limit_zones[]) is nginx's limit_conn_zone:
// a table of in-flight request counts, one per key.
type ConnLimitZone struct {
	// Name identifies the zone in routes and metrics. Required, unique.
	Name string `yaml:"name"`
	// Key is as for rate_limit_zones. Default client_ip.
	Key string `yaml:"key"`
	// Size is the most keys counted at once. Default 65536.
	Size int `yaml:"size"`
}

// ConnLimit (routes[].conn_limit[]) is nginx's limit_conn.
type ConnLimit struct {
	// Zone names a conn_limit_zones entry. Required.
	Zone string `yaml:"zone"`
	// Max is how many requests of one key may be in flight. Required, >= 1.
	Max int `yaml:"max"`
	// Status answers refused requests (nginx limit_conn_status). Default 429
	// (nginx's default is 503). 400 to 599.
	Status int `yaml:"status"`
}

// AccessRule (routes[].access[]) is one nginx allow or deny line. Rules are
// tried in order and the first that matches decides; a request no rule
// matches is allowed, so lists usually end with { deny: all }.
type AccessRule struct {
	// Allow is an address, a CIDR or "all".
	Allow string `yaml:"allow"`
	// Deny is an address, a CIDR or "all".
	Deny string `yaml:"deny"`
	// AllowFile names a file of addresses and CIDRs, one per line (#
	// comments), read at load and on every reload.
	AllowFile string `yaml:"allow_file"`
	// DenyFile is the same for deny.
	DenyFile string `yaml:"deny_file"`
}

// BasicAuth (routes[].basic_auth) is nginx's auth_basic and
// auth_basic_user_file.
type BasicAuth struct {
	// Realm is sent in WWW-Authenticate. Default "restricted".
	Realm string `yaml:"realm"`
	// Htpasswd names the user file (bcrypt, apr1, {SHA}, {SSHA}, {PLAIN}),
	// read at load and on every reload. Required.
	Htpasswd string `yaml:"htpasswd"`
	// ForwardAuthorization passes the client's Authorization header to the
	// backends. Default false: the password stays at the edge.
	ForwardAuthorization bool `yaml:"forward_authorization"`
	// FailureRate is how fast one client may keep failing once FailureBurst
	// failures are spent; further attempts get 429 with Retry-After without
	// being checked. Default 10r/m.
	FailureRate Rate `yaml:"failure_rate"`
	// FailureBurst is how many failures in a row a client may make; the
	// attempt after them gets 429. Default 5.
	FailureBurst int `yaml:"failure_burst"`
}

// ForwardAuth (routes[].forward_auth) is nginx's auth_request, Traefik's
// forwardAuth and Caddy's forward_auth: each request is first asked about
// to an auth service.
type ForwardAuth struct {
	// URL of the auth endpoint, http or https, like
	// http://127.0.0.1:4180/oauth2/auth. Required.
	URL string `yaml:"url"`
	// Pool, when set, sends the sub-request to this pool's hosts (with
	// their health checks) instead of URL's host; URL's host is then only
	// the Host header. Default: none.
	Pool string `yaml:"pool"`
	// Timeout bounds the whole sub-request. Default 5s.
	Timeout Duration `yaml:"timeout"`
	// RequestHeaders are the client headers sent to the auth service;
	// "*" sends every one (but those of the connection, its framing and
	// Host), as nginx's auth_request. Default [Cookie, Authorization].
	RequestHeaders []string `yaml:"request_headers"`
	// CopyHeaders are the auth answer's headers set on the upstream request
	// after a 2xx, like X-Auth-Request-User. Default: none.
	CopyHeaders []string `yaml:"copy_headers"`
	// HostHeader is the sub-request's Host: "" (default) the host of URL,
	// "$host" the request's host without port, "$http_host" the request's
	// Host as sent, or a name.
	HostHeader string `yaml:"host_header"`
	// Statuses is how the auth service's answer is read: "sturdy"
	// (default): 2xx allows, 401, 403 and 3xx go back to the client,
	// anything else is 502 (504 for a timeout); "nginx", as nginx's
	// auth_request: 2xx allows, 401 and 403 go back, anything else (3xx
	// included, and a failed or timed-out sub-request) is 500.
	Statuses string `yaml:"statuses"`
}

// Forward auth answer readings (forward_auth.statuses).
const (
	ForwardAuthStatusesSturdy = "sturdy"
	ForwardAuthStatusesNginx  = "nginx"
)

// SharedLimits (top level, shared_limits) is the Redis that zones with
// shared: true keep their buckets in.
type SharedLimits struct {
	// Redis is host:port. Required.
	Redis string `yaml:"redis"`
	// DB is the Redis database number. Default 0.
	DB int `yaml:"db"`
	// Prefix starts every key sturdy writes. Default "sturdy:rl:".
	Prefix string `yaml:"prefix"`
	// Timeout bounds one call; a call that fails or times out switches the
	// zones to their local buckets until Redis answers again. Default 50ms.
	Timeout Duration `yaml:"timeout"`
	// Probe is how often an unreachable Redis is tried again. Default 1s.
	Probe Duration `yaml:"probe"`
}

func (c *Config) setAccessDefaults() {
	for i := range c.RateLimitZones {
		z := &c.RateLimitZones[i]
		if z.Key == "" {
			z.Key = DefaultHashKey
		}
		setDefaultInt(&z.Size, DefaultZoneSize)
	}
	for i := range c.ConnLimitZones {
		z := &c.ConnLimitZones[i]
		if z.Key == "" {
			z.Key = DefaultHashKey
		}
		setDefaultInt(&z.Size, DefaultZoneSize)
	}
	if s := c.SharedLimits; s != nil {
		if s.Prefix == "" {
			s.Prefix = DefaultSharedPrefix
		}
		setDefault(&s.Timeout, DefaultSharedTimeout)
		setDefault(&s.Probe, DefaultSharedProbe)
	}
	for i := range c.Routes {
		r := &c.Routes[i]
		for j := range r.RateLimit {
			setDefaultInt(&r.RateLimit[j].Status, DefaultRateLimitStatus)
		}
		for j := range r.ConnLimit {
			setDefaultInt(&r.ConnLimit[j].Status, DefaultConnLimitStatus)
		}
		for j, m := range r.Methods {
			r.Methods[j] = strings.ToUpper(m)
		}
		if len(r.Methods) > 0 {
			setDefaultInt(&r.MethodsStatus, http.StatusMethodNotAllowed)
		}
		if b := r.BasicAuth; b != nil {
			if b.Realm == "" {
				b.Realm = DefaultBasicAuthRealm
			}
			if !b.FailureRate.Set() {
				b.FailureRate = DefaultAuthFailureRate
			}
			setDefaultInt(&b.FailureBurst, DefaultAuthFailureBurst)
		}
		if f := r.ForwardAuth; f != nil {
			setDefault(&f.Timeout, DefaultForwardAuthTimeout)
			if f.RequestHeaders == nil {
				f.RequestHeaders = append([]string(nil), DefaultForwardAuthRequestHeaders...)
			}
			if f.Statuses == "" {
				f.Statuses = ForwardAuthStatusesSturdy
			}
		}
	}
}

// Limit key kinds, as ParseLimitKey returns them.
const (
	KeyClientIP = "client_ip"
	KeyHeader   = "header"
	KeyCookie   = "cookie"
	KeyRoute    = "route"
)

// ParseLimitKey splits a zone key into its kind (client_ip, header,
// cookie, route) and the header or cookie name.
func ParseLimitKey(s string) (kind, name string, err error) {
	if s == KeyClientIP || s == KeyRoute {
		return s, "", nil
	}
	kind, name, ok := strings.Cut(s, ":")
	if ok && (kind == KeyHeader && validHeaderName(name) || kind == KeyCookie && name != "" && !strings.ContainsAny(name, "=; \t")) {
		return kind, name, nil
	}
	return "", "", fmt.Errorf("invalid key %q; expected client_ip, route, header:NAME or cookie:NAME", s)
}
