package subst

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

func request(target string, hdr ...string) *http.Request {
	u, err := url.Parse(target)
	if err != nil {
		panic(err)
	}
	r := &http.Request{Method: "GET", URL: u, Host: u.Host, Header: http.Header{}, RequestURI: u.RequestURI()}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	return r
}

var pathRE = regexp.MustCompile(`^/u/(?P<user>[^/]+)/(.*)$`)

var expandCases = []struct {
	tmpl string
	ctx  Context
	r    *http.Request
	want string
}{
	{"static value", Header, request("http://h/"), "static value"},
	{"$host", Header, request("http://Shop.Example:8080/"), "shop.example"},
	{"$http_host", Header, request("http://Shop.Example:8080/"), "Shop.Example:8080"},
	{"$request_uri", Header, request("http://h/a%20b?x=1"), "/a%20b?x=1"},
	{"$uri", Header, request("http://h/a%20b?x=1"), "/a b"},
	{"$uri", URL, request("http://h/a%20b?x=1"), "/a%20b"},
	{"$uri$is_args$args", URL, request("http://h/p?x=1&y=2"), "/p?x=1&y=2"},
	{"$uri$is_args$args", URL, request("http://h/p"), "/p"},
	{"$query_string", Header, request("http://h/p?a=b"), "a=b"},
	{"$scheme://$host", Header, request("http://h/"), "https://h"},
	{"$remote_addr", Header, request("http://h/"), "192.0.2.9"},
	{"id=$request_id", Header, request("http://h/"), "id=abc123"},
	{"$request_method", Header, request("http://h/"), "GET"},
	{"$http_user_agent", Header, request("http://h/", "User-Agent", "curl/8"), "curl/8"},
	{"[$http_x_missing]", Header, request("http://h/"), "[]"},
	{"$http_x_a", Header, request("http://h/", "X-A", "1", "X-A", "2"), "1, 2"},
	{"/users/$1/$2", URL, request("http://h/u/bob/x%20y"), "/users/bob/x%20y"},
	{"/users/${user}x", URL, request("http://h/u/bob/rest"), "/users/bobx"},
	{"$user", Header, request("http://h/u/bob/rest"), "bob"},
	{"$1", Header, request("http://h/nomatch"), ""},
	{"$$5 and $$", Header, request("http://h/"), "$5 and $"},
	{"${uri}x", Header, request("http://h/p"), "/px"},
	{"a $uri b", Header, request("http://h/a%0d%0aInjected:%201"), "a /aInjected: 1 b"},
	{"$uri", Header, request("http://h/a%0aX"), "/aX"},
	{"https://$host$request_uri", URL, request("http://[::1]:8080/x?y"), "https://[::1]/x?y"},
	// $server_port is the listener's, not the Host's.
	{"$host:$server_port", Header, onPort(request("http://h:9999/"), 8448), "h:8448"},
	{"$server_port", Header, request("http://h:9999/"), "80"},
	{"[$cookie_session]", Header, request("http://h/", "Cookie", "a=1; session=s3"), "[s3]"},
	{"[$cookie_none]", Header, request("http://h/", "Cookie", "a=1"), "[]"},
}

// onPort is r as received on a listener of that port.
func onPort(r *http.Request, port int) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}))
}

func TestExpand(t *testing.T) {
	for _, c := range expandCases {
		tm, err := Parse(c.tmpl, Options{Context: c.ctx, Regex: pathRE, RequestID: true})
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.tmpl, err)
		}
		v := &Vars{R: c.r, Scheme: "https", RemoteAddr: "192.0.2.9", RequestID: "abc123", Regex: pathRE, Subject: c.r.URL.Path}
		if got := tm.Expand(v); got != c.want {
			t.Errorf("%q on %s = %q, want %q", c.tmpl, c.r.URL, got, c.want)
		}
	}
}

var parseErrors = []struct {
	tmpl string
	o    Options
	want string
}{
	{"$nope", Options{}, "unknown variable $nope"},
	{"$1", Options{}, "no regular expression"},
	{"$3", Options{Regex: regexp.MustCompile(`(a)(b)`)}, "has 2 capture groups"},
	{"${uri", Options{}, "without a closing }"},
	{"cost: 5$", Options{}, "write $$ for a dollar sign"},
	{"$proxy_host", Options{}, "only known in host_header"},
	{"$request_id", Options{}, "needs request_id"},
}

func TestParseErrors(t *testing.T) {
	for _, c := range parseErrors {
		_, err := Parse(c.tmpl, c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", c.tmpl, err, c.want)
		}
	}
}

// A template without variables, or one variable in a header, costs no
// allocation per request.
func TestExpandAllocs(t *testing.T) {
	r := request("http://h/p?q", "User-Agent", "x")
	for _, s := range []string{"DENY", "$http_user_agent", "$host"} {
		tm, _ := Parse(s, Options{})
		v := &Vars{R: r}
		if n := testing.AllocsPerRun(100, func() { tm.Expand(v) }); n != 0 {
			t.Errorf("Expand(%q) allocates %.0f times, want 0", s, n)
		}
	}
}
