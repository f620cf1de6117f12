package cache

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// Fetch asks the origin (through the proxy's balancing and retry loop). The
// response's hop-by-hop headers are already removed. A non-nil error means
// there is no response at all (connect failure, timeout, no host). The
// request may carry validators added by the cache and may be a GET for a
// client's HEAD; Fetch must send it as given.
type Fetch func(r *http.Request) (*http.Response, error)

// Options configures a Cache. The zero value is usable.
type Options struct {
	// MaxBytes bounds the whole store: bodies, headers and keys. Zero means
	// 64 MiB. Eviction is by weight (W-TinyLFU), never by count.
	MaxBytes int64
	// MaxObjectBytes is the largest body kept; larger ones stream through
	// uncached, never held whole in memory. Zero means 1 MiB. Values above
	// MaxBytes or 1 GiB are lowered to those.
	MaxObjectBytes int64
	// Now is the clock; nil means time.Now. Tests use a fake one.
	Now func() time.Time
	// OnEvent receives stale-masking transitions, never per-request news.
	// It is called synchronously, one event at a time per route: it must
	// return quickly; it may read Stats but must not call Serve or
	// ServeStale. Nil discards events.
	OnEvent func(Event)
	// MaskingQuiet is how long a route must go without a stale-if-error
	// answer before its masking episode ends. Zero means 30s.
	MaskingQuiet time.Duration
	// MaxBackground bounds concurrent background revalidations
	// (stale-while-revalidate); past it, stale answers are still given but
	// the refresh waits for a later request. Zero means 16.
	MaxBackground int
	// BackgroundTimeout bounds one background revalidation, which has no
	// client deadline to inherit; running out counts as an origin error.
	// Zero means 30s.
	BackgroundTimeout time.Duration
}

const (
	defaultMaxBytes      = 64 << 20
	defaultMaxObject     = 1 << 20
	maxObjectCeiling     = 1 << 30
	defaultMaskingQuiet  = 30 * time.Second
	defaultMaxBackground = 16
	defaultBgTimeout     = 30 * time.Second
)

// Answer kinds in Result.Status.
const (
	StatusHit         = "hit"         // fresh stored response
	StatusMiss        = "miss"        // origin's response (stored or not)
	StatusStale       = "stale"       // stale stored response (while revalidating, or hiding an origin error)
	StatusBypass      = "bypass"      // the cache was not used for this request
	StatusRevalidated = "revalidated" // stored response confirmed by a 304
)

// Result tells the proxy what Serve did.
type Result struct {
	// Status is one of the Status* constants.
	Status string
	// OriginStatus is the status the origin answered this request's fetch
	// with; 0 when the origin was not asked or gave no response.
	OriginStatus int
	// OriginErr is Fetch's error (or the client's context error while it
	// waited for a collapsed fetch). With Stale false, Serve returned no
	// response and the proxy answers (502, 504, 499...) itself.
	OriginErr error
	// OriginError: the origin failed (OriginErr, or a FailStatuses status),
	// whether or not a stale answer hid it. Client cancellations are not
	// origin errors.
	OriginError bool
	// Stale: the answer is a stale stored response.
	Stale bool
	// Stored: the origin's response was stored before Serve returned
	// (the cache read a body the client does not get: HEAD, or a 304 to
	// the client's conditional). A body the client reads is stored when it
	// reaches its end complete, after Serve has returned; RouteStats.Stored
	// counts both.
	Stored bool
	// Collapsed: the request waited for another request's origin fetch.
	Collapsed bool
}

// Answered reports whether Serve returned a response for the client.
func (r Result) Answered() bool { return r.OriginErr == nil || r.Stale }

// Cache is an RFC 9111 shared cache. It is safe for concurrent use; Close
// stops its background work.
type Cache struct {
	store     *store
	maxObject int64
	now       func() time.Time
	onEvent   func(Event)
	quiet     time.Duration
	bgTimeout time.Duration

	mu      sync.Mutex // guards flights and closed
	flights map[string]*flight
	closed  bool

	routes sync.Map  // route name → *routeState
	bufs   sync.Pool // *[]byte read buffers (background revalidation)

	sweepEvery time.Duration // how often Run looks for quiet masking episodes

	// Background revalidations run under ctx, take a slot in bg and are
	// waited for by Close.
	ctx    context.Context
	cancel context.CancelFunc
	bg     chan struct{}
	wg     sync.WaitGroup
}

// New returns a Cache. Call Close when done with it.
func New(o Options) *Cache {
	if o.MaxBytes <= 0 {
		o.MaxBytes = defaultMaxBytes
	}
	if o.MaxObjectBytes <= 0 {
		o.MaxObjectBytes = defaultMaxObject
	}
	o.MaxObjectBytes = min(o.MaxObjectBytes, o.MaxBytes, maxObjectCeiling)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaskingQuiet <= 0 {
		o.MaskingQuiet = defaultMaskingQuiet
	}
	if o.MaxBackground <= 0 {
		o.MaxBackground = defaultMaxBackground
	}
	if o.BackgroundTimeout <= 0 {
		o.BackgroundTimeout = defaultBgTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cache{
		store:     newStore(o.MaxBytes),
		maxObject: o.MaxObjectBytes,
		now:       o.Now,
		onEvent:   o.OnEvent,
		quiet:     o.MaskingQuiet,
		bgTimeout: o.BackgroundTimeout,
		flights:   map[string]*flight{},
		ctx:       ctx,
		cancel:    cancel,
		bg:        make(chan struct{}, o.MaxBackground),
	}
	c.bufs.New = func() any { b := make([]byte, 32<<10); return &b }
	c.sweepEvery = max(time.Second, o.MaskingQuiet/3)
	return c
}

// Run ends the masking episodes of routes that went quiet until ctx ends,
// then stops background revalidations (Close).
func (c *Cache) Run(ctx context.Context) error {
	defer c.Close()
	t := time.NewTicker(c.sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			c.sweep()
		}
	}
}

// Close stops background revalidations and waits for them. Serve keeps
// working afterwards, without background revalidation.
func (c *Cache) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	return nil
}

// Serve answers r from the store or the origin and returns the response
// to send; the cache never writes to the client itself. Requests that must
// not use the cache (other methods, bypass paths, Authorization, Cookie,
// Range) are passed through with "Cache-Status: sturdy; fwd=bypass"; a
// successful unsafe method invalidates the stored response for its URI
// (RFC 9111 4.4).
//
// The response is one of:
//   - a stored answer: the stored status, a copy of the stored header with
//     Age and Cache-Status, the body from memory (none for HEAD), or a 304
//     when the client's own conditional matches;
//   - the origin's own *http.Response (Trailer included) with Cache-Status
//     added. When it may be stored, its Body is a tee that copies the body
//     into a buffer of at most MaxObjectBytes and stores it once it reaches
//     io.EOF complete; a body that breaks counts as an origin error. When
//     the client gets no body (HEAD, or a 304 to its conditional) the cache
//     reads a storable body itself before returning.
//
// The body of every answer that came from asking the origin (the tee, and
// those of revalidated, stale-if-error and bodiless answers) has a method
// Unwrap() io.ReadCloser that returns the body Fetch returned, so that the
// caller can find what it attached to it (the host that sent it, say).
//
// The caller must close the response's Body, read or not: requests
// collapsed onto this one wait until the body has ended or been closed.
// With no response (see Result.Answered) the proxy answers itself.
//
// p must not be changed after the call; nil means the zero Policy.
func (c *Cache) Serve(r *http.Request, p *Policy, fetch Fetch) (*http.Response, Result) {
	if p == nil {
		p = &Policy{}
	}
	rs := c.route(p.Route)
	resp, res := c.serve(r, p, rs, fetch)
	rs.count(res.Status)
	return resp, res
}

func (c *Cache) serve(r *http.Request, p *Policy, rs *routeState, fetch Fetch) (*http.Response, Result) {
	if reason := p.bypassReason(r); reason != "" {
		return c.bypass(r, p, rs, fetch, reason)
	}
	reqCC := requestDirectives(r.Header)
	primary := primaryKey(r, p.Route)
	e, key, uriMiss := c.store.lookup(r, primary)
	var age time.Duration
	if e != nil {
		age = e.age(c.now())
		if freshEnough(e, age, &reqCC) {
			return storedResponse(r, e, age, cacheStatus{hit: true}), Result{Status: StatusHit}
		}
		if whileRevalidateOK(e, age, p, &reqCC) {
			c.revalidateInBackground(r, p, rs, fetch, key, primary, e, reqCC)
			return storedResponse(r, e, age, cacheStatus{hit: true, detail: "stale-while-revalidate"}),
				Result{Status: StatusStale, Stale: true}
		}
	}
	m := &miss{key: key, primary: primary, stale: e, reqCC: reqCC, fwd: fwdReason(e, age, uriMiss)}
	if e == nil && r.Method == http.MethodHead {
		// Nothing to revalidate and a HEAD response has no body to store:
		// pass it through rather than fetch a whole GET.
		return c.passThrough(r, p, rs, fetch, m.fwd, "", StatusMiss)
	}
	if reqCC.noStore {
		return c.forward(r, p, rs, fetch, m)
	}
	f, leader := c.join(key)
	if !leader {
		if resp, res, ok := c.follow(r, p, rs, f, m); ok {
			return resp, res
		}
		// The leader had nothing to share: ask the origin ourselves, without
		// collapsing again so that a waiting request cannot wait forever.
		m.stale, m.key, uriMiss = c.store.lookup(r, primary)
		if m.stale != nil {
			age = m.stale.age(c.now())
		}
		m.fwd = fwdReason(m.stale, age, uriMiss)
		resp, res := c.forward(r, p, rs, fetch, m)
		res.Collapsed = true
		return resp, res
	}
	m.f = f
	return c.forward(r, p, rs, fetch, m)
}

// fwdReason picks the RFC 9211 fwd value for a request that goes to the
// origin: nothing stored, wrong variant, stored but stale, or stored and
// fresh but the client asked for validation.
func fwdReason(e *entry, age time.Duration, uriMiss bool) string {
	switch {
	case e == nil && uriMiss:
		return fwdURIMiss
	case e == nil:
		return fwdVaryMiss
	case age < e.lifetime:
		return fwdRequest
	}
	return fwdStale
}

// freshEnough reports whether e may answer without contacting the origin,
// given the client's own Cache-Control (no-cache, max-age, min-fresh).
func freshEnough(e *entry, age time.Duration, reqCC *directives) bool {
	switch {
	case age >= e.lifetime:
		return false
	case reqCC.noCache:
		return false
	case reqCC.maxAge != absent && age > reqCC.maxAge:
		return false
	case reqCC.minFresh != absent && e.lifetime-age < reqCC.minFresh:
		return false
	}
	return true
}
