package config

// A route's fixed answer (routes[].respond): nginx's `return 200 "text"`,
// a health probe or a .well-known document, answered with no pool.

import (
	"mime"
	"strings"
)

// DefaultRespondContentType is what a fixed answer without content_type
// is sent as, nginx's usual default_type.
const DefaultRespondContentType = "text/plain"

// Respond (routes[].respond) answers every request of the route with a
// fixed status and body, after the route's access controls and before any
// upstream. The route needs no pool.
type Respond struct {
	// Status is 200 to 599, not a redirect (use redirect). Default 200.
	Status int `yaml:"status"`
	// Body is sent as it is (no substitutions). Default: empty.
	Body string `yaml:"body"`
	// ContentType of Body. Default text/plain.
	ContentType string `yaml:"content_type"`
	// Close answers nothing: an HTTP/1 connection is closed, an HTTP/2 or
	// HTTP/3 stream reset (nginx's `return 444`, for scanners and unknown
	// hosts, which learn nothing, not even a status). No status, body or
	// content_type beside it.
	Close bool `yaml:"close"`
}

func (c *Config) setRespondDefaults() {
	for i := range c.Routes {
		if rs := c.Routes[i].Respond; rs != nil && !rs.Close {
			setDefaultInt(&rs.Status, 200)
			if rs.ContentType == "" {
				rs.ContentType = DefaultRespondContentType
			}
		}
	}
}

func (v *validator) respond(p string, r *Route) {
	rs := r.Respond
	if rs == nil {
		return
	}
	q := p + ".respond"
	if rs.Close {
		if rs.Status != 0 || rs.Body != "" || rs.ContentType != "" {
			v.errorf(q+".close", "a route that closes the connection sends no status, body or content_type; leave them out or drop close")
		}
		v.respondAlone(q, r)
		return
	}
	switch {
	case rs.Status < 200 || rs.Status > 599:
		v.errorf(q+".status", "status %d out of range; expected 200 to 599", rs.Status)
	case rs.Status >= 300 && rs.Status < 400:
		v.errorf(q+".status", "status %d is a redirect; use routes[].redirect, which sends a Location", rs.Status)
	}
	if (rs.Status == 204 || rs.Status == 304) && rs.Body != "" {
		v.errorf(q+".body", "a %d answer has no body; leave body out or choose another status", rs.Status)
	}
	if _, _, err := mime.ParseMediaType(rs.ContentType); err != nil || strings.ContainsAny(rs.ContentType, "\r\n") {
		v.errorf(q+".content_type", "invalid media type %q; expected one like text/plain or application/json", rs.ContentType)
	}
	v.respondAlone(q, r)
}

// respondAlone refuses what would answer beside a fixed answer.
func (v *validator) respondAlone(q string, r *Route) {
	for _, other := range []struct {
		set  bool
		name string
	}{{r.Redirect != nil, "redirect"}, {r.Static != nil, "static"}, {r.Pool != "", "pool"}, {len(r.Backends) > 0, "backends"}, {r.Rewrite != nil, "rewrite"}, {r.Mirror != nil, "mirror"}} {
		if other.set {
			v.errorf(q, "a route that responds itself has no %s; give one or the other", other.name)
		}
	}
}
