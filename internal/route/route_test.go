package route

import "testing"

func entry(name, path string, def bool, hosts ...string) *Entry[string] {
	return &Entry[string]{Hosts: hosts, Path: path, Default: def, Value: name}
}

var table = New([]*Entry[string]{
	entry("api", "/api/", false, "api.example.com"),
	entry("api-v2", "/api/v2", false, "api.example.com"),
	entry("api-root", "/", false, "api.example.com"),
	entry("wild", "/", false, "*.example.com"),
	entry("wild-deep", "/", false, "*.eu.example.com"),
	entry("reports", "/reports", false),
	entry("catchall", "/", true, "www.example.org"),
})

var matchCases = []struct {
	host, path, want string
}{
	{"api.example.com", "/api/users", "api"},
	{"API.Example.COM:8443", "/api/users", "api"},
	{"api.example.com.", "/api/users", "api"},
	{"api.example.com", "/api/v2", "api-v2"},
	{"api.example.com", "/api/v2/x", "api-v2"},
	{"api.example.com", "/api/v2x", "api"},
	{"api.example.com", "/other", "api-root"},
	{"shop.example.com", "/", "wild"},
	{"a.b.example.com", "/x", "wild"},
	{"x.eu.example.com", "/x", "wild-deep"},
	{"example.com", "/reports/1", "reports"},
	{"example.com", "/reportsx", "catchall"},
	{"unknown.test", "/x", "catchall"},
	{"www.example.org", "/x", "catchall"},
	{"[::1]:8080", "/reports", "reports"},
	{"shop.example.com", "/reports", "wild"},
}

func TestMatch(t *testing.T) {
	for _, c := range matchCases {
		e, ok := table.Match(c.host, c.path)
		if !ok || e.Value != c.want {
			got := "<none>"
			if ok {
				got = e.Value
			}
			t.Errorf("Match(%q, %q) = %s, want %s", c.host, c.path, got, c.want)
		}
	}
}

func TestNoDefaultNoMatch(t *testing.T) {
	tb := New([]*Entry[string]{entry("api", "/", false, "api.example.com")})
	if e, ok := tb.Match("other.example.com", "/"); ok {
		t.Fatalf("matched %s; want no route", e.Value)
	}
}

func BenchmarkMatch(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		table.Match("shop.example.com:443", "/api/users")
	}
}
