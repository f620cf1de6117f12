package proxy

import (
	"context"
	"math/bits"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/sturdyproxy/sturdy/internal/edge"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/route"
	"github.com/sturdyproxy/sturdy/internal/route/subst"
	"github.com/sturdyproxy/sturdy/internal/wire/h1client"
)

// Routing features of a route (docs/routing.md), compiled once. Every
// field of Routing is optional; a route without any pays one nil check.
type Routing struct {
	// PathRegex is the route's regex path match, whose captures templates
	// may use; nil when the route matches no regex.
	PathRegex *regexp.Regexp
	// Redirect answers every request with a redirect, before any upstream.
	Redirect *Redirect
	// Respond answers every request with a fixed answer, after the
	// route's access controls, before any upstream.
	Respond *Respond
	// Rewrite changes the path the backend receives.
	Rewrite *Rewrite
	// Request and Response are the header rules.
	Request, Response *HeaderRules
	// Backends splits the route over several pools; nil means Route.Pool.
	Backends *Backends
	// Mirror copies a share of the requests to another pool.
	Mirror *Mirror
	// RequestID gives each request an id.
	RequestID *RequestID
	// ErrorPages replace backends' error answers, by status.
	ErrorPages map[int]*ErrorPage
}

// responseSide reports whether answers go through a routeWriter (a
// request id goes into error bodies too).
func (g *Routing) responseSide() bool {
	return g.Response != nil || len(g.ErrorPages) > 0 || g.RequestID != nil
}

// Backend is one pool a route sends requests to, with what depends on
// the pool: its upstream client, empty-pool fallback, hash key and Host.
type Backend struct {
	Pool     *health.Pool
	Upstream Upstream
	// Fallback is tried while Pool is empty; nil means none.
	Fallback *health.Pool
	// HashKind and HashName are the pool's hash key (see Route).
	HashKind, HashName string
	// Host is the Host the backend gets; nil means the client's.
	Host *subst.Template
	// Weight is the share among the unconditional backends.
	Weight uint64
	// Header (canonical) or Cookie, with When, make the backend chosen
	// whenever the condition holds.
	Header, Cookie string
	When           *route.ValueMatch
	// Request, when set, changes the requests sent to this backend, after
	// the route's rules (backends[].request_headers).
	Request *HeaderRules
	// Respond, when set, answers the requests this entry is chosen for,
	// and Pool is never asked: the share of a reference that named no
	// backend (config.Pool's Unresolved).
	Respond *Respond
}

func (b *Backend) holds(r *http.Request) bool {
	if b.Header != "" {
		return b.When.Matches(r.Header[b.Header])
	}
	c, err := r.Cookie(b.Cookie)
	if err != nil {
		return b.When.Kind == route.ValueAbsent
	}
	return b.When.MatchString(c.Value)
}

// Backends is a split route: the first conditional backend whose
// condition holds, else one of the weighted backends.
type Backends struct {
	When     []*Backend
	Weighted []*Backend
	cum      []uint64 // cumulative weights
	n        atomic.Uint64
	fixed    bool // some entry has Respond
}

// NewBackends builds the split; weighted backends with weight 0 are
// never chosen by weight.
func NewBackends(when, weighted []*Backend) *Backends {
	b := &Backends{When: when}
	for _, be := range append(when[:len(when):len(when)], weighted...) {
		b.fixed = b.fixed || be.Respond != nil
	}
	var sum uint64
	for _, w := range weighted {
		if w.Weight == 0 {
			continue
		}
		sum += w.Weight
		b.Weighted = append(b.Weighted, w)
		b.cum = append(b.cum, sum)
	}
	return b
}

// golden is 2^64 divided by the golden ratio: n*golden walks [0, 2^64)
// so evenly that any share of N requests is within a few requests of
// its weight, in any window, with no table and no lock.
const golden = 0x9E3779B97F4A7C15

func (b *Backends) pick(r *http.Request) *Backend {
	for _, be := range b.When {
		if be.holds(r) {
			return be
		}
	}
	if len(b.Weighted) == 1 {
		return b.Weighted[0]
	}
	x := b.n.Add(1) * golden
	pos, _ := bits.Mul64(x, b.cum[len(b.cum)-1])
	i := sort.Search(len(b.cum), func(i int) bool { return b.cum[i] > pos })
	return b.Weighted[i]
}

// backend chooses the request's backend: once per request, before the
// first attempt.
func (f *forwarder) backend() *Backend {
	if f.be == nil {
		if g := f.rt.Routing; g != nil && g.Backends != nil {
			f.be = g.Backends.pick(f.r)
		} else {
			f.be = &f.rt.single
		}
	}
	return f.be
}

// RequestID is a route's request id policy.
type RequestID struct {
	// Header carries the id (canonical form).
	Header string
	// AcceptAny keeps any client's id; AcceptTrusted only those from
	// trusted_proxies. With neither, every request gets a new one.
	AcceptAny, AcceptTrusted bool
	// Response sends the id back to the client.
	Response bool
}

// maxRequestID bounds an id taken from a client.
const maxRequestID = 200

// requestID is the id of r under p: the one it brought, when accepted
// and well-formed, else a new one (32 hex digits, as nginx's $request_id).
func requestID(r *http.Request, p *RequestID, trusted []netip.Prefix) string {
	if p.AcceptAny || p.AcceptTrusted {
		if v := r.Header[p.Header]; len(v) == 1 && validID(v[0]) {
			if p.AcceptAny {
				return v[0]
			}
			if peer, ok := clientAddr(r.RemoteAddr); ok && isTrusted(peer, trusted) {
				return v[0]
			}
		}
	}
	return NewRequestID()
}

// NewRequestID returns a random id of 32 hex digits.
func NewRequestID() string {
	var b [32]byte
	lo, hi := rand.Uint64(), rand.Uint64()
	for i := range 8 {
		x, y := byte(lo>>(8*i)), byte(hi>>(8*i))
		b[2*i], b[2*i+1] = hexDigits[x>>4], hexDigits[x&0xf]
		b[16+2*i], b[16+2*i+1] = hexDigits[y>>4], hexDigits[y&0xf]
	}
	return string(b[:])
}

const hexDigits = "0123456789abcdef"

func validID(s string) bool {
	if s == "" || len(s) > maxRequestID {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// requestIDKey carries a request's id through the cache to the fetches
// it makes for the request.
type requestIDKey struct{}

func withRequestID(r *http.Request, id string) *http.Request {
	ctx := r.Context()
	return r.WithContext(h1client.KeepAfterFunc(context.WithValue(ctx, requestIDKey{}, id), ctx))
}

func requestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// vars are the template values of the request, filled on first use.
func (f *forwarder) templateVars() *subst.Vars {
	v := f.vars
	if v == nil {
		v = new(subst.Vars)
		f.vars = v
		v.R = f.r
		v.Scheme = scheme(f.h.TLS)[0]
		v.RemoteAddr = clientAddrString(f.r, f.snap.Trusted)
		v.RequestID = f.reqID
		if g := f.rt.Routing; g != nil {
			v.Regex = g.PathRegex
		}
		v.Subject = f.r.URL.Path
	}
	return v
}

// clientAddrString is the client's address as $remote_addr gives it.
func clientAddrString(r *http.Request, trusted []netip.Prefix) string {
	peer, ok := clientAddr(r.RemoteAddr)
	if !ok || !isTrusted(peer, trusted) {
		return hostOf(r.RemoteAddr)
	}
	ip, _ := edge.ClientIP(r, trusted)
	return ip.String()
}

// begin sets up what the route's features need before anything answers:
// the request id, and the writer that changes answers.
func (f *forwarder) begin(g *Routing) {
	if p := g.RequestID; p != nil {
		f.reqID = requestID(f.r, p, f.snap.Trusted)
		f.idValue = []string{f.reqID}
	}
	if g.responseSide() {
		f.rw = writers.Get().(*routeWriter)
		*f.rw = routeWriter{ResponseWriter: f.w, g: g, id: f.idValue, pages: g.ErrorPages, head: f.r.Method == http.MethodHead}
		if g.Response != nil && g.Response.Dynamic() {
			f.rw.vars = f.templateVars()
		}
		f.w = f.rw
	}
}

// wrapInner puts w (compression) under the route's writer, if it has
// one, so that the route's rules and pages come first.
func (f *forwarder) wrapInner(w http.ResponseWriter) {
	if f.rw != nil {
		f.rw.ResponseWriter = w
		return
	}
	f.w = w
}

// arm lets error pages replace what is written from now on: backends'
// answers and sturdy's answers for failed attempts.
func (f *forwarder) arm(on bool) {
	if f.rw != nil {
		f.rw.armed = on
	}
}

// routeRequest applies the route's request-side rules to the outbound
// request: header rules after sturdy's own headers (so a rule wins, and
// `sturdy check` warns when one touches a forwarding header), then the
// request id.
func (f *forwarder) routeRequest(g *Routing, out *http.Request) {
	if g.Request != nil {
		var v *subst.Vars
		if g.Request.Dynamic() {
			v = f.templateVars()
		}
		g.Request.Apply(out.Header, v)
	}
	if p := g.RequestID; p != nil {
		if f.idValue == nil {
			f.idValue = []string{f.reqID}
		}
		out.Header[p.Header] = f.idValue
	}
}

// proxyHost is nginx's $proxy_host for a backend address: host:port,
// without the port when it is the scheme's default; "localhost" for a
// unix socket.
func proxyHost(addr, scheme string) string {
	switch {
	case strings.HasPrefix(addr, "unix:"):
		return "localhost" // as nginx names a unix-socket upstream
	case scheme == "http" && strings.HasSuffix(addr, ":80"):
		return addr[:len(addr)-3]
	case scheme == "https" && strings.HasSuffix(addr, ":443"):
		return addr[:len(addr)-4]
	}
	return addr
}
