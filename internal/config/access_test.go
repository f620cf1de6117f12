package config

import (
	"testing"
	"time"
)

func TestAccessDefaultsAndValues(t *testing.T) {
	c, err := Load("testdata/access.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	z := c.RateLimitZones[0]
	if z.Key != KeyClientIP || z.Size != DefaultZoneSize || z.Rate.Interval() != 100*time.Millisecond {
		t.Errorf("zone defaults: %+v", z)
	}
	if z.Attributed.Rate.Interval() != time.Second || z.Attributed.Burst != 0 {
		t.Errorf("attributed: %+v", z.Attributed)
	}
	if u := c.RateLimitZones[1]; u.Rate.Interval() != 100*time.Millisecond || u.Rate.String() != "600r/m" || u.Size != 1000 {
		t.Errorf("per_user: %+v", u)
	}
	if s := c.SharedLimits; s.Prefix != DefaultSharedPrefix || s.Timeout.D() != DefaultSharedTimeout || s.Probe.D() != DefaultSharedProbe {
		t.Errorf("shared defaults: %+v", s)
	}
	r := c.Routes[0]
	if r.Methods[0] != "GET" || r.Methods[1] != "POST" {
		t.Errorf("methods are upper-cased: %v", r.Methods)
	}
	if r.RateLimit[0].Status != 429 || r.RateLimit[1].Status != 503 || r.ConnLimit[0].Status != 429 {
		t.Errorf("statuses: %+v %+v", r.RateLimit, r.ConnLimit)
	}
	b := r.BasicAuth
	if b.Realm != DefaultBasicAuthRealm || b.FailureRate != DefaultAuthFailureRate || b.FailureBurst != DefaultAuthFailureBurst || b.ForwardAuthorization {
		t.Errorf("basic auth defaults: %+v", b)
	}
	f := c.Routes[1].ForwardAuth
	if f.Timeout.D() != DefaultForwardAuthTimeout || len(f.RequestHeaders) != 2 || f.RequestHeaders[0] != "Cookie" || f.CopyHeaders[0] != "X-Auth-Request-User" {
		t.Errorf("forward auth defaults: %+v", f)
	}
}

func TestParseLimitKey(t *testing.T) {
	for _, tc := range []struct{ in, kind, name string }{
		{"client_ip", KeyClientIP, ""}, {"route", KeyRoute, ""},
		{"header:X-Api-Key", KeyHeader, "X-Api-Key"}, {"cookie:session", KeyCookie, "session"},
		{"header:", "", ""}, {"cookie:a=b", "", ""}, {"ip", "", ""}, {"header:X Y", "", ""},
	} {
		kind, name, err := ParseLimitKey(tc.in)
		if kind != tc.kind || name != tc.name || (err == nil) != (tc.kind != "") {
			t.Errorf("ParseLimitKey(%q) = %q, %q, %v", tc.in, kind, name, err)
		}
	}
}
