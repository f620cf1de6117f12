package route

import (
	"net/http"
	"net/url"
	"regexp"
	"testing"
)

// Match builders for the tables below.
func prefix(p string) Match     { return Match{Path: PathMatch{Kind: Prefix, Value: p}} }
func exact(p string) Match      { return Match{Path: PathMatch{Kind: Exact, Value: p}} }
func startsWith(p string) Match { return Match{Path: PathMatch{Kind: StartsWith, Value: p}} }
func before(p string) Match {
	return Match{Path: PathMatch{Kind: StartsWith, Value: p, BeforeRegex: true}}
}
func regex(re string) Match {
	return Match{Path: PathMatch{Kind: Regex, Value: re, Re: regexp.MustCompile(re)}}
}

func (m Match) methods(ms ...string) Match { m.Methods = ms; return m }
func (m Match) header(name string, v ValueMatch) Match {
	m.Headers = append(m.Headers, Header{Name: http.CanonicalHeaderKey(name), ValueMatch: v})
	return m
}
func (m Match) query(name string, v ValueMatch) Match {
	m.Query = append(m.Query, Query{Name: name, ValueMatch: v})
	return m
}

func is(v string) ValueMatch    { return ValueMatch{Kind: ValueExact, Value: v} }
func like(re string) ValueMatch { return ValueMatch{Kind: ValueRegex, Re: regexp.MustCompile(re)} }
func present() ValueMatch       { return ValueMatch{Kind: ValuePresent} }
func absent() ValueMatch        { return ValueMatch{Kind: ValueAbsent} }
func on(name string, m Match, hosts ...string) *Entry[string] {
	return &Entry[string]{Hosts: hosts, Match: m, Value: name}
}

// req is a request for the tables: "GET http://host/path?query" plus headers.
func req(method, target string, hdr ...string) *http.Request {
	u, err := url.Parse(target)
	if err != nil {
		panic(err)
	}
	r := &http.Request{Method: method, URL: u, Host: u.Host, Header: http.Header{}}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	return r
}

type precedenceCase struct {
	name    string
	entries []*Entry[string]
	req     *http.Request
	want    string // "" for no match
}

var precedenceCases = []precedenceCase{
	{"exact beats a longer prefix and a regex",
		[]*Entry[string]{on("prefix", prefix("/login/x")), on("regex", regex("^/login")), on("exact", exact("/login"))},
		req("GET", "http://h/login"), "exact"},
	{"exact needs the whole path",
		[]*Entry[string]{on("exact", exact("/login")), on("root", prefix("/"))},
		req("GET", "http://h/login/"), "root"},
	{"regex beats a plain prefix (nginx)",
		[]*Entry[string]{on("root", prefix("/")), on("php", regex(`\.php$`))},
		req("GET", "http://h/index.php"), "php"},
	{"the longest prefix marked before_regex beats a regex (nginx ^~)",
		[]*Entry[string]{on("static", before("/static/")), on("img", regex(`\.png$`))},
		req("GET", "http://h/static/a.png"), "static"},
	{"a before_regex prefix that is not the longest does not stop regexes (nginx)",
		[]*Entry[string]{on("static", before("/static/")), on("deep", startsWith("/static/deep/")), on("img", regex(`\.png$`))},
		req("GET", "http://h/static/deep/a.png"), "img"},
	{"the longest prefix is used when no regex matches",
		[]*Entry[string]{on("short", prefix("/a")), on("long", prefix("/a/b")), on("img", regex(`\.png$`))},
		req("GET", "http://h/a/b/c"), "long"},
	{"regexes are tried in config order",
		[]*Entry[string]{on("first", regex(`^/a`)), on("second", regex(`^/a/b`))},
		req("GET", "http://h/a/b"), "first"},
	{"prefix matches whole segments",
		[]*Entry[string]{on("api", prefix("/api")), on("root", prefix("/"))},
		req("GET", "http://h/apix"), "root"},
	{"starts_with matches characters",
		[]*Entry[string]{on("api", startsWith("/api")), on("root", prefix("/"))},
		req("GET", "http://h/apix"), "api"},
	{"case-insensitive regex",
		[]*Entry[string]{on("img", Match{Path: PathMatch{Kind: Regex, Value: `\.jpg$`, Re: regexp.MustCompile(`(?i)\.jpg$`)}}), on("root", prefix("/"))},
		req("GET", "http://h/A.JPG"), "img"},
	{"path before conditions: a longer prefix beats more conditions",
		[]*Entry[string]{on("cond", prefix("/api").header("X-A", is("1")).methods("GET")), on("long", prefix("/api/v1"))},
		req("GET", "http://h/api/v1/x", "X-A", "1"), "long"},
	{"a method condition ranks above header conditions (Gateway API)",
		[]*Entry[string]{on("headers", prefix("/").header("X-A", is("1")).header("X-B", is("2"))), on("method", prefix("/").methods("GET"))},
		req("GET", "http://h/", "X-A", "1", "X-B", "2"), "method"},
	{"more headers rank above fewer",
		[]*Entry[string]{on("one", prefix("/").header("X-A", is("1"))), on("two", prefix("/").header("X-A", is("1")).header("X-B", is("2")))},
		req("GET", "http://h/", "X-A", "1", "X-B", "2"), "two"},
	{"headers rank above query parameters",
		[]*Entry[string]{on("query", prefix("/").query("a", is("1")).query("b", is("2"))), on("header", prefix("/").header("X-A", is("1")))},
		req("GET", "http://h/?a=1&b=2", "X-A", "1"), "header"},
	{"ties go to config order",
		[]*Entry[string]{on("first", prefix("/").header("X-A", is("1"))), on("second", prefix("/").header("X-B", is("1")))},
		req("GET", "http://h/", "X-A", "1", "X-B", "1"), "first"},
	{"a failed condition falls to the next route",
		[]*Entry[string]{on("post", prefix("/").methods("POST")), on("any", prefix("/"))},
		req("GET", "http://h/"), "any"},
	{"header names are case-insensitive, values are not",
		[]*Entry[string]{on("canary", prefix("/").header("x-canary", is("Yes"))), on("any", prefix("/"))},
		req("GET", "http://h/", "X-CANARY", "yes"), "any"},
	{"header regex",
		[]*Entry[string]{on("bot", prefix("/").header("User-Agent", like(`(?i)bot`))), on("any", prefix("/"))},
		req("GET", "http://h/", "User-Agent", "GoogleBot/2.1"), "bot"},
	{"header present",
		[]*Entry[string]{on("auth", prefix("/").header("Authorization", present())), on("any", prefix("/"))},
		req("GET", "http://h/", "Authorization", ""), "auth"},
	{"header absent",
		[]*Entry[string]{on("anon", prefix("/").header("Cookie", absent())), on("any", prefix("/"))},
		req("GET", "http://h/", "Cookie", "a=1"), "any"},
	{"a repeated header is matched joined by commas",
		[]*Entry[string]{on("both", prefix("/").header("X-A", is("1,2"))), on("any", prefix("/"))},
		req("GET", "http://h/", "X-A", "1", "X-A", "2"), "both"},
	{"query: the first value, decoded",
		[]*Entry[string]{on("q", prefix("/").query("q", is("a b"))), on("any", prefix("/"))},
		req("GET", "http://h/?q=a+b&q=c"), "q"},
	{"query: encoded names",
		[]*Entry[string]{on("q", prefix("/").query("a b", present())), on("any", prefix("/"))},
		req("GET", "http://h/?a%20b=1"), "q"},
	{"query: a parameter without value is present",
		[]*Entry[string]{on("debug", prefix("/").query("debug", present())), on("any", prefix("/"))},
		req("GET", "http://h/?x=1&debug"), "debug"},
	{"query: absent",
		[]*Entry[string]{on("nodebug", prefix("/").query("debug", absent())), on("any", prefix("/"))},
		req("GET", "http://h/?debug=1"), "any"},
	{"query regex",
		[]*Entry[string]{on("v", prefix("/").query("v", like(`^[0-9]+$`))), on("any", prefix("/"))},
		req("GET", "http://h/?v=12"), "v"},
	{"host first: an exact host beats a longer path on any host",
		[]*Entry[string]{on("deep", prefix("/a/b/c")), on("host", prefix("/"), "h.example")},
		req("GET", "http://h.example/a/b/c"), "host"},
	{"a host group that matches nothing falls through",
		[]*Entry[string]{on("host", exact("/only"), "h.example"), on("wild", prefix("/"), "*.example")},
		req("GET", "http://h.example/other"), "wild"},
	{"no match",
		[]*Entry[string]{on("api", prefix("/api"))},
		req("GET", "http://h/x"), ""},
}

func TestPrecedence(t *testing.T) {
	for _, c := range precedenceCases {
		t.Run(c.name, func(t *testing.T) {
			e, ok := New(c.entries).MatchRequest(c.req)
			got := ""
			if ok {
				got = e.Value
			}
			if got != c.want {
				t.Errorf("%s %s -> %q, want %q", c.req.Method, c.req.URL, got, c.want)
			}
		})
	}
}

// An HTTPRoute's rules as a translator writes them (one route per match,
// in the rules' order): sturdy picks what Gateway API's precedence picks.
func TestGatewayAPIOrder(t *testing.T) {
	tb := New([]*Entry[string]{
		on("v1", prefix("/")),
		on("v2", prefix("/v2")),
		on("v2-header", prefix("/").header("version", is("two"))),
		on("v2-exact", exact("/v2/example")),
		on("v2-both", prefix("/v2").header("version", is("two")).methods("GET")),
	})
	cases := []struct {
		r    *http.Request
		want string
	}{
		{req("GET", "http://h/"), "v1"},
		{req("GET", "http://h/example"), "v1"},
		{req("GET", "http://h/", "version", "two"), "v2-header"},
		{req("GET", "http://h/v2"), "v2"},
		{req("GET", "http://h/v2/example"), "v2-exact"},
		{req("GET", "http://h/v2/x", "version", "two"), "v2-both"},
		{req("POST", "http://h/v2/x", "version", "two"), "v2"},
	}
	for _, c := range cases {
		if e, ok := tb.MatchRequest(c.r); !ok || e.Value != c.want {
			t.Errorf("%s %s %v -> %v, want %s", c.r.Method, c.r.URL, c.r.Header, e, c.want)
		}
	}
}

func TestShadows(t *testing.T) {
	cases := []struct {
		name    string
		entries []*Entry[string]
		want    map[string]string // shadowed -> by
	}{
		{"the same prefix twice", []*Entry[string]{on("a", prefix("/x")), on("b", prefix("/x"))}, map[string]string{"b": "a"}},
		{"the same exact path twice", []*Entry[string]{on("a", exact("/x")), on("b", exact("/x"))}, map[string]string{"b": "a"}},
		{"the same regex twice", []*Entry[string]{on("a", regex("^/x")), on("b", regex("^/x"))}, map[string]string{"b": "a"}},
		{"different regexes are not compared", []*Entry[string]{on("a", regex("^/x")), on("b", regex("^/x/y"))}, nil},
		{"starts_with hides a prefix of the same value", []*Entry[string]{on("a", startsWith("/x")), on("b", prefix("/x"))}, map[string]string{"b": "a"}},
		{"a prefix does not hide starts_with", []*Entry[string]{on("a", prefix("/x")), on("b", startsWith("/x"))}, nil},
		{"a present header hides an exact value at the same rank", []*Entry[string]{on("a", prefix("/").header("X", present())), on("b", prefix("/").header("x", is("1")))}, map[string]string{"b": "a"}},
		{"more methods hide fewer", []*Entry[string]{on("a", prefix("/").methods("GET", "HEAD")), on("b", prefix("/").methods("GET"))}, map[string]string{"b": "a"}},
		{"more conditions rank higher: not hidden", []*Entry[string]{on("a", prefix("/")), on("b", prefix("/").header("X", is("1")))}, nil},
		{"different headers overlap but neither hides", []*Entry[string]{on("a", prefix("/").header("X", is("1"))), on("b", prefix("/").header("Y", is("1")))}, nil},
		{"different hosts", []*Entry[string]{on("a", prefix("/"), "a.example"), on("b", prefix("/"), "b.example")}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := map[string]string{}
			for _, s := range New(c.entries).Shadows() {
				got[s.Entry.Value] = s.By.Value
			}
			if len(got) != len(c.want) {
				t.Fatalf("shadows %v, want %v", got, c.want)
			}
			for k, v := range c.want {
				if got[k] != v {
					t.Errorf("shadows %v, want %v", got, c.want)
				}
			}
		})
	}
}

func TestQueryValue(t *testing.T) {
	cases := []struct {
		raw, name, want string
		ok              bool
	}{
		{"a=1&b=2", "b", "2", true},
		{"a=1&a=2", "a", "1", true},
		{"a", "a", "", true},
		{"a=", "a", "", true},
		{"ab=1", "a", "", false},
		{"x=%41", "x", "A", true},
		{"%78=1", "x", "1", true},
		{"", "a", "", false},
	}
	for _, c := range cases {
		v, ok := QueryValue(c.raw, c.name)
		if v != c.want || ok != c.ok {
			t.Errorf("QueryValue(%q, %q) = %q, %v; want %q, %v", c.raw, c.name, v, ok, c.want, c.ok)
		}
	}
}

func BenchmarkMatchRequestConditions(b *testing.B) {
	tb := New([]*Entry[string]{
		on("canary", prefix("/api").header("X-Canary", is("1"))),
		on("php", regex(`\.php$`)),
		on("api", prefix("/api")),
		on("root", prefix("/")),
	})
	r := req("GET", "http://h/api/users?id=1", "X-Canary", "0")
	b.ReportAllocs()
	for b.Loop() {
		tb.MatchRequest(r)
	}
}
