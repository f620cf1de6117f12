package cache

import (
	"net/http"
	"slices"
	"time"
)

// Defaults for Policy fields left at their zero value.
const (
	// DefaultStaleMax caps both stale-while-revalidate and stale-if-error.
	// Incident 004: an origin asking for stale-if-error=86400 let a CDN hide
	// a 40% error rate for hours; 15 minutes is what that team settled on.
	DefaultStaleMax = 15 * time.Minute
)

// defaultBypassPaths are never cached unless Policy.BypassPaths replaces
// them: health endpoints must always reach the origin (incident 004).
var defaultBypassPaths = []string{"/healthz", "/health", "/livez", "/readyz", "/status", "/ping"}

// defaultFailStatuses are the origin statuses that count as errors.
var defaultFailStatuses = []int{
	http.StatusInternalServerError, http.StatusBadGateway,
	http.StatusServiceUnavailable, http.StatusGatewayTimeout,
}

// DefaultBypassPaths returns a copy of the paths bypassed when
// Policy.BypassPaths is nil.
func DefaultBypassPaths() []string { return slices.Clone(defaultBypassPaths) }

// DefaultFailStatuses returns a copy of the statuses used when
// Policy.FailStatuses is nil.
func DefaultFailStatuses() []int { return slices.Clone(defaultFailStatuses) }

// Policy is one route's cache configuration. The zero value is a working
// policy with the defaults below. A Policy must not be changed after it has
// been passed to the Cache: build a new one on reload.
type Policy struct {
	// Route names the route in keys, counters and events. Routes never share
	// stored responses.
	Route string

	// StaleIfErrorMax caps how long past its freshness a response may be
	// served because the origin failed (RFC 5861 stale-if-error, and the
	// empty-pool case of ServeStale). Zero means DefaultStaleMax (15m);
	// negative disables stale-if-error serving for the route.
	StaleIfErrorMax time.Duration

	// StaleWhileRevalidateMax caps RFC 5861 stale-while-revalidate. Zero
	// means DefaultStaleMax (15m); negative disables it (stale responses
	// are then always revalidated before use).
	StaleWhileRevalidateMax time.Duration

	// CacheAuthorized allows caching for requests that carry Authorization.
	// Even then a response is stored only if it says public, s-maxage or
	// must-revalidate (RFC 9111 3.5). Default false: such requests bypass.
	CacheAuthorized bool

	// IgnoreCookies lets requests carrying Cookie use the cache (the Cookie
	// header is still forwarded on misses). Default false: they bypass.
	// Responses with Set-Cookie are never stored either way.
	IgnoreCookies bool

	// BypassPaths are exact request paths that are never cached nor served
	// from cache. Nil means DefaultBypassPaths (/healthz, /health, /livez,
	// /readyz, /status, /ping). A non-nil list replaces the default, so keep
	// the health paths in it; an empty non-nil list bypasses nothing.
	BypassPaths []string

	// FailStatuses are the origin statuses counted as origin errors and that
	// trigger stale-if-error. Responses with these statuses are never
	// stored. Nil means 500, 502, 503, 504.
	FailStatuses []int
}

func (p *Policy) staleIfErrorMax() time.Duration { return capOrDefault(p.StaleIfErrorMax) }

func (p *Policy) staleWhileRevalidateMax() time.Duration {
	return capOrDefault(p.StaleWhileRevalidateMax)
}

func capOrDefault(d time.Duration) time.Duration {
	if d == 0 {
		return DefaultStaleMax
	}
	return d // negative: disabled, callers compare against it and never match
}

func (p *Policy) bypassPath(path string) bool {
	paths := p.BypassPaths
	if paths == nil {
		paths = defaultBypassPaths
	}
	return slices.Contains(paths, path)
}

func (p *Policy) failStatus(code int) bool {
	codes := p.FailStatuses
	if codes == nil {
		codes = defaultFailStatuses
	}
	return slices.Contains(codes, code)
}

// bypassReason says why r must not use the cache at all, or "" if it may.
// The reason becomes the Cache-Status detail.
func (p *Policy) bypassReason(r *http.Request) string {
	switch {
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		return "method"
	case p.bypassPath(r.URL.Path):
		return "path"
	// Server requests have canonical header keys; indexing the map skips
	// re-canonicalising on the hit path.
	case len(r.Header["Authorization"]) > 0 && !p.CacheAuthorized:
		return "authorization"
	case len(r.Header["Cookie"]) > 0 && !p.IgnoreCookies:
		return "cookie"
	case len(r.Header["Range"]) > 0:
		// Partial content is never stored; passing ranges through keeps
		// the client's 206 semantics intact.
		return "range"
	case len(r.Header["If-Match"]) > 0 || len(r.Header["If-Unmodified-Since"]) > 0:
		// Preconditions for state changes are the origin's to evaluate.
		return "precondition"
	}
	return ""
}
