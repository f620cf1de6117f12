package harness

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"regexp/syntax"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/adapt/nginx/nginxtest"
)

// request is one request sent to both nginx and sturdy.
type request struct {
	key  string // listen key (nginxtest.ListenKey)
	tls  bool
	host string
	path string // with the query
	// method is GET unless a requests file names another; header holds
	// that file's extra request headers, in order.
	method string
	header [][2]string
	// extra marks a request of a requests file: its answer's media type
	// and the Upgrade header the backend received are compared too.
	extra bool
	// files says what placeStatic puts at the path: "" a file (when the
	// location serves files), "none" nothing, "dir" an empty directory.
	files string
	// srv and loc are where nginx handles it, for reports and for naming
	// the features that would make sturdy answer the same.
	srv *nginx.Server
	loc *nginx.Location
}

func (r request) String() string {
	scheme := "http"
	if r.tls {
		scheme = "https"
	}
	s := scheme + " :" + r.key + " " + r.host + " " + r.verb() + " " + r.path
	for _, h := range r.header {
		s += " " + h[0] + "=" + h[1]
	}
	if r.files != "" {
		s += " files=" + r.files
	}
	return s
}

func (r request) verb() string {
	if r.method == "" {
		return "GET"
	}
	return r.method
}

// readRequests reads a configuration's requests file, the requests a
// feature needs beyond those derived from its locations, one a line:
//
//	[https] KEY HOST METHOD PATH [Name=value ...] [files=none|dir]
//
// KEY is the listen key (the port, or host:port), PATH includes the
// query; # starts a comment.
func readRequests(file string, site *nginx.Site) ([]request, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []request
	for i, line := range strings.Split(string(b), "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		r := request{extra: true}
		if f[0] == "https" {
			r.tls, f = true, f[1:]
		}
		if len(f) < 4 {
			return nil, fmt.Errorf("%s:%d: want [https] KEY HOST METHOD PATH [Name=value ...]", file, i+1)
		}
		r.key, r.host, r.method, r.path = f[0], f[1], f[2], f[3]
		for _, kv := range f[4:] {
			k, v, ok := strings.Cut(kv, "=")
			switch {
			case !ok:
				return nil, fmt.Errorf("%s:%d: %q is not Name=value", file, i+1, kv)
			case k == "files":
				r.files = v
			default:
				r.header = append(r.header, [2]string{k, v})
			}
		}
		r.srv = selectServer(site, r.key, r.host)
		if r.srv != nil {
			p, _, _ := strings.Cut(r.path, "?")
			r.loc = selectLocation(r.srv, p)
		}
		out = append(out, r)
	}
	return out, nil
}

// unknownHost is a Host no server names: nginx's default server answers it.
const unknownHost = "unknown.invalid"

// maxNamesPerServer bounds the requests a server with many names adds.
const maxNamesPerServer = 2

// requests derives the requests for a config: each server name × each
// location (one path inside it), "/" for every server name (a server-level
// redirect shows there), and an unknown host per listen address.
func requests(site *nginx.Site) []request {
	type listen struct {
		key string
		tls bool
	}
	var out []request
	seen := map[string]bool{}
	add := func(r request) {
		r.srv, r.loc = selectServer(site, r.key, r.host), nil
		if r.srv != nil {
			path, _, _ := strings.Cut(r.path, "?")
			r.loc = selectLocation(r.srv, path)
		}
		if k := r.String(); !seen[k] {
			seen[k] = true
			out = append(out, r)
		}
	}
	var keys []listen
	for _, srv := range site.Servers {
		var ls []listen
		for _, l := range srv.Listens {
			if l.Unix {
				continue
			}
			ls = append(ls, listen{nginxtest.ListenKey(l), l.SSL || sslOn(srv)})
		}
		for _, l := range ls {
			if !slices.Contains(keys, l) {
				keys = append(keys, l)
			}
		}
		names := hostNames(srv)
		if len(names) == 0 && len(srv.DefaultFor) > 0 {
			// A server without names answers only as the default server:
			// its locations are reached with any other Host.
			names = []string{unknownHost}
		}
		paths := []string{"/"}
		for _, loc := range srv.Locations {
			for _, p := range append([]string{samplePath(loc)}, edgePaths(loc)...) {
				if p != "" && !slices.Contains(paths, p) {
					paths = append(paths, p)
				}
			}
		}
		for _, l := range ls {
			for _, h := range names {
				for _, p := range paths {
					add(request{key: l.key, tls: l.tls, host: h, path: p + "?q=1"})
				}
			}
		}
	}
	for _, l := range keys {
		add(request{key: l.key, tls: l.tls, host: unknownHost, path: "/?q=1"})
	}
	return out
}

func sslOn(srv *nginx.Server) bool {
	d := srv.Get1("ssl")
	return d != nil && d.Arg(0) == "on"
}

// hostNames returns up to maxNamesPerServer names a client could send
// for the server: exact names, and one name for each wildcard.
func hostNames(srv *nginx.Server) []string {
	var out []string
	for _, n := range srv.Names {
		n = strings.ToLower(n)
		switch {
		case n == "" || n == "_" || strings.HasPrefix(n, "~") || strings.Contains(n, "$"):
			continue
		case strings.HasPrefix(n, "*."):
			n = "www" + n[1:]
		case strings.HasPrefix(n, "."):
			n = n[1:]
		case strings.HasSuffix(n, ".*"):
			n = strings.TrimSuffix(n, "*") + "com"
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
		if len(out) == maxNamesPerServer {
			break
		}
	}
	return out
}

// edgePaths are paths at the edge of a location's match, where nginx's
// matching is easy to get wrong: a prefix location without a trailing
// slash also matches the path with more characters (/api matches /apix),
// one with a trailing slash that proxies redirects its path without it
// (/api for /api/), an exact location does not match the path with
// one more slash, a case-insensitive regex matches its sample in upper
// case.
func edgePaths(l *nginx.Location) []string {
	switch {
	case l.Named, l.Path == "/":
		return nil
	case l.Modifier == "=" && !strings.HasSuffix(l.Path, "/"):
		if strings.Contains(l.Path[strings.LastIndexByte(l.Path, '/'):], ".") {
			return []string{l.Path + "x"} // a file: the harness makes no directory of its name
		}
		return []string{l.Path + "/"}
	case l.Modifier == "=":
		return []string{l.Path + "x"}
	case l.Modifier == "~*":
		if p := sampleRegex(l.Path, true); p != "" && strings.ToUpper(p) != p {
			return []string{strings.ToUpper(p)}
		}
		return nil
	case l.Modifier == "~":
		return nil
	case !strings.HasSuffix(l.Path, "/"):
		return []string{l.Path + "x"}
	case l.ProxyPass != nil:
		return []string{strings.TrimSuffix(l.Path, "/")}
	}
	return nil
}

// samplePath is one path inside a location: the path itself for "/" and
// exact locations, a child for prefixes, a matching string for regexes;
// "" for named locations and regexes Go cannot generate from.
func samplePath(l *nginx.Location) string {
	switch {
	case l.Named:
		return ""
	case l.Modifier == "=":
		return l.Path
	case l.Modifier == "~" || l.Modifier == "~*":
		return sampleRegex(l.Path, l.Modifier == "~*")
	case l.Path == "/":
		return ""
	case strings.HasSuffix(l.Path, "/"):
		return l.Path + "probe"
	}
	return l.Path + "/probe"
}

// sampleRegex builds a short path the regex matches.
func sampleRegex(re string, fold bool) string {
	flags := syntax.Perl
	if fold {
		flags |= syntax.FoldCase
	}
	tree, err := syntax.Parse(re, flags)
	if err != nil {
		return ""
	}
	var b strings.Builder
	gen(&b, tree.Simplify())
	s := b.String()
	if !strings.HasPrefix(s, "/") {
		s = "/" + s
	}
	expr := re
	if fold {
		expr = "(?i)" + re
	}
	m, err := regexp.Compile(expr)
	if err != nil {
		return ""
	}
	// nginx resolves "." and ".." segments before it picks a location
	// ("/." is "/"): a path with one would be answered elsewhere. A
	// trailing letter often keeps the match and drops the segment.
	if hasDotSegment(s) && m.MatchString(s+"x") {
		s += "x"
	}
	if !m.MatchString(s) || hasDotSegment(s) || strings.ContainsAny(s, "?# \t\r\n") {
		return ""
	}
	return s
}

// hasDotSegment reports a "." or ".." segment in a path.
func hasDotSegment(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

func gen(b *strings.Builder, re *syntax.Regexp) {
	switch re.Op {
	case syntax.OpLiteral:
		// Clients write paths in lower case; a case-insensitive regex
		// matches them too.
		if re.Flags&syntax.FoldCase != 0 {
			b.WriteString(strings.ToLower(string(re.Rune)))
		} else {
			b.WriteString(string(re.Rune))
		}
	case syntax.OpCharClass:
		b.WriteRune(pickRune(re.Rune))
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		b.WriteByte('x')
	case syntax.OpCapture:
		gen(b, re.Sub[0])
	case syntax.OpConcat:
		for _, s := range re.Sub {
			gen(b, s)
		}
	case syntax.OpAlternate:
		gen(b, re.Sub[0])
	case syntax.OpPlus:
		gen(b, re.Sub[0])
	case syntax.OpRepeat:
		for range re.Min {
			gen(b, re.Sub[0])
		}
	}
}

// pickRune prefers a lower-case letter or digit from a class.
func pickRune(ranges []rune) rune {
	for i := 0; i+1 < len(ranges); i += 2 {
		for r := ranges[i]; r <= ranges[i+1] && r < ranges[i]+256; r++ {
			if unicode.IsLower(r) || unicode.IsDigit(r) {
				return r
			}
		}
	}
	if len(ranges) > 0 {
		return ranges[0]
	}
	return 'x'
}

// selectServer picks the server nginx gives a request on a listen key:
// exact name, longest leading wildcard, trailing wildcard, first regex,
// else the default server of the address.
func selectServer(site *nginx.Site, key, host string) *nginx.Server {
	var on []*nginx.Server
	var deflt *nginx.Server
	for _, srv := range site.Servers {
		for _, l := range srv.Listens {
			if !l.Unix && nginxtest.ListenKey(l) == key {
				on = append(on, srv)
				if site.Defaults[l.Addr] == srv && deflt == nil {
					deflt = srv
				}
				break
			}
		}
	}
	for _, srv := range on {
		for _, n := range srv.Names {
			if strings.EqualFold(n, host) {
				return srv
			}
		}
	}
	var best *nginx.Server
	bestLen := 0
	for _, srv := range on {
		for _, n := range srv.Names {
			n = strings.ToLower(n)
			suffix := ""
			switch {
			case strings.HasPrefix(n, "*."):
				suffix = n[1:]
			case strings.HasPrefix(n, "."):
				suffix = n
				if host == n[1:] {
					return srv
				}
			}
			if suffix != "" && strings.HasSuffix(host, suffix) && len(suffix) > bestLen {
				best, bestLen = srv, len(suffix)
			}
		}
	}
	if best != nil {
		return best
	}
	for _, srv := range on {
		for _, n := range srv.Names {
			if p, ok := strings.CutSuffix(strings.ToLower(n), ".*"); ok && strings.HasPrefix(host, p+".") {
				return srv
			}
		}
	}
	for _, srv := range on {
		for _, n := range srv.Names {
			if re, ok := strings.CutPrefix(n, "~"); ok {
				if m, err := regexp.Compile(re); err == nil && m.MatchString(host) {
					return srv
				}
			}
		}
	}
	if deflt != nil {
		return deflt
	}
	if len(on) > 0 {
		return on[0]
	}
	return nil
}

// selectLocation picks the location nginx uses for path: an exact match;
// else the longest prefix, unless a regex matches first (regexes nested in
// that prefix, then the server's, in file order) and the prefix is not ^~.
func selectLocation(srv *nginx.Server, path string) *nginx.Location {
	var best *nginx.Location
	for _, l := range srv.Locations {
		switch {
		case l.Named || l.Modifier == "~" || l.Modifier == "~*":
		case l.Modifier == "=":
			if l.Path == path {
				return l
			}
		case strings.HasPrefix(path, l.Path) && (best == nil || len(l.Path) > len(best.Path)):
			best = l
		}
	}
	if best != nil && best.Modifier == "^~" {
		return best
	}
	var regexes []*nginx.Location
	for _, l := range srv.Locations {
		if (l.Modifier == "~" || l.Modifier == "~*") && best != nil && within(l, best) {
			regexes = append(regexes, l)
		}
	}
	for _, l := range srv.Locations {
		if (l.Modifier == "~" || l.Modifier == "~*") && l.Scope.Parent == srv.Scope {
			regexes = append(regexes, l)
		}
	}
	for _, l := range regexes {
		expr := l.Path
		if l.Modifier == "~*" {
			expr = "(?i)" + expr
		}
		if m, err := regexp.Compile(expr); err == nil && m.MatchString(path) {
			return l
		}
	}
	return best
}

// within reports whether l is nested (at any depth) in outer.
func within(l, outer *nginx.Location) bool {
	for s := l.Scope.Parent; s != nil; s = s.Parent {
		if s == outer.Scope {
			return true
		}
	}
	return false
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
