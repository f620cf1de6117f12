// Package translate turns an nginx configuration into an equivalent sturdy
// configuration (YAML), commented for an nginx operator: upstreams become
// pools with sturdy's attribution-based health, server and location blocks
// with proxy_pass become routes, listen directives become listeners.
// Whatever has no sturdy equivalent is listed with its file:line at the top
// of the output, never dropped silently.
package translate

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// Options tune a translation.
type Options struct {
	// ConfigDir resolves relative certificate paths, as nginx resolves them
	// against its configuration prefix. Default: the directory of the main
	// config file.
	ConfigDir string
	// Prefix resolves relative root and alias paths, and is where nginx's
	// default root (html) is: nginx's -p or --prefix. Default
	// DefaultPrefix, Debian's.
	Prefix string
	// Exists reports whether a file exists on this machine (for certificate
	// warnings). Nil means os.Stat.
	Exists func(path string) bool
}

// Item is one nginx directive that was not translated, and why.
type Item struct {
	File      string `json:"file"`
	Line      int    `json:"line"`
	Directive string `json:"directive"`
	Reason    string `json:"reason"`
}

// Result is a translation.
type Result struct {
	// YAML is the sturdy config, ready for `sturdy check`.
	YAML []byte
	// NotTranslated lists what nginx does that the YAML does not, in file order.
	NotTranslated []Item
	// Blocks lists every server block and location and what became of it.
	Blocks []Block
	// Warnings are things to act on before running sturdy (missing certificate files).
	Warnings []string
}

// ErrNothingToTranslate is what a NothingError matches with errors.Is.
var ErrNothingToTranslate = errors.New("no server block can be translated")

// NothingError is returned when no route could be made: it names every
// server block and location and why it was not translated.
type NothingError struct {
	Blocks []Block
}

func (e *NothingError) Error() string {
	var b strings.Builder
	b.WriteString("no server block or location can be translated; each is listed with why:")
	for i := range e.Blocks {
		b.WriteString("\n  ")
		b.WriteString(e.Blocks[i].String())
	}
	return b.String()
}

// Is makes errors.Is(err, ErrNothingToTranslate) true.
func (e *NothingError) Is(target error) bool { return target == ErrNothingToTranslate }

// Translate converts site into a sturdy config.
func Translate(site *nginx.Site, opt Options) (*Result, error) {
	if opt.ConfigDir == "" {
		opt.ConfigDir = filepath.Dir(site.Config.Main)
	}
	if opt.Prefix == "" {
		opt.Prefix = DefaultPrefix
	}
	if opt.Exists == nil {
		opt.Exists = func(p string) bool { _, err := os.Stat(p); return err == nil }
	}
	t := &translator{site: site, opt: opt, used: map[*nginx.Directive]bool{}, listed: map[*nginx.Directive]bool{}, poolIdx: map[string]poolEntry{}}
	t.trustedProxies() // before the listeners: PROXY protocol is read from trusted peers only
	t.listeners()
	t.redirects()
	t.routes()
	t.hstsListeners()
	sortBlocks(t.blocks)
	blocks := make([]Block, len(t.blocks))
	for i, b := range t.blocks {
		blocks[i] = *b
	}
	if !slices.ContainsFunc(t.routesOut, func(r *route) bool { return r.pool == nil || !r.pool.refusal }) {
		return nil, &NothingError{Blocks: blocks}
	}
	t.edge()
	t.resolveNames()
	t.leftovers()
	if len(t.pools) == 0 {
		// sturdy's config needs a pool even when files answer every route.
		p := t.refusalPool()
		p.comments = []string{"placeholder: sturdy's config needs at least one pool, and files answer every route here; no route uses this pool, and its only host (port 0) refuses connections."}
	}
	y, err := t.render()
	if err != nil {
		return nil, err
	}
	return &Result{YAML: y, NotTranslated: t.items, Blocks: blocks, Warnings: t.warnings}, nil
}

// translator holds the translation in progress.
type translator struct {
	site *nginx.Site
	opt  Options

	listenersOut []*listener
	listenerOf   map[string]*listener               // nginx listen address -> listener
	sni          map[*nginx.Server]*nginx.Directive // servers whose certificate sturdy cannot serve
	clientCert   map[*nginx.Server]string           // "required", or why the server's client certificates cannot be kept
	redirected   map[*nginx.Server]*redirectPlan    // servers the plain listener's redirect_https stands for
	sniSettings  map[*nginx.Server]notes            // TLS settings of non-default servers sturdy does not apply
	listenNotes  map[*nginx.Server]notes            // listen parameters sturdy does not keep (proxy_protocol, h2c)
	routesOut    []*route
	routeNames   map[string]bool
	routeKeys    map[string]string // listeners|hosts|path -> route name
	blocks       []*Block
	pools        []*pool
	poolIdx      map[string]poolEntry
	refusal      *pool
	trusted      []string
	trustedFrom  []*nginx.Directive
	deny         []string // edge.deny
	denyNotes    []string
	zones        zones         // limit zones the routes use
	dnsRefresh   time.Duration // 0: no pool names hosts by DNS name
	dnsNote      string

	used     map[*nginx.Directive]bool // directives translated (or deliberately covered)
	listed   map[*nginx.Directive]bool // proxy_pass directives already in items
	items    []Item
	warnings []string
}

// skip records a directive that was not translated.
func (t *translator) skip(d *nginx.Directive, reason string) {
	t.used[d] = true
	t.items = append(t.items, Item{File: d.File, Line: d.Line, Directive: d.String(), Reason: reason})
}

// useTree marks every directive inside d as covered.
func (t *translator) useTree(d *nginx.Directive) {
	nginx.Walk(d.Children, func(c *nginx.Directive) bool { t.used[c] = true; return true })
}

// sortBlocks orders blocks by file and line.
func sortBlocks(bs []*Block) {
	slices.SortStableFunc(bs, func(a, b *Block) int {
		if a.File != b.File {
			return strings.Compare(a.File, b.File)
		}
		return a.Line - b.Line
	})
}

func (t *translator) use(ds ...*nginx.Directive) {
	for _, d := range ds {
		if d != nil {
			t.used[d] = true
		}
	}
}

// name makes a sturdy object name from parts: letters, digits, '.', '-'
// and '_' only, unique among taken.
func name(taken map[string]bool, parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		for _, r := range p {
			switch {
			case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
				b.WriteRune(r)
			default:
				if b.Len() > 0 && !strings.HasSuffix(b.String(), "-") {
					b.WriteByte('-')
				}
			}
		}
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "-") {
			b.WriteByte('-')
		}
	}
	base := strings.Trim(b.String(), "-")
	if base == "" {
		base = "x"
	}
	n := base
	for i := 2; taken[n]; i++ {
		n = fmt.Sprintf("%s-%d", base, i)
	}
	taken[n] = true
	return n
}

// trustedProxies carries set_real_ip_from over: nginx believed the client
// address these peers put in real_ip_header.
func (t *translator) trustedProxies() {
	nginx.Walk(t.site.Config.Directives, func(d *nginx.Directive) bool {
		if d.Name == "set_real_ip_from" && len(d.Args) == 1 {
			if _, err := config.ParsePrefix(d.Args[0]); err != nil {
				t.skip(d, "not an address or CIDR (unix: sockets and names cannot be trusted proxies)")
				return true
			}
			if !slices.Contains(t.trusted, d.Args[0]) {
				t.trusted = append(t.trusted, d.Args[0])
			}
			t.trustedFrom = append(t.trustedFrom, d)
			t.use(d)
		}
		if d.Name == "real_ip_header" {
			t.use(d)
		}
		return true
	})
}

// resolveNames sets how often pool host names are re-resolved: nginx's
// resolver valid= when given.
func (t *translator) resolveNames() {
	names := false
	for _, p := range t.pools {
		for _, h := range p.hosts {
			if strings.HasPrefix(h.addr, "unix:") {
				continue
			}
			host := h.addr[:max(strings.LastIndexByte(h.addr, ':'), 0)]
			if net.ParseIP(strings.Trim(host, "[]")) == nil {
				names = true
			}
		}
	}
	if !names {
		return
	}
	t.dnsRefresh = config.DefaultDNSRefresh
	t.dnsNote = "Pools name hosts by DNS name: sturdy resolves them in the background and keeps the last good answer when DNS fails (incident 001: CoreDNS under pressure)."
	if t.site.HTTP == nil {
		return
	}
	if d := last(t.site.HTTP.Local("resolver")); d != nil {
		for _, a := range d.Args {
			if v, ok := strings.CutPrefix(a, "valid="); ok {
				if dur, err := nginx.ParseTime(v); err == nil && dur > 0 {
					t.dnsRefresh = dur
					t.dnsNote += fmt.Sprintf(" refresh is nginx's resolver valid= (%s).", d.Pos())
				}
			}
		}
	}
}

// validAddr reports whether addr is a host:port that sturdy's config
// accepts (the same rule `sturdy check` applies).
func validAddr(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || strings.ContainsAny(host, " /\\") {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 0 && n <= 65535
}

// validBackend is validAddr with a host: a backend needs somewhere to go.
func validBackend(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && host != "" && printable(host) && validAddr(addr)
}

// printable reports whether s is valid UTF-8 without control characters,
// so that it can be written into the YAML and matched as written.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// validHost reports whether h is a route host sturdy accepts: an exact name
// or a *.wildcard, without port or path.
func validHost(h string) bool {
	name := strings.TrimPrefix(h, "*.")
	return name != "" && printable(name) && !strings.ContainsFunc(name, func(r rune) bool { return r > 0x7e }) && !strings.ContainsAny(name, "*/: \t\"'{}[]")
}
