package config

// Routing a real site (docs/routing.md): matching beyond host and path,
// redirects, header rules, rewrites, traffic splitting, mirroring, request
// ids and error pages. Validation here is structural; the compile step
// parses regular expressions and templates and reads the error pages.

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Routing defaults. docs/config.md lists the same values.
const (
	DefaultRedirectStatus    = 302
	DefaultMirrorMaxBody     = 64 << 10
	DefaultMirrorMaxInFlight = 16
	DefaultMirrorTimeout     = 10 * time.Second
	DefaultRequestIDHeader   = "X-Request-ID"
	DefaultRequestIDAccept   = "trusted"
	// MaxBackendWeight is Gateway API's bound on a backendRef's weight.
	MaxBackendWeight = 1_000_000
)

// RouteMatch (routes[].match) is what a request must have besides its
// host. All conditions must hold.
type RouteMatch struct {
	// Path is the path condition. Default: the route's path key, a prefix.
	Path *PathMatch `yaml:"path"`
	// Methods the request must have one of. Default: any.
	Methods []string `yaml:"methods"`
	// Headers the request must have, each as described. Default: none.
	Headers []ValueMatch `yaml:"headers"`
	// Query parameters the request must have (their first value). Default: none.
	Query []ValueMatch `yaml:"query"`
}

// PathMatch is one path condition: exactly one of Exact, Prefix,
// StartsWith and Regex.
type PathMatch struct {
	Exact      string `yaml:"exact"`       // nginx "location =", Gateway API Exact
	Prefix     string `yaml:"prefix"`      // whole segments: Gateway API PathPrefix
	StartsWith string `yaml:"starts_with"` // characters: an nginx prefix location
	Regex      string `yaml:"regex"`       // RE2, unanchored: nginx "location ~"
	// CaseInsensitive makes Regex ignore case (nginx "location ~*"). Default false.
	CaseInsensitive bool `yaml:"case_insensitive"`
	// BeforeRegex lets this prefix, when it is the longest that matches,
	// win over regular expressions (nginx "location ^~"). Default false.
	BeforeRegex bool `yaml:"before_regex"`
}

// ValueMatch is a condition on a header, query parameter or cookie: Name
// and exactly one of Exact, Regex and Present.
type ValueMatch struct {
	Name  string `yaml:"name"`
	Exact string `yaml:"exact"`
	Regex string `yaml:"regex"`
	// Present true: sent, with any value; false: not sent.
	Present *bool `yaml:"present"`
}

// Redirect (routes[].redirect) answers with a redirect before any
// upstream: either URL, or the parts that change (the rest is the
// request's). Gateway API's RequestRedirect.
type Redirect struct {
	// URL is the whole Location, a template ("https://$host$request_uri").
	URL string `yaml:"url"`
	// Scheme is http or https. Default: the request's.
	Scheme string `yaml:"scheme"`
	// Host replaces the host name. Default: the request's.
	Host string `yaml:"host"`
	// Port replaces the port. Default: the well-known port of Scheme when
	// it is set, else the listener's; 80 for http and 443 for https are
	// left out of the Location.
	Port int `yaml:"port"`
	// Path replaces the whole path (a template). Default: the request's.
	Path string `yaml:"path"`
	// Prefix replaces the prefix the route matched (a prefix or
	// starts_with match). Default: none.
	Prefix *string `yaml:"prefix"`
	// Status is 301, 302, 303, 307 or 308. Default 302.
	Status int `yaml:"status"`
}

// Rewrite (routes[].rewrite) changes the path the backend receives; the
// query is kept. Exactly one of Prefix and Path.
type Rewrite struct {
	// Prefix replaces the prefix the route matched: whole segments for a
	// prefix match (Gateway API ReplacePrefixMatch), characters for a
	// starts_with match (nginx proxy_pass with a URI).
	Prefix *string `yaml:"prefix"`
	// Path replaces the whole path (a template with captures).
	Path string `yaml:"path"`
	// Regex, with Path, rewrites only paths it matches, and Path's $1..$9
	// are its captures (nginx rewrite ... break).
	Regex string `yaml:"regex"`
	// CaseInsensitive makes Regex ignore case. Default false.
	CaseInsensitive bool `yaml:"case_insensitive"`
	// Query replaces the query the backend gets (a template; ${args} is
	// the client's), as nginx's proxy_pass or rewrite with a ? does.
	// Default: the client's query, as sent.
	Query string `yaml:"query"`
	// Rematch routes the rewritten path again, as nginx's rewrite ...
	// last searches its locations again: the route answers nothing itself
	// (no pool), and a path Regex does not match gets 404. Default false.
	Rematch bool `yaml:"rematch"`
}

// HeaderRules (routes[].request_headers, routes[].response_headers) are
// applied in this order: remove, set, add. Values are templates.
type HeaderRules struct {
	// Set replaces the header with this value (nginx proxy_set_header;
	// add_header ... always for responses).
	Set map[string]string `yaml:"set"`
	// Add appends a value to the header.
	Add map[string]string `yaml:"add"`
	// Remove deletes the header.
	Remove []string `yaml:"remove"`
}

// HeaderRule is one rule of a HeaderRules, for checks that go through
// them all: Key is its place under the rules' key ("set.X-A",
// "remove[0]"), Verb "set", "add" or "remove".
type HeaderRule struct {
	Key, Name, Verb, Value string
}

// Rules lists the rules in a stable order: set and add by name, then
// remove in list order.
func (h *HeaderRules) Rules() []HeaderRule {
	var out []HeaderRule
	for _, kind := range []struct {
		verb string
		m    map[string]string
	}{{"set", h.Set}, {"add", h.Add}} {
		for _, n := range slices.Sorted(maps.Keys(kind.m)) {
			out = append(out, HeaderRule{Key: kind.verb + "." + n, Name: n, Verb: kind.verb, Value: kind.m[n]})
		}
	}
	for j, n := range h.Remove {
		out = append(out, HeaderRule{Key: "remove[" + strconv.Itoa(j) + "]", Name: n, Verb: "remove"})
	}
	return out
}

// Backend (routes[].backends[]) is one pool of a split route: chosen when
// its header or cookie condition holds (in list order), or by weight
// among the entries without one. Gateway API's weighted backendRefs.
type Backend struct {
	// Pool names the pool. Required.
	Pool string `yaml:"pool"`
	// Weight is the entry's share among the unconditional entries, 0 to
	// 1000000. Default 1.
	Weight int `yaml:"weight"`
	// Header or Cookie, when set, make the entry conditional.
	Header *ValueMatch `yaml:"header"`
	Cookie *ValueMatch `yaml:"cookie"`
	// Fallback is the pool tried while this one is empty. Default: the
	// route's fallback.pool.
	Fallback string `yaml:"fallback"`
	// RequestHeaders change the requests sent to this entry's pool, after
	// the route's request_headers (nginx: a proxy_set_header whose value
	// is the variable that chose the upstream). Default: none.
	RequestHeaders *HeaderRules `yaml:"request_headers"`
	// HostHeader is the Host requests sent to this entry's pool get: a
	// name or a template, like routes[].host_header, which it overrides
	// (nginx: proxy_pass http://$pool sent the upstream's name). Default:
	// the route's host_header, else the pool's, else the client's Host.
	HostHeader string `yaml:"host_header"`
}

// Mirror (routes[].mirror) copies a share of the route's requests to
// another pool and ignores the answers. Gateway API's RequestMirror.
type Mirror struct {
	// Pool receives the copies. Required; not a pool of the route.
	Pool string `yaml:"pool"`
	// Share of the requests copied: "10%", "0.5%", "1/3". Default 100%.
	Share Share `yaml:"share"`
	// MaxBody is the largest request body copied; requests with a larger
	// body, or one of unknown length, are not mirrored. Default 64KiB.
	MaxBody Size `yaml:"max_body"`
	// MaxInFlight bounds copies in flight; past it copies are dropped.
	// Default 16.
	MaxInFlight int `yaml:"max_in_flight"`
	// Timeout bounds one copy. Default 10s.
	Timeout Duration `yaml:"timeout"`
}

// RequestID (top-level and routes[].request_id) gives each request an id
// that travels upstream, back to the client, and into error bodies, the
// access log and events. The top-level section applies to every route
// without its own.
type RequestID struct {
	// Enabled turns it on. Default true when the section is written.
	Enabled *bool `yaml:"enabled"`
	// Header carries the id both ways. Default X-Request-ID.
	Header string `yaml:"header"`
	// Accept says whose ids are kept: trusted (default: peers in
	// trusted_proxies), any, or none (always a new one).
	Accept string `yaml:"accept"`
	// Response sends the id back to the client. Default true.
	Response *bool `yaml:"response"`
}

// On reports whether the section turns request ids on.
func (r *RequestID) On() bool { return r != nil && (r.Enabled == nil || *r.Enabled) }

// ErrorPage (routes[].error_pages[]) replaces a backend's error answer
// (nginx error_page with proxy_intercept_errors).
type ErrorPage struct {
	// Codes are the statuses replaced, 300 to 599. Required.
	Codes []int `yaml:"codes"`
	// File is the body, read at load and reload. Required.
	File string `yaml:"file"`
	// Status is sent instead of the backend's. Default: the backend's.
	Status int `yaml:"status"`
	// ContentType of File. Default: text/html when it starts with "<",
	// else text/plain.
	ContentType string `yaml:"content_type"`
}

// Share is a fraction written "10%", "0.5%" or "1/3".
type Share struct {
	Num, Den uint64 // Den 0: unset
}

func (s *Share) decodeScalar(v string) error {
	bad := fmt.Errorf("invalid share %q; expected a percentage like 10%% or 0.5%%, or a fraction like 1/3", v)
	v = strings.TrimSpace(v)
	if n, d, ok := strings.Cut(v, "/"); ok {
		num, err1 := strconv.ParseUint(strings.TrimSpace(n), 10, 32)
		den, err2 := strconv.ParseUint(strings.TrimSpace(d), 10, 32)
		if err1 != nil || err2 != nil || den == 0 || num > den {
			return bad
		}
		s.Num, s.Den = num, den
		return nil
	}
	p, ok := strings.CutSuffix(v, "%")
	f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
	if !ok || err != nil || f < 0 || f > 100 || math.IsNaN(f) {
		return bad
	}
	// Up to four decimals of a percent, exactly.
	s.Num, s.Den = uint64(math.Round(f*10000)), 100*10000
	return nil
}

func (s Share) String() string {
	if s.Den == 0 {
		return ""
	}
	if (100*10000)%s.Den == 0 {
		return strconv.FormatFloat(float64(s.Num)*100/float64(s.Den), 'f', -1, 64) + "%"
	}
	return strconv.FormatUint(s.Num, 10) + "/" + strconv.FormatUint(s.Den, 10)
}

// MarshalYAML writes the share in the form it is read in.
func (s Share) MarshalYAML() (any, error) { return s.String(), nil }

// IsRedirect reports whether the route only redirects.
func (r *Route) IsRedirect() bool { return r.Redirect != nil }

func (c *Config) setRoutingDefaults() {
	setRequestIDDefaults(c.RequestID)
	c.setRespondDefaults()
	for i := range c.Routes {
		r := &c.Routes[i]
		p := fmt.Sprintf("routes[%d]", i)
		if m := r.Match; m != nil {
			for j, s := range m.Methods {
				m.Methods[j] = strings.ToUpper(s)
			}
		}
		if rd := r.Redirect; rd != nil {
			setDefaultInt(&rd.Status, DefaultRedirectStatus)
			rd.Scheme = strings.ToLower(rd.Scheme)
		}
		for j := range r.Backends {
			if r.Backends[j].Weight == 0 && !c.Has(fmt.Sprintf("%s.backends[%d].weight", p, j)) {
				r.Backends[j].Weight = 1
			}
		}
		if m := r.Mirror; m != nil {
			if m.Share.Den == 0 {
				m.Share = Share{1, 1}
			}
			if m.MaxBody == 0 && !c.Has(p+".mirror.max_body") {
				m.MaxBody = DefaultMirrorMaxBody
			}
			setDefaultInt(&m.MaxInFlight, DefaultMirrorMaxInFlight)
			setDefault(&m.Timeout, DefaultMirrorTimeout)
		}
		setRequestIDDefaults(r.RequestID)
	}
}

func setRequestIDDefaults(r *RequestID) {
	if r == nil {
		return
	}
	if r.Header == "" {
		r.Header = DefaultRequestIDHeader
	}
	if r.Accept == "" {
		r.Accept = DefaultRequestIDAccept
	}
	if r.Response == nil {
		t := true
		r.Response = &t
	}
}
