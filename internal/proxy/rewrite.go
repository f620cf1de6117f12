package proxy

import (
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/route/subst"
)

// Prefix is the prefix a route matched, for rewrites and redirects that
// replace it: whole segments (a Prefix match, Gateway API's
// ReplacePrefixMatch) or characters (a StartsWith match, nginx's
// proxy_pass with a URI).
type Prefix struct {
	Value    string
	Segments bool
}

// Rewrite changes the path the backend receives; the query is kept.
// Exactly one of Prefix and Path is set.
type Rewrite struct {
	// Prefix replaces Match, the prefix the route matched.
	Prefix *subst.Template
	Match  Prefix
	// Path replaces the whole path; with Regex, only paths Regex matches,
	// and $1..$9 are Regex's captures.
	Path  *subst.Template
	Regex *regexp.Regexp
	// Query, when set, replaces the query (nginx's proxy_pass with a ?).
	Query *subst.Template
}

// Redirect answers with a redirect: URL, or the request's URL with the
// parts set here replaced.
type Redirect struct {
	Status int
	URL    *subst.Template
	Scheme string // "" keeps the request's
	Host   string // "" keeps the request's
	Port   int    // 0: see Location
	Path   *subst.Template
	Prefix *subst.Template // replaces Match
	Match  Prefix
}

// rewrite sets the outbound URL's path.
func (f *forwarder) rewrite(rw *Rewrite) {
	r := f.r
	var out string
	v := f.templateVars()
	switch {
	case rw.Prefix != nil:
		out = replacePrefix(r.URL, rw.Match, rw.Prefix.Expand(v))
	case rw.Regex != nil:
		if !rw.Regex.MatchString(r.URL.Path) {
			return
		}
		own := *v // its own captures: those of rw.Regex
		own.Regex = rw.Regex
		v = &own
		out = rw.Path.Expand(v)
	default:
		out = rw.Path.Expand(v)
	}
	setEscapedPath(f.url, out)
	if rw.Query != nil {
		f.url.RawQuery = rw.Query.Expand(v)
	}
}

// replacePrefix replaces the matched prefix of u's path with repl (in
// escaped form) and returns the escaped result.
func replacePrefix(u *url.URL, m Prefix, repl string) string {
	esc := u.EscapedPath()
	if !m.Segments {
		out := repl + esc[rawOffset(esc, len(m.Value)):]
		if !strings.HasPrefix(out, "/") {
			out = "/" + out
		}
		return out
	}
	// Whole segments, as Gateway API's ReplacePrefixMatch: a trailing
	// slash of the prefix or the replacement does not double the one
	// that starts the rest.
	p := strings.TrimSuffix(m.Value, "/")
	rest := esc[rawOffset(esc, len(p)):]
	switch {
	case repl == "" || repl == "/":
		if rest == "" {
			return "/"
		}
		return rest
	case rest == "":
		return repl
	}
	return strings.TrimSuffix(repl, "/") + rest
}

// rawOffset is the index in the escaped path esc where the first n bytes
// of its decoded form end.
func rawOffset(esc string, n int) int {
	i := 0
	for d := 0; d < n && i < len(esc); d++ {
		if esc[i] == '%' && i+2 < len(esc) {
			i += 3
		} else {
			i++
		}
	}
	return i
}

// setEscapedPath sets u's path from its escaped form.
func setEscapedPath(u *url.URL, esc string) {
	p, err := url.PathUnescape(esc)
	if err != nil {
		u.Path, u.RawPath = esc, ""
		return
	}
	u.Path, u.RawPath = p, ""
	if esc != p {
		u.RawPath = esc
	}
}

// redirect answers the request with the route's redirect.
func (f *forwarder) redirect(rd *Redirect) int {
	var loc string
	if rd.URL != nil {
		loc = rd.URL.Expand(f.templateVars())
	} else {
		loc = f.location(rd)
	}
	h := f.w.Header()
	h["Location"] = []string{loc}
	h["Content-Length"] = []string{"0"}
	f.w.WriteHeader(rd.Status)
	return rd.Status
}

// location is the request's URL with the redirect's parts replaced. The
// port, when not given: the well-known port of a scheme the redirect
// sets, else the listener's; 80 for http and 443 for https are left out
// (Gateway API's RequestRedirect).
func (f *forwarder) location(rd *Redirect) string {
	r := f.r
	sch := rd.Scheme
	port := rd.Port
	if sch == "" {
		sch = scheme(f.h.TLS)[0]
		if port == 0 {
			port = listenerPort(r)
		}
	}
	host := rd.Host
	if host == "" {
		host = r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	var b strings.Builder
	b.WriteString(sch)
	b.WriteString("://")
	if strings.IndexByte(host, ':') >= 0 {
		b.WriteString("[" + host + "]")
	} else {
		b.WriteString(host)
	}
	if port != 0 && !(sch == "http" && port == 80) && !(sch == "https" && port == 443) {
		b.WriteString(":" + strconv.Itoa(port))
	}
	switch {
	case rd.Path != nil:
		b.WriteString(rd.Path.Expand(f.templateVars()))
	case rd.Prefix != nil:
		b.WriteString(replacePrefix(r.URL, rd.Match, rd.Prefix.Expand(f.templateVars())))
	default:
		b.WriteString(r.URL.EscapedPath())
	}
	if r.URL.RawQuery != "" {
		b.WriteString("?" + r.URL.RawQuery)
	}
	return b.String()
}

// listenerPort is the port the request came in on; 0 when unknown.
func listenerPort(r *http.Request) int {
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return 0
	}
	if t, ok := a.(*net.TCPAddr); ok {
		return t.Port
	}
	_, p, _ := net.SplitHostPort(a.String())
	n, _ := strconv.Atoi(p)
	return n
}
