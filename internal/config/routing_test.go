package config

import (
	"testing"
	"time"
)

func TestRoutingDefaults(t *testing.T) {
	c, err := Parse([]byte(`
listeners: [ { name: web, listen: 127.0.0.1:0 } ]
request_id: {}
routes:
  - name: r
    path: /r
    redirect: { scheme: HTTPS }
  - name: split
    default: true
    backends: [ { pool: web }, { pool: web2, weight: 0 }, { pool: web2, header: { name: X-C, present: true } } ]
    mirror: { pool: shadow }
    match: { methods: [get] }
    request_id: { accept: any, response: false }
  - { name: third, path: /t, pool: web, mirror: { pool: shadow, share: "1/3", max_body: 0 } }
pools:
  - { name: web, hosts: [ { addr: 127.0.0.1:1 } ] }
  - { name: web2, hosts: [ { addr: 127.0.0.1:2 } ] }
  - { name: shadow, hosts: [ { addr: 127.0.0.1:3 } ] }
`), "routing.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rd := c.Routes[0].Redirect
	if rd.Status != DefaultRedirectStatus || rd.Scheme != "https" {
		t.Errorf("redirect %+v; want status 302 and a lower-case scheme", rd)
	}
	s := c.Routes[1]
	if s.Backends[0].Weight != 1 || s.Backends[1].Weight != 0 {
		t.Errorf("weights %d %d; want the default 1 and the written 0", s.Backends[0].Weight, s.Backends[1].Weight)
	}
	m := s.Mirror
	if m.Share != (Share{1, 1}) || m.MaxBody != DefaultMirrorMaxBody || m.MaxInFlight != DefaultMirrorMaxInFlight || m.Timeout.D() != 10*time.Second {
		t.Errorf("mirror defaults %+v", m)
	}
	if s.Match.Methods[0] != "GET" {
		t.Errorf("methods %v; want upper case", s.Match.Methods)
	}
	if id := c.RequestID; !id.On() || id.Header != "X-Request-ID" || id.Accept != "trusted" || !*id.Response {
		t.Errorf("top-level request_id %+v", id)
	}
	if id := s.RequestID; id.Accept != "any" || *id.Response || id.Header != "X-Request-ID" {
		t.Errorf("route request_id %+v", id)
	}
	third := c.Routes[2].Mirror
	if third.Share != (Share{1, 3}) || third.Share.String() != "1/3" || third.MaxBody != 0 {
		t.Errorf("mirror %+v (%s); want 1/3 and max_body 0 as written", third, third.Share)
	}
}

func TestShare(t *testing.T) {
	for in, want := range map[string]string{"10%": "10%", "0.5%": "0.5%", "100%": "100%", "0%": "0%", "1/1000": "0.1%", "2/3": "2/3"} {
		var s Share
		if err := s.decodeScalar(in); err != nil || s.String() != want {
			t.Errorf("%q -> %v %q, want %q", in, err, s.String(), want)
		}
	}
	for _, in := range []string{"10", "101%", "-1%", "3/2", "1/0", "x"} {
		var s Share
		if err := s.decodeScalar(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}
