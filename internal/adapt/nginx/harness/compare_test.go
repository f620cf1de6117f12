package harness

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/adapt/nginx/translate"
)

// answer is what one side did with a request.
type answer struct {
	err      string
	status   int
	location string
	ctype    string // the media type of Content-Type, without parameters
	body     string
	rec      *record // what the backend received; nil when nothing reached it
}

func send(rq request, port int, id string, be *backend) answer {
	scheme := "http"
	tr := &http.Transport{DisableKeepAlives: true, DisableCompression: true}
	if rq.tls {
		scheme = "https"
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true, ServerName: rq.host}
	}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var body io.Reader
	if rq.method == http.MethodPost || rq.method == http.MethodPut {
		body = strings.NewReader("a=1")
	}
	req, err := http.NewRequest(rq.verb(), fmt.Sprintf("%s://127.0.0.1:%d%s", scheme, port, rq.path), body)
	if err != nil {
		return answer{err: err.Error()}
	}
	req.Host = rq.host
	for _, h := range rq.header {
		req.Header.Add(h[0], h[1])
	}
	req.Header.Set("X-Harness-Id", id)
	req.Header.Set("User-Agent", "sturdy-harness")
	resp, err := c.Do(req)
	if err != nil {
		return answer{err: "no answer"}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	a := answer{status: resp.StatusCode, location: resp.Header.Get("Location"), body: string(b)}
	a.ctype, _, _ = strings.Cut(resp.Header.Get("Content-Type"), ";")
	if r, ok := be.take(id); ok {
		a.rec = &r
	}
	return a
}

// reqResult is one request's verdict.
type reqResult struct {
	req           request
	nginx, sturdy answer
	same          bool
	kind          string // what differs first: routing, path, host, header, body
	detail        string
	needs         []translate.Need
}

// chosenHeaders are the request headers compared at the backend: Host and
// every header the nginx config sets with proxy_set_header, minus those
// that belong to the connection.
func chosenHeaders(cfg *nginx.Config) []string {
	set := map[string]bool{"Host": true}
	nginx.Walk(cfg.Directives, func(d *nginx.Directive) bool {
		if d.Name == "proxy_set_header" && len(d.Args) > 0 {
			set[http.CanonicalHeaderKey(d.Arg(0))] = true
		}
		return true
	})
	for _, h := range []string{"Connection", "Upgrade", "Keep-Alive", "Te", "Content-Length", "Transfer-Encoding", "X-Harness-Id"} {
		delete(set, h)
	}
	return sortedKeys(set)
}

// compare decides whether sturdy answered as nginx did: same status and
// Location; the backend reached by both or neither; when reached, the same
// backend (the same upstream of the nginx config: which of its servers
// each picked is balancing, not routing), method, path and query, Host and
// chosen headers, and the same body. Location, Host and header values are
// compared after clean: the loopback ports and addresses each proxy was
// moved to, and random request ids, are the harness's, not a difference.
func (r *reqResult) compare(chosen []string, pools poolsOf, clean func(string) string) {
	n, s := r.nginx, r.sturdy
	fail := func(kind, format string, args ...any) {
		r.kind, r.detail = kind, clean(fmt.Sprintf(format, args...))
	}
	switch {
	case n.err != "" || s.err != "":
		if n.err == s.err {
			r.same = true
			return
		}
		fail("routing", "nginx: %s; sturdy: %s", orStatus(n), orStatus(s))
	case n.status != s.status:
		fail("routing", "status %d from nginx, %d from sturdy%s", n.status, s.status, reached(n, s))
	case defaultPort(clean(n.location)) != defaultPort(clean(s.location)):
		fail("routing", "Location %q from nginx, %q from sturdy", n.location, s.location)
	case (n.rec == nil) != (s.rec == nil):
		fail("routing", "%s", reached(n, s))
	case n.rec != nil && !pools.samePool(n.rec.Addr, s.rec.Addr):
		fail("routing", "nginx proxied to %s, sturdy to %s", n.rec.Addr, s.rec.Addr)
	case n.rec != nil && n.rec.URI != s.rec.URI:
		fail("path", "the backend got %s from nginx, %s from sturdy", n.rec.URI, s.rec.URI)
	case n.rec != nil && n.rec.Method != s.rec.Method:
		fail("path", "the backend got %s from nginx, %s from sturdy", n.rec.Method, s.rec.Method)
	case n.rec != nil && clean(n.rec.Host) != clean(s.rec.Host):
		fail("host", "the backend got Host %s from nginx, %s from sturdy", n.rec.Host, s.rec.Host)
	case r.req.extra && n.rec == nil && n.status < 300 && n.ctype != s.ctype:
		// Files' types: the charset parameter is left out (sturdy names
		// utf-8 for text files where nginx names none unless charset is
		// set), and each proxy's pages for its own errors are its own.
		fail("body", "Content-Type %s from nginx, %s from sturdy", n.ctype, s.ctype)
	case r.req.extra && n.rec != nil && n.rec.Headers.Get("Upgrade") != s.rec.Headers.Get("Upgrade"):
		fail("header", "the backend got Upgrade %q from nginx, %q from sturdy", n.rec.Headers.Get("Upgrade"), s.rec.Headers.Get("Upgrade"))
	default:
		if n.rec != nil {
			for _, h := range chosen {
				if h == "Host" {
					continue
				}
				if a, b := cleanAll(clean, n.rec.Headers.Values(h)), cleanAll(clean, s.rec.Headers.Values(h)); !slices.Equal(a, b) {
					fail("header", "the backend got %s %q from nginx, %q from sturdy", h, strings.Join(a, ","), strings.Join(b, ","))
					return
				}
			}
			// An error status is each proxy's own page (an auth refusal
			// nginx answers with its page, not the auth service's body),
			// as it is where no backend was reached.
			if n.body != s.body && n.status < 400 {
				fail("body", "the bodies differ")
				return
			}
		}
		r.same = true
	}
}

// poolsOf maps a backend address to the upstreams of the nginx config
// that list it.
type poolsOf map[string][]string

func upstreamPools(site *nginx.Site) poolsOf {
	out := poolsOf{}
	for _, u := range site.Upstreams {
		for _, srv := range u.Servers {
			a := socketKey(srv.Addr)
			if !slices.Contains(out[a], u.Name) {
				out[a] = append(out[a], u.Name)
			}
		}
	}
	return out
}

// samePool reports two addresses that are the same backend or servers of
// one upstream.
func (p poolsOf) samePool(a, b string) bool {
	if a == b {
		return true
	}
	for _, name := range p[a] {
		if slices.Contains(p[b], name) {
			return true
		}
	}
	return false
}

func orStatus(a answer) string {
	if a.err != "" {
		return a.err
	}
	return fmt.Sprint(a.status)
}

func reached(n, s answer) string {
	switch {
	case n.rec != nil && s.rec == nil:
		return "; nginx proxied it, sturdy did not"
	case n.rec == nil && s.rec != nil:
		return "; sturdy proxied it, nginx answered itself"
	}
	return ""
}

// attribute names the features that would have made sturdy answer the
// same: those the import recorded for the request's server block and
// location that can explain this kind of difference.
//
// A block that was not translated (or was refused) explains any kind of
// difference; a translated one only the kinds its differences touch.
// Kind "all" takes every need (a config that did not import at all).
func attribute(kind string, blocks ...*translate.Block) []translate.Need {
	var out []translate.Need
	for _, b := range blocks {
		if b == nil {
			continue
		}
		open := b.Status == translate.NotTranslated || b.Status == translate.Refused || kind == "all"
		for _, n := range b.Needs {
			if (open && !unseen[n] || explains(kind, n)) && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// unseen are needs no request of the harness can show: it sends plain
// GETs without Accept-Encoding, one at a time, and does not compare TLS
// parameters or response headers.
var unseen = map[translate.Need]bool{translate.NeedTLSSettings: true, translate.NeedRateLimits: true, translate.NeedGzip: true, translate.NeedResponseHeaders: true}

func explains(kind string, n translate.Need) bool {
	switch n {
	case translate.NeedHostHeader:
		return kind == "host"
	case translate.NeedRequestHeaders, translate.NeedRequestRewrite:
		return kind == "header" || kind == "path"
	case translate.NeedRewrites, translate.NeedVariables:
		return kind == "path" || kind == "routing"
	case translate.NeedResponseHeaders, translate.NeedResponseRewrite, translate.NeedGzip:
		return kind == "body"
	case translate.NeedTLSSettings, translate.NeedRateLimits:
		return false
	}
	return kind == "routing"
}

// cleaner makes details stable from run to run: loopback backend
// addresses become the addresses they stand for, the loopback ports
// nginx and sturdy listen on become the ports of the config (what
// $server_port shows), and random ids (nginx's $request_id) become
// <random>.
func cleaner(be *backend, listens ...map[string]int) func(string) string {
	var pairs []string
	for orig, lo := range be.addrs {
		pairs = append(pairs, lo, orig)
	}
	rep := strings.NewReplacer(pairs...)
	ports := map[string]string{}
	for _, m := range listens {
		for key, p := range m {
			ports[strconv.Itoa(p)] = key[strings.LastIndexByte(key, ':')+1:]
		}
	}
	return func(s string) string {
		s = rep.Replace(s)
		s = portNumber.ReplaceAllStringFunc(s, func(n string) string {
			if orig, ok := ports[n]; ok {
				return orig
			}
			return n
		})
		return randomID.ReplaceAllString(s, "<random>")
	}
}

// cleanAll cleans each value: the harness's loopback addresses and ports,
// and random ids, are not what either proxy chose.
func cleanAll(clean func(string) string, vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = clean(v)
	}
	return out
}

// defaultPort drops the scheme's own port from an absolute URL: nginx
// writes the port of the address it listens on into the redirects it
// builds unless that is 80 (or 443 with TLS); on the harness's loopback
// ports it always writes one, which the cleaner turns back into :80 or
// :443, the URL a client gets without it.
func defaultPort(u string) string {
	for _, p := range [...][2]string{{"http://", ":80"}, {"https://", ":443"}} {
		rest, ok := strings.CutPrefix(u, p[0])
		if !ok {
			continue
		}
		i := strings.IndexAny(rest, "/?#")
		if i < 0 {
			i = len(rest)
		}
		if h, ok := strings.CutSuffix(rest[:i], p[1]); ok {
			return p[0] + h + rest[i:]
		}
	}
	return u
}

var portNumber = regexp.MustCompile(`\b[0-9]{4,5}\b`)

var randomID = regexp.MustCompile(`\b[0-9a-f]{32}\b`)

// summary is the golden text and its totals.
type summary struct {
	text                     string
	configs, imported        int
	passTotal, passDone      int
	requests, same           int
	features                 map[translate.Need]int
	unexplained, skippedRuns int
}

func summarize(results []*configResult, dir string) *summary {
	s := &summary{features: map[translate.Need]int{}}
	var b strings.Builder
	test := "TestBehaviour"
	if dir == featuresDir {
		test = "TestFeatures"
	}
	fmt.Fprintf(&b, "# sturdy import nginx, side by side with Debian's nginx on %s.\n", dir)
	fmt.Fprintf(&b, "# Regenerate with: go test ./internal/adapt/nginx/harness -run '%s$' -update\n\n", test)
	for _, c := range results {
		fmt.Fprintf(&b, "%s: %s\n", c.name, c.figures())
		if c.skipped != "" {
			s.skippedRuns++
			continue
		}
		s.configs++
		if c.imported {
			s.imported++
		} else if c.importErr != "" {
			fmt.Fprintf(&b, "  import: %s\n", c.importErr)
		}
		s.passTotal += c.passTotal
		s.passDone += c.passDone
		for _, r := range c.reqs {
			s.requests++
			where := ""
			if r.req.loc != nil {
				where = fmt.Sprintf(" [nginx: location %s, %s:%d]", label(r.req.loc), r.req.loc.Dir.File, r.req.loc.Dir.Line)
			} else if r.req.srv != nil {
				where = fmt.Sprintf(" [nginx: server at %s:%d]", r.req.srv.Dir.File, r.req.srv.Dir.Line)
			}
			if r.same {
				s.same++
				fmt.Fprintf(&b, "  same     %s%s\n", r.req, where)
				continue
			}
			needs := "unexplained"
			if len(r.needs) > 0 {
				var ns []string
				for _, n := range r.needs {
					ns = append(ns, string(n))
					s.features[n]++
				}
				needs = "needs " + strings.Join(ns, ", ")
			} else {
				s.unexplained++
			}
			fmt.Fprintf(&b, "  differs  %s%s: %s (%s)\n", r.req, where, r.detail, needs)
		}
	}
	fmt.Fprintf(&b, "\n%s\n", s.totalsLine())
	b.WriteString("\nMissing features, by how many differing requests each would fix (a request may need several):\n")
	type fc struct {
		n     translate.Need
		count int
	}
	var fs []fc
	for n, c := range s.features {
		fs = append(fs, fc{n, c})
	}
	sort.Slice(fs, func(i, j int) bool {
		if fs[i].count != fs[j].count {
			return fs[i].count > fs[j].count
		}
		return fs[i].n < fs[j].n
	})
	for _, f := range fs {
		fmt.Fprintf(&b, "  %4d  %s\n", f.count, f.n)
	}
	if s.unexplained > 0 {
		fmt.Fprintf(&b, "  %4d  (unexplained: the import recorded no reason that explains the difference)\n", s.unexplained)
	}
	s.text = b.String()
	return s
}

func label(l *nginx.Location) string {
	if l.Named || l.Modifier == "" {
		return l.Path
	}
	return l.Modifier + " " + l.Path
}

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

func (s *summary) totalsLine() string {
	return fmt.Sprintf("TOTAL: configs imported %d/%d (%.0f%%); proxy_pass locations translated %d/%d (%.0f%%); requests answered the same %d/%d (%.0f%%); %d skipped (nginx rejects them)",
		s.imported, s.configs, pct(s.imported, s.configs), s.passDone, s.passTotal, pct(s.passDone, s.passTotal), s.same, s.requests, pct(s.same, s.requests), s.skippedRuns)
}

// compareTo says whether this run is better or worse than the golden text.
func (s *summary) compareTo(golden string) string {
	var imp, cfgs, pd, pt, same, reqs int
	for _, line := range strings.Split(golden, "\n") {
		if strings.HasPrefix(line, "TOTAL: ") {
			fmt.Sscanf(line, "TOTAL: configs imported %d/%d", &imp, &cfgs)
			if _, rest, ok := strings.Cut(line, "proxy_pass locations translated "); ok {
				fmt.Sscanf(rest, "%d/%d", &pd, &pt)
			}
			if _, rest, ok := strings.Cut(line, "requests answered the same "); ok {
				fmt.Sscanf(rest, "%d/%d", &same, &reqs)
			}
		}
	}
	worse := s.imported < imp || s.passDone < pd || s.same < same
	better := s.imported > imp || s.passDone > pd || s.same > same
	switch {
	case worse:
		return fmt.Sprintf("REGRESSION: now %d imported, %d proxy_pass translated, %d requests the same; recorded %d, %d, %d", s.imported, s.passDone, s.same, imp, pd, same)
	case better:
		return fmt.Sprintf("improvement: now %d imported, %d proxy_pass translated, %d requests the same; recorded %d, %d, %d", s.imported, s.passDone, s.same, imp, pd, same)
	}
	return "the same figures, different details"
}

// diffLines lists the lines only in one of the texts.
func diffLines(want, got string) string {
	w, g := map[string]bool{}, map[string]bool{}
	for _, l := range strings.Split(want, "\n") {
		w[l] = true
	}
	for _, l := range strings.Split(got, "\n") {
		g[l] = true
	}
	var b strings.Builder
	n := 0
	for _, l := range strings.Split(want, "\n") {
		if !g[l] && n < 40 {
			b.WriteString("- " + l + "\n")
			n++
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if !w[l] && n < 80 {
			b.WriteString("+ " + l + "\n")
			n++
		}
	}
	return b.String()
}
