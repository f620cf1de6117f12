package edge

import (
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

func request(target string) *http.Request {
	u, err := url.ParseRequestURI(target)
	if err != nil {
		u = &url.URL{Path: target}
	}
	return &http.Request{Method: "GET", RequestURI: target, URL: u, RemoteAddr: "192.0.2.1:4000", Header: http.Header{}}
}

var targets = []struct {
	in            string
	reject        bool
	status        int
	path, fwdPath string // URL.Path (routed on) and EscapedPath (forwarded)
	query         string
	slashes       bool // holds encoded slashes: only routes that allow them take it
	reason        Reason
}{
	{in: "/plain/path?q=1", path: "/plain/path", fwdPath: "/plain/path", query: "q=1"},
	{in: "/a%20b?q=caf%C3%A9", path: "/a b", fwdPath: "/a%20b", query: "q=caf%C3%A9"},
	{in: "/search?q=\xe4\xbd\xa0\xe5\xa5\xbd", path: "/search", fwdPath: "/search", query: "q=%E4%BD%A0%E5%A5%BD"},
	{in: "/caf\xc3\xa9/menu", path: "/caf\xc3\xa9/menu", fwdPath: "/caf%C3%A9/menu"},
	{in: "/search?q=\xe4\xbd\xa0", reject: true, status: 400, reason: RejectNonASCII},
	{in: "/api/../admin", path: "/admin", fwdPath: "/admin"},
	{in: "/api/%2e%2e/admin", path: "/admin", fwdPath: "/admin"},
	{in: "/a/./b/", path: "/a/b/", fwdPath: "/a/b/"},
	{in: "/../../etc/passwd", path: "/etc/passwd", fwdPath: "/etc/passwd"},
	{in: "/a/..", path: "/", fwdPath: "/"},
	// Encoded slashes: routed on the decoded form, forwarded as sent, and
	// marked so that only routes allowing them take them.
	{in: "/files/a%2Fb", path: "/files/a/b", fwdPath: "/files/a%2Fb", slashes: true},
	{in: "/api/v4/projects/group%2Frepo?x=1", path: "/api/v4/projects/group/repo", fwdPath: "/api/v4/projects/group%2Frepo", query: "x=1", slashes: true},
	{in: "/@scope%2fpkg", path: "/@scope/pkg", fwdPath: "/@scope%2fpkg", slashes: true},
	{in: "/api/queues/%2F/orders", path: "/api/queues///orders", fwdPath: "/api/queues/%2F/orders", slashes: true},
	{in: "/files/a%5cb", path: "/files/a\\b", fwdPath: "/files/a%5cb", slashes: true},
	{in: "/a/../b%2Fc", path: "/b/c", fwdPath: "/b%2Fc", slashes: true},
	// ... unless they make dot segments, which the backend might resolve
	// differently from the router.
	{in: "/public/..%2Fadmin", status: 400, reason: RejectSlash},
	{in: "/public/%2e%2e%2Fadmin", status: 400, reason: RejectSlash},
	{in: "/public/..%5Cadmin", status: 400, reason: RejectSlash},
	{in: "/a%2F.%2Fb", status: 400, reason: RejectSlash},
	{in: "/files/a\\b", status: 400, reason: RejectSlash},
	{in: "/x%00y", status: 400, reason: RejectNUL},
	{in: "/bad%zzescape", status: 400, reason: RejectEscape},
	{in: "/ctl\x01", status: 400, reason: RejectControl},
	{in: "/s?q=\xff", reject: true, status: 400, reason: RejectNonASCII},
	// The query is forwarded as received: it plays no part in routing.
	{in: "/x?y=%00", path: "/x", fwdPath: "/x", query: "y=%00"},
	{in: "/x?q=100%", path: "/x", fwdPath: "/x", query: "q=100%"},
	{in: "/x?q=%zz&r=%", path: "/x", fwdPath: "/x", query: "q=%zz&r=%"},
	{in: "/x?q=a%2Fb/../c", path: "/x", fwdPath: "/x", query: "q=a%2Fb/../c"},
	{in: "/x?q=100%&s=\xc3\xa9", path: "/x", fwdPath: "/x", query: "q=100%&s=%C3%A9"},
	{in: "/.well-known/acme", path: "/.well-known/acme", fwdPath: "/.well-known/acme"},
	{in: "/img/https://cdn.example.com/caf\xc3\xa9.png", path: "/img/https://cdn.example.com/caf\xc3\xa9.png", fwdPath: "/img/https://cdn.example.com/caf%C3%A9.png"},
	{in: "/go/http://x/../admin", path: "/go/http://admin", fwdPath: "/go/http://admin"},
}

func TestTargets(t *testing.T) {
	for _, c := range targets {
		e := New(c.reject, nil, nil, nil)
		r := request(c.in)
		status, why, slashes := e.Check(r)
		if status != c.status {
			t.Errorf("%q: status %d (%s), want %d", c.in, status, why, c.status)
			continue
		}
		if status != 0 {
			if e.C.Count(c.reason) != 1 {
				t.Errorf("%q: refused, but not counted as %s", c.in, c.reason)
			}
			continue
		}
		if slashes != c.slashes {
			t.Errorf("%q: encoded slashes %v, want %v", c.in, slashes, c.slashes)
		}
		if r.URL.Path != c.path || r.URL.EscapedPath() != c.fwdPath {
			t.Errorf("%q: path %q forwarded as %q, want %q and %q", c.in, r.URL.Path, r.URL.EscapedPath(), c.path, c.fwdPath)
		}
		if c.query != "" && r.URL.RawQuery != c.query {
			t.Errorf("%q: query %q, want %q", c.in, r.URL.RawQuery, c.query)
		}
	}
}

func TestDenyUsesTheRealClient(t *testing.T) {
	deny := []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	e := New(false, deny, trusted, nil)
	for _, c := range []struct {
		remote, xff string
		want        int
	}{
		{"203.0.113.9:5000", "", 403},
		{"192.0.2.1:5000", "203.0.113.9", 0},  // untrusted peer: its XFF is ignored
		{"10.1.1.1:5000", "203.0.113.9", 403}, // trusted proxy: the client behind it
		{"10.1.1.1:5000", "203.0.113.9, 10.2.2.2", 403},
		{"10.1.1.1:5000", "198.51.100.1", 0},
	} {
		r := request("/")
		r.RemoteAddr = c.remote
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		if got, _, _ := e.Check(r); got != c.want {
			t.Errorf("%s xff %q: %d, want %d", c.remote, c.xff, got, c.want)
		}
	}
	if e.C.Count(Denied) != 3 {
		t.Errorf("denied counter %d", e.C.Count(Denied))
	}
}

func FuzzCheck(f *testing.F) {
	for _, c := range targets {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, target string) {
		if _, err := url.ParseRequestURI(target); err != nil {
			return // net/http refuses it before any handler
		}
		e := New(false, nil, nil, nil)
		r := request(target)
		status, _, slashes := e.Check(r)
		if status != 0 {
			return
		}
		// Whatever goes on is routed on the path it is forwarded with.
		fwd := r.URL.EscapedPath()
		back, err := url.PathUnescape(fwd)
		if err == nil && back != r.URL.Path {
			t.Fatalf("%q: routed on %q, forwarded %q", target, r.URL.Path, fwd)
		}
		// Encoded slashes are always flagged, and never hide a dot segment.
		if EncodedSlashes(fwd) && !slashes {
			t.Fatalf("%q: forwarded %q with encoded slashes, not flagged", target, fwd)
		}
		if slashes && hasDotSegment(strings.ReplaceAll(r.URL.Path, "\\", "/")) {
			t.Fatalf("%q: routed on %q, a dot segment behind encoded slashes", target, r.URL.Path)
		}
	})
}

func BenchmarkCheckClean(b *testing.B) {
	e := New(false, nil, nil, nil)
	r := request("/api/v1/users/42?include=profile&limit=10")
	b.ReportAllocs()
	for b.Loop() {
		e.Check(r)
	}
}
