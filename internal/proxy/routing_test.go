package proxy

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/route/subst"
)

// Gateway API's ReplacePrefixMatch table (HTTPPathModifier), row by row,
// and nginx's character replacement for starts_with.
func TestReplacePrefix(t *testing.T) {
	cases := []struct {
		path  string
		match Prefix
		repl  string
		want  string
	}{
		{"/foo/bar", Prefix{"/foo", true}, "/xyz", "/xyz/bar"},
		{"/foo/bar", Prefix{"/foo", true}, "/xyz/", "/xyz/bar"},
		{"/foo/bar", Prefix{"/foo/", true}, "/xyz", "/xyz/bar"},
		{"/foo/bar", Prefix{"/foo/", true}, "/xyz/", "/xyz/bar"},
		{"/foo", Prefix{"/foo", true}, "/xyz", "/xyz"},
		{"/foo/", Prefix{"/foo", true}, "/xyz", "/xyz/"},
		{"/foo/bar", Prefix{"/foo", true}, "", "/bar"},
		{"/foo/", Prefix{"/foo", true}, "", "/"},
		{"/foo", Prefix{"/foo", true}, "", "/"},
		{"/foo/", Prefix{"/foo", true}, "/", "/"},
		{"/foo", Prefix{"/foo", true}, "/", "/"},
		{"/a", Prefix{"/", true}, "/xyz", "/xyz/a"},
		{"/caf%C3%A9/x", Prefix{"/café", true}, "/c", "/c/x"},
		// starts_with: characters, as nginx's proxy_pass with a URI.
		{"/api/users", Prefix{"/api/", false}, "/v1/", "/v1/users"},
		{"/apix", Prefix{"/api", false}, "/v1", "/v1x"},
		{"/api/x", Prefix{"/api", false}, "/v1/", "/v1//x"},
		{"/api/x", Prefix{"/api/", false}, "", "/x"},
	}
	for _, c := range cases {
		u, err := url.Parse(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := replacePrefix(u, c.match, c.repl); got != c.want {
			t.Errorf("replace %+v by %q in %s = %q, want %q", c.match, c.repl, c.path, got, c.want)
		}
	}
}

func TestRawOffset(t *testing.T) {
	for _, c := range []struct {
		esc  string
		n    int
		want int
	}{{"/abc", 2, 2}, {"/%41bc", 2, 4}, {"/caf%C3%A9/x", 6, 10}, {"/a", 9, 2}} {
		if got := rawOffset(c.esc, c.n); got != c.want {
			t.Errorf("rawOffset(%q, %d) = %d, want %d", c.esc, c.n, got, c.want)
		}
	}
}

func mustTemplate(t *testing.T, s string) *subst.Template {
	t.Helper()
	tm, err := subst.Parse(s, subst.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// Rules without variables cost no allocation: set and remove never, add
// only onto a header that is already there.
func TestStaticHeaderRulesAllocateNothing(t *testing.T) {
	hr := &HeaderRules{
		Remove: []string{"Server", "X-Powered-By"},
		Set:    []HeaderValue{NewHeaderValue("X-Frame-Options", mustTemplate(t, "DENY")), NewHeaderValue("X-Content-Type-Options", mustTemplate(t, "nosniff"))},
		Add:    []HeaderValue{NewHeaderValue("X-Served-By", mustTemplate(t, "sturdy"))},
	}
	if hr.Dynamic() {
		t.Fatal("static rules reported as dynamic")
	}
	h := make(http.Header, 16)
	if n := testing.AllocsPerRun(100, func() {
		h["Server"] = nil
		delete(h, "X-Served-By")
		hr.Apply(h, nil)
	}); n != 0 {
		t.Errorf("static rules allocate %.0f times per request, want 0", n)
	}
	if h.Get("X-Frame-Options") != "DENY" || h.Get("X-Served-By") != "sturdy" || h["Server"] != nil {
		t.Fatalf("rules not applied: %v", h)
	}
	// Adding onto an existing value copies: the shared value is not changed.
	h["X-Served-By"] = []string{"backend"}
	hr.Apply(h, nil)
	if got := h["X-Served-By"]; len(got) != 2 || got[0] != "backend" || got[1] != "sturdy" || len(hr.Add[0].static) != 1 {
		t.Fatalf("add onto an existing header: %q, shared value %q", got, hr.Add[0].static)
	}
}

// Weighted backends get their share within a request or two in every
// window, with no table, whatever the weights.
func TestWeightedBackendsSpreadEvenly(t *testing.T) {
	for _, weights := range [][]uint64{{95, 5}, {1, 1, 1}, {999_999, 1}, {3, 0, 1}} {
		var list []*Backend
		var total uint64
		for _, w := range weights {
			list = append(list, &Backend{Weight: w})
			total += w
		}
		b := NewBackends(nil, list)
		const window, windows = 1000, 20
		for k := range windows {
			got := map[*Backend]int{}
			for range window {
				got[b.pick(&http.Request{})]++
			}
			for i, be := range list {
				want := float64(window) * float64(be.Weight) / float64(total)
				if d := float64(got[be]) - want; d > 3 || d < -3 {
					t.Errorf("weights %v, window %d: backend %d got %d of %d, want %.1f", weights, k, i, got[be], window, want)
				}
			}
		}
	}
}

func TestMirrorShareIsExact(t *testing.T) {
	for _, s := range [][2]uint64{{1, 1}, {1, 2}, {1, 3}, {5, 1000}, {0, 100}} {
		m := &Mirror{Num: s[0], Den: s[1]}
		n := 0
		for range 3000 {
			if m.take() {
				n++
			}
		}
		if want := int(3000 * s[0] / s[1]); n != want {
			t.Errorf("share %d/%d: %d of 3000 taken, want %d", s[0], s[1], n, want)
		}
	}
}

func TestProxyHost(t *testing.T) {
	for _, c := range [][3]string{{"10.0.0.1:80", "http", "10.0.0.1"}, {"10.0.0.1:8080", "http", "10.0.0.1:8080"}, {"api:443", "https", "api"}, {"api:80", "https", "api:80"}, {"unix:/run/app.sock", "http", "localhost"}} {
		if got := proxyHost(c[0], c[1]); got != c[2] {
			t.Errorf("proxyHost(%s, %s) = %s, want %s", c[0], c[1], got, c[2])
		}
	}
}
