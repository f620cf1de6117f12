package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Health is a pool's health model: active readiness checks and passive
// evidence from real traffic.
type Health struct {
	// FailStatuses are the response statuses that count as a failed attempt.
	// Default [502, 503, 504]. 4xx are never failures.
	FailStatuses []int `yaml:"fail_statuses"`
	// Active, when set (with a path), probes every host. Passive evidence
	// then only makes a host suspect; the probe decides.
	Active *ActiveCheck `yaml:"active"`
	// Passive tunes outlier detection from real traffic.
	Passive Passive `yaml:"passive"`
}

// ActiveCheck is an HTTP readiness probe. "The port is open" is not
// readiness, so there is no TCP-only check.
type ActiveCheck struct {
	// Type is http (default) or grpc: the gRPC health checking protocol
	// (grpc.health.v1 Check) asking for GRPCService ("" asks about the
	// server as a whole). See protocols.go.
	Type        string `yaml:"type"`
	GRPCService string `yaml:"grpc_service"`
	// Path is the request path, e.g. /healthz. Required.
	Path string `yaml:"path"`
	// Method is GET (default) or HEAD.
	Method string `yaml:"method"`
	// Host is the Host header. Default: the host's address.
	Host string `yaml:"host"`
	// ExpectStatus is a range like "200-399" (default) or one status "200".
	ExpectStatus string `yaml:"expect_status"`
	// ExpectBody, when set, must appear in the first 64KiB of the body.
	ExpectBody string `yaml:"expect_body"`
	// Interval between probes of a healthy host. Default 5s.
	Interval Duration `yaml:"interval"`
	// FastInterval between probes of a host in question: suspect, down,
	// or healthy with its last probe failed. Default 1s.
	FastInterval Duration `yaml:"fast_interval"`
	// Timeout of one probe. Default 2s, or half the interval if shorter.
	Timeout Duration `yaml:"timeout"`
	// Rise is how many passing probes bring a down host back. Default 2.
	Rise int `yaml:"rise"`
	// Fall is how many failing probes in a row take a healthy host down.
	// A suspect host goes down on its first failing probe. Default 3.
	Fall int `yaml:"fall"`
	// Jitter spreads probes by up to this much. Default 10% of Interval.
	Jitter Duration `yaml:"jitter"`
}

// Passive is outlier detection from real traffic.
type Passive struct {
	// Enabled turns passive evidence on. Default true.
	Enabled *bool `yaml:"enabled"`
	// Window is the sliding window failures are counted in. Default 30s.
	Window Duration `yaml:"window"`
	// MinRequests is the least traffic a host must have seen in the window
	// before its failure rate is judged. Default 10.
	MinRequests int `yaml:"min_requests"`
	// MinClients is how many distinct clients must have failed on a host in
	// the window before its failures count as the host's (one client cannot
	// take a host down). Default 3.
	MinClients int `yaml:"min_clients"`
	// FailureRate is the host-attributed failure share that makes a host an
	// outlier, when its peers are clearly better. Default 50%.
	FailureRate Percent `yaml:"failure_rate"`
	// ConsecutiveConnectFailures makes a host suspect at once when that
	// many connection attempts in a row failed. Default 3.
	ConsecutiveConnectFailures int `yaml:"consecutive_connect_failures"`
	// MaxEjected is the largest share of the pool passive evidence may take
	// out of rotation. Active checks are not limited. Default 50%.
	MaxEjected Percent `yaml:"max_ejected"`
	// EjectTime is the first ejection's length (pools without active
	// checks); each repeat doubles it up to MaxEjectTime. Default 10s.
	EjectTime Duration `yaml:"eject_time"`
	// MaxEjectTime caps the backoff. Default 5m.
	MaxEjectTime Duration `yaml:"max_eject_time"`
	// SlowStart ramps a returning host's share up over this long. Default 10s.
	SlowStart Duration `yaml:"slow_start"`
	// TrialInterval is how often each host of a pool known to be failing
	// (no success anywhere, failures from min_clients clients) gets one
	// trial request; the others are answered by the empty-pool chain.
	// Default 5s.
	TrialInterval Duration `yaml:"trial_interval"`
	// GrayFailure takes out, for a while, a host whose readiness probe
	// passes while its real traffic fails (pools with active checks).
	GrayFailure GrayFailure `yaml:"gray_failure"`
}

// GrayFailure is what sturdy does when the probe and the traffic disagree.
type GrayFailure struct {
	// Enabled turns the check on. Default true.
	Enabled *bool `yaml:"enabled"`
	// Disagreements is how many times a probe must clear a host that real
	// traffic made suspect, within Within, before the host is taken out
	// (within max_ejected, for eject_time doubling up to max_eject_time).
	// Default 3.
	Disagreements int `yaml:"disagreements"`
	// Within is the span those disagreements must fall in. Default 2m.
	Within Duration `yaml:"within"`
}

// On reports whether gray failure detection is on.
func (g GrayFailure) On() bool { return g.Enabled == nil || *g.Enabled }

// On reports whether passive evidence is used.
func (p Passive) On() bool { return p.Enabled == nil || *p.Enabled }

// Retry is a route's retry policy.
type Retry struct {
	// Tries is the most attempts per request, the first included. Default 2.
	// A request that reached a backend is tried again only when its method
	// is idempotent and its body could be replayed.
	Tries int `yaml:"tries"`
	// Budget caps retries at this share of the pool's recent requests.
	// Default 20%.
	Budget Percent `yaml:"budget"`
	// MinRetries lets this many retries per budget window happen even at
	// low traffic. Default 3.
	MinRetries int `yaml:"min_retries"`
	// BufferBody is the largest request body kept in memory so that an
	// idempotent request can be replayed. Default 64KiB; 0 disables.
	BufferBody Size `yaml:"buffer_body"`
}

// Attribution decides whose fault a failure after sending was.
type Attribution struct {
	// ClientKey identifies a client: "client_ip" (default) or "header:NAME"
	// (for example a header a trusted CDN sets).
	ClientKey string `yaml:"client_key"`
	// Window is how far back failures are looked at. Default 30s.
	Window Duration `yaml:"window"`
	// ClientMinFailures is how many failures, on at least two hosts, make a
	// client the cause of its own failures. Default 5.
	ClientMinFailures int `yaml:"client_min_failures"`
	// RouteMinFailures is the same for a route. Default 5.
	RouteMinFailures int `yaml:"route_min_failures"`
	// ShedClients refuses requests from attributed clients with 429 until
	// they are released. Default false.
	ShedClients bool `yaml:"shed_clients"`
}

// Percent is a share written "20%" (or a fraction like 0.2).
type Percent float64

func (p *Percent) decodeScalar(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
	if err == nil && strings.HasSuffix(s, "%") {
		v /= 100
	}
	if err != nil || v < 0 || v > 1 {
		return fmt.Errorf("invalid share %q; expected a percentage from 0%% to 100%%, like 20%%", s)
	}
	*p = Percent(v)
	return nil
}

func (p Percent) String() string { return strconv.FormatFloat(float64(p)*100, 'f', -1, 64) + "%" }

// MarshalYAML writes the share as a percentage.
func (p Percent) MarshalYAML() (any, error) { return p.String(), nil }

// Health defaults.
const (
	DefaultCheckInterval     = 5 * time.Second
	DefaultCheckFastInterval = time.Second
	DefaultCheckTimeout      = 2 * time.Second
	DefaultRise              = 2
	DefaultFall              = 3
	DefaultWindow            = 30 * time.Second
	DefaultMinRequests       = 10
	DefaultMinClients        = 3
	DefaultFailureRate       = 0.5
	DefaultConsecutive       = 3
	DefaultMaxEjected        = 0.5
	DefaultEjectTime         = 10 * time.Second
	DefaultMaxEjectTime      = 5 * time.Minute
	DefaultSlowStart         = 10 * time.Second
	DefaultTrialInterval     = 5 * time.Second
	DefaultDisagreements     = 3
	DefaultDisagreeWithin    = 2 * time.Minute
	DefaultTries             = 2
	DefaultRetryBudget       = 0.2
	DefaultMinRetries        = 3
	DefaultBufferBody        = 64 << 10
	DefaultMinFailures       = 5
)

// MaxTries is the most retry.tries allows; the proxy sizes each request's
// list of failed attempts by it.
const MaxTries = 10

func (c *Config) setHealthDefaults() {
	a := &c.Attribution
	if a.ClientKey == "" {
		a.ClientKey = "client_ip"
	}
	if a.Window == 0 {
		a.Window = Duration(DefaultWindow)
	}
	if a.ClientMinFailures == 0 {
		a.ClientMinFailures = DefaultMinFailures
	}
	if a.RouteMinFailures == 0 {
		a.RouteMinFailures = DefaultMinFailures
	}
	for i := range c.Pools {
		h := &c.Pools[i].Health
		if h.FailStatuses == nil {
			h.FailStatuses = []int{502, 503, 504}
		}
		if a := h.Active; a != nil {
			if a.Method == "" {
				a.Method = "GET"
			}
			if a.ExpectStatus == "" {
				a.ExpectStatus = "200-399"
			}
			if a.Interval == 0 {
				a.Interval = Duration(DefaultCheckInterval)
			}
			if a.FastInterval == 0 {
				a.FastInterval = Duration(min(DefaultCheckFastInterval, a.Interval.D()))
			}
			if a.Timeout == 0 {
				a.Timeout = Duration(min(DefaultCheckTimeout, a.Interval.D()/2))
			}
			if a.Rise == 0 {
				a.Rise = DefaultRise
			}
			if a.Fall == 0 {
				a.Fall = DefaultFall
			}
			if a.Jitter == 0 && !c.Has(fmt.Sprintf("pools[%d].health.active.jitter", i)) {
				a.Jitter = a.Interval / 10
			}
		}
		p := &h.Passive
		setDefault(&p.Window, DefaultWindow)
		setDefault(&p.EjectTime, DefaultEjectTime)
		setDefault(&p.MaxEjectTime, DefaultMaxEjectTime)
		if p.SlowStart == 0 && !c.Has(fmt.Sprintf("pools[%d].health.passive.slow_start", i)) {
			p.SlowStart = Duration(DefaultSlowStart)
		}
		setDefault(&p.TrialInterval, DefaultTrialInterval)
		setDefaultInt(&p.GrayFailure.Disagreements, DefaultDisagreements)
		setDefault(&p.GrayFailure.Within, DefaultDisagreeWithin)
		setDefaultInt(&p.MinRequests, DefaultMinRequests)
		setDefaultInt(&p.MinClients, DefaultMinClients)
		setDefaultInt(&p.ConsecutiveConnectFailures, DefaultConsecutive)
		if p.FailureRate == 0 {
			p.FailureRate = DefaultFailureRate
		}
		if p.MaxEjected == 0 && !c.Has(fmt.Sprintf("pools[%d].health.passive.max_ejected", i)) {
			p.MaxEjected = DefaultMaxEjected
		}
	}
	for i := range c.Routes {
		r := &c.Routes[i].Retry
		if !c.Has(fmt.Sprintf("routes[%d].retry.tries", i)) {
			r.Tries = DefaultTries
		}
		setDefaultInt(&r.MinRetries, DefaultMinRetries)
		if r.Budget == 0 && !c.Has(fmt.Sprintf("routes[%d].retry.budget", i)) {
			r.Budget = DefaultRetryBudget
		}
		if r.BufferBody == 0 && !c.Has(fmt.Sprintf("routes[%d].retry.buffer_body", i)) {
			r.BufferBody = DefaultBufferBody
		}
	}
}

func setDefault(d *Duration, v time.Duration) {
	if *d == 0 {
		*d = Duration(v)
	}
}

func setDefaultInt(n *int, v int) {
	if *n == 0 {
		*n = v
	}
}

func (v *validator) health() {
	c := v.c
	if _, _, err := ParseClientKey(c.Attribution.ClientKey); err != nil {
		v.errorf("attribution.client_key", "%v", err)
	}
	for i, pl := range c.Pools {
		p := fmt.Sprintf("pools[%d].health", i)
		for j, s := range pl.Health.FailStatuses {
			if s < 500 || s > 599 {
				v.errorf(fmt.Sprintf("%s.fail_statuses[%d]", p, j), "status %d is not a 5xx; 4xx answers are the client's and never count against a host", s)
			}
		}
		if a := pl.Health.Active; a != nil {
			ap := p + ".active"
			if !strings.HasPrefix(a.Path, "/") {
				v.errorf(ap+".path", "missing or not starting with /; expected a readiness path like /healthz")
			}
			if a.Method != "GET" && a.Method != "HEAD" {
				v.errorf(ap+".method", "method %q; expected GET or HEAD", a.Method)
			}
			if _, _, err := ParseStatusRange(a.ExpectStatus); err != nil {
				v.errorf(ap+".expect_status", "%v", err)
			}
			if a.Timeout >= a.Interval {
				v.errorf(ap+".timeout", "timeout %s must be shorter than interval %s, so that at most one probe is in flight", a.Timeout, a.Interval)
			}
			if a.Rise < 1 || a.Fall < 1 {
				v.errorf(ap, "rise and fall must be at least 1")
			}
		}
		ps := pl.Health.Passive
		if ps.MaxEjectTime < ps.EjectTime {
			v.errorf(p+".passive.max_eject_time", "max_eject_time %s is shorter than eject_time %s", ps.MaxEjectTime, ps.EjectTime)
		}
		if ps.MinRequests < 1 || ps.MinClients < 1 || ps.ConsecutiveConnectFailures < 1 {
			v.errorf(p+".passive", "min_requests, min_clients and consecutive_connect_failures must be at least 1")
		}
		if ps.GrayFailure.Disagreements < 1 {
			v.errorf(p+".passive.gray_failure.disagreements", "disagreements %d must be at least 1; turn the check off with enabled: false", ps.GrayFailure.Disagreements)
		}
	}
	for i, r := range c.Routes {
		p := fmt.Sprintf("routes[%d].retry", i)
		if r.Retry.Tries < 1 || r.Retry.Tries > MaxTries {
			v.errorf(p+".tries", "tries %d out of range; expected 1 (no retries) to %d", r.Retry.Tries, MaxTries)
		}
	}
}

// ParseClientKey splits attribution.client_key into its kind and name.
func ParseClientKey(s string) (kind, name string, err error) {
	if s == "client_ip" {
		return s, "", nil
	}
	if name, ok := strings.CutPrefix(s, "header:"); ok && name != "" {
		return "header", name, nil
	}
	return "", "", fmt.Errorf("invalid client key %q; expected client_ip or header:NAME", s)
}

// ParseStatusRange reads "200-399" or "200".
func ParseStatusRange(s string) (lo, hi int, err error) {
	a, b, isRange := strings.Cut(s, "-")
	lo, err1 := strconv.Atoi(strings.TrimSpace(a))
	hi = lo
	var err2 error
	if isRange {
		hi, err2 = strconv.Atoi(strings.TrimSpace(b))
	}
	if err1 != nil || err2 != nil || lo < 100 || hi > 599 || lo > hi {
		return 0, 0, fmt.Errorf("invalid status range %q; expected like 200-399 or 200", s)
	}
	return lo, hi, nil
}
