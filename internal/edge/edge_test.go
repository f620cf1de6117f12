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
	keep          bool // merge_slashes: false
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
	{in: "/img/https://cdn.example.com/caf\xc3\xa9.png", path: "/img/https://cdn.example.com/caf\xc3\xa9.png", fwdPath: "/img/https://cdn.example.com/caf%C3%A9.png", keep: true},
	{in: "/go/http://x/../admin", path: "/go/http://admin", fwdPath: "/go/http://admin", keep: true},
	{in: "/img/https://cdn.example.com/a.png", path: "/img/https:/cdn.example.com/a.png", fwdPath: "/img/https:/cdn.example.com/a.png"},
	// Runs of slashes are merged, before dot segments (as nginx does:
	// /a//../b is /b), in the path alone.
	{in: "//admin/x", path: "/admin/x", fwdPath: "/admin/x"},
	{in: "///admin//x///?q=a//b", path: "/admin/x/", fwdPath: "/admin/x/", query: "q=a//b"},
	{in: "/a//../b", path: "/b", fwdPath: "/b"},
	{in: "/x/..//admin/x", path: "/admin/x", fwdPath: "/admin/x"},
	{in: "/.//admin/x", path: "/admin/x", fwdPath: "/admin/x"},
	{in: "/%2e//admin/x", path: "/admin/x", fwdPath: "/admin/x"},
	{in: "http://site.test//admin/x?y=1", path: "/admin/x", fwdPath: "/admin/x", query: "y=1"},
	{in: "http://site.test", path: "/", fwdPath: "/"},
	{in: "//admin/x", path: "//admin/x", fwdPath: "//admin/x", keep: true},
	{in: "/a//../b", path: "/a/b", fwdPath: "/a/b", keep: true},
	// Encoded slashes are not slashes: not merged.
	{in: "/q/%2F%2F/x", path: "/q////x", fwdPath: "/q/%2F%2F/x", slashes: true},
	// Encoded unreserved characters are decoded, for the backend too;
	// other encodings stay as sent.
	{in: "/%61dmin/x", path: "/admin/x", fwdPath: "/admin/x"},
	{in: "/%7Euser/%41%2d%5F%2E", path: "/~user/A-_.", fwdPath: "/~user/A-_."},
	{in: "/a%3Bb/c%3fd/e%25f/g%20h", path: "/a;b/c?d/e%f/g h", fwdPath: "/a%3Bb/c%3fd/e%25f/g%20h"},
	{in: "/%252e%252e/admin", path: "/%2e%2e/admin", fwdPath: "/%252e%252e/admin"},
	{in: "/%2E%2e/%2e/admin", path: "/admin", fwdPath: "/admin"},
	// Path parameters are part of the segment: "..;" is not a dot segment
	// here (the proxy refuses it where it would change the route).
	{in: "/a/..;/b", path: "/a/..;/b", fwdPath: "/a/..;/b"},
}

func TestTargets(t *testing.T) {
	for _, c := range targets {
		e := New(c.reject, nil, nil, nil)
		r := request(c.in)
		status, why, slashes := e.Check(r, !c.keep)
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
		if got, _, _ := e.Check(r, true); got != c.want {
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
		for _, merge := range []bool{true, false} {
			checkTarget(t, target, merge)
		}
	})
}

func checkTarget(t *testing.T, target string, merge bool) {
	e := New(false, nil, nil, nil)
	r := request(target)
	status, _, slashes := e.Check(r, merge)
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
	// The forwarded path is normal: no dot segment, no run of slashes
	// when merging, no encoded unreserved character; a backend that
	// normalises it as nginx does reads what was routed on.
	if hasDotSegment(fwd) || merge && strings.Contains(fwd, "//") || decodeUnreserved(fwd) != fwd {
		t.Fatalf("%q (merge %v): forwarded %q, not normalised", target, merge, fwd)
	}
	// ... and a fixed point: sent again, it is routed and forwarded as is.
	again := fwd
	if r.URL.RawQuery != "" {
		again += "?" + r.URL.RawQuery
	}
	r2 := request(again)
	if st, _, _ := e.Check(r2, merge); st != 0 || r2.URL.Path != r.URL.Path || r2.URL.EscapedPath() != fwd {
		t.Fatalf("%q (merge %v): forwarded %q, which is routed on %q (status %d), forwarded %q", target, merge, again, r2.URL.Path, st, r2.URL.EscapedPath())
	}
}

func BenchmarkCheckClean(b *testing.B) {
	e := New(false, nil, nil, nil)
	r := request("/api/v1/users/42?include=profile&limit=10")
	b.ReportAllocs()
	for b.Loop() {
		e.Check(r, true)
	}
}
