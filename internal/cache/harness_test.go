package cache

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is the cache's and the origins' clock in tests; it only moves
// when a test says so.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock {
	return &fakeClock{t: time.Date(2025, 8, 29, 18, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// origin is a loopback backend whose handler a test can swap, counting the
// requests it gets. It stamps Date from the fake clock (unless the handler
// sets its own) so that age arithmetic sees one timeline.
type origin struct {
	srv     *httptest.Server
	hits    atomic.Int64
	mu      sync.Mutex
	handler http.HandlerFunc
	reqs    []*http.Request // headers of requests seen, for assertions
}

func newOrigin(t testing.TB, clock *fakeClock, h http.HandlerFunc) *origin {
	o := &origin{handler: h}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.hits.Add(1)
		o.mu.Lock()
		o.reqs = append(o.reqs, r.Clone(r.Context()))
		h := o.handler
		o.mu.Unlock()
		w.Header().Set("Date", clock.Now().Format(http.TimeFormat))
		h(w, r)
	}))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *origin) set(h http.HandlerFunc) {
	o.mu.Lock()
	o.handler = h
	o.mu.Unlock()
}

func (o *origin) lastRequest() *http.Request {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.reqs[len(o.reqs)-1]
}

// fetcher is a Fetch over a real http.Transport to one or more backends,
// round-robin, without retries. It strips hop-by-hop headers as the proxy
// would.
func fetcher(t testing.TB, backends ...string) Fetch {
	var next atomic.Uint64
	return pickFetcher(t, func() int { return int(next.Add(1)-1) % len(backends) }, backends...)
}

// pickFetcher is a Fetch that asks backends[pick()].
func pickFetcher(t testing.TB, pick func() int, backends ...string) Fetch {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return func(r *http.Request) (*http.Response, error) {
		u, err := url.Parse(backends[pick()])
		if err != nil {
			return nil, err
		}
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host = u.Scheme, u.Host
		resp, err := tr.RoundTrip(out)
		if resp != nil {
			resp.Header.Del("Connection")
			resp.Header.Del("Keep-Alive")
		}
		return resp, err
	}
}

// env is a frontend server calling Serve with one policy, in front of one
// origin.
type env struct {
	t       testing.TB
	clock   *fakeClock
	cache   *Cache
	origin  *origin
	policy  *Policy
	front   *httptest.Server
	client  *http.Client
	pending sync.Map // X-Test-Id → chan Result
	nextID  atomic.Int64

	mu     sync.Mutex
	events []Event
}

func newEnv(t testing.TB, h http.HandlerFunc, opts ...func(*Options)) *env {
	clock := newClock()
	e := &env{t: t, clock: clock, policy: &Policy{Route: "r"}}
	o := Options{Now: clock.Now, OnEvent: func(ev Event) {
		e.mu.Lock()
		e.events = append(e.events, ev)
		e.mu.Unlock()
	}}
	for _, f := range opts {
		f(&o)
	}
	e.cache = New(o)
	t.Cleanup(func() { e.cache.Close() })
	e.origin = newOrigin(t, clock, h)
	e.serveWith(fetcher(t, e.origin.srv.URL))
	return e
}

// serveWith (re)starts the frontend with a given Fetch.
func (e *env) serveWith(fetch Fetch) {
	if e.front != nil {
		e.front.Close()
	}
	e.front = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, res := e.cache.Serve(r, e.policy, fetch)
		if (resp != nil) != res.Answered() {
			e.t.Errorf("Serve returned response %v with Result %+v", resp != nil, res)
		}
		if resp == nil {
			http.Error(w, "proxy: "+res.OriginErr.Error(), http.StatusBadGateway)
		} else if send(w, r, resp) {
			res.Stored = true
		}
		if ch, ok := e.pending.LoadAndDelete(r.Header.Get("X-Test-Id")); ok {
			ch.(chan Result) <- res
		}
	}))
	e.t.Cleanup(e.front.Close)
	tr := &http.Transport{}
	e.t.Cleanup(tr.CloseIdleConnections)
	e.client = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

type answer struct {
	status int
	header http.Header
	body   string
	res    Result
}

// do sends one request through the frontend and returns the answer and the
// Result that Serve returned for it.
func (e *env) do(method, path string, hdr ...string) answer {
	e.t.Helper()
	req, err := http.NewRequest(method, e.front.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	id := fmt.Sprint(e.nextID.Add(1))
	results := make(chan Result, 1)
	e.pending.Store(id, results)
	req.Header.Set("X-Test-Id", id)
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		e.t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(body), res: <-results}
}

func (e *env) get(path string, hdr ...string) answer {
	e.t.Helper()
	return e.do(http.MethodGet, path, hdr...)
}

func (e *env) eventsSeen() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Event(nil), e.events...)
}

// waitBackground blocks until no background revalidation runs, by taking
// every slot (a refresh gives its slot back only after updating the store).
func waitBackground(c *Cache) {
	for range cap(c.bg) {
		c.bg <- struct{}{}
	}
	for range cap(c.bg) {
		<-c.bg
	}
}

// copyBufs are send's copy buffers, so that benchmarks measure the cache
// rather than the helper.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// send writes a response Serve returned to w as the proxy does (header
// copied, Content-Type never sniffed, bodies of unknown length flushed as
// they come, a body that breaks aborts the response) and closes its body.
// It reports whether the body's end stored the response.
func send(w http.ResponseWriter, r *http.Request, resp *http.Response) (stored bool) {
	defer resp.Body.Close()
	h := w.Header()
	for k, vv := range resp.Header {
		h[k] = vv
	}
	if _, ok := resp.Header["Content-Type"]; !ok {
		h["Content-Type"] = nil
	}
	w.WriteHeader(resp.StatusCode)
	if r.Method != http.MethodHead {
		var rc *http.ResponseController
		if resp.ContentLength < 0 {
			rc = http.NewResponseController(w)
		}
		bp := copyBufs.Get().(*[]byte)
		defer copyBufs.Put(bp)
		for {
			n, err := resp.Body.Read(*bp)
			if n > 0 {
				if _, werr := w.Write((*bp)[:n]); werr != nil {
					return false
				}
				if rc != nil {
					rc.Flush() //nolint:errcheck // a failed flush shows up as a failed write
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				panic(http.ErrAbortHandler)
			}
		}
	}
	t, ok := resp.Body.(*tee)
	return ok && t.stored
}

// respond returns a handler that writes body with the given headers.
func respond(status int, body string, hdr ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(hdr); i += 2 {
			w.Header().Set(hdr[i], hdr[i+1])
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// wantCacheStatus fails unless the answer's Cache-Status is exactly want.
func (a answer) wantCacheStatus(t testing.TB, want string) {
	t.Helper()
	if got := a.header.Get("Cache-Status"); got != want {
		t.Errorf("Cache-Status = %q, want %q", got, want)
	}
}

func (a answer) want(t testing.TB, status int, body, resultStatus string) {
	t.Helper()
	if a.status != status || a.body != body || a.res.Status != resultStatus {
		t.Errorf("got %d %q (%s), want %d %q (%s); Cache-Status %q", a.status, a.body, a.res.Status,
			status, body, resultStatus, a.header.Get("Cache-Status"))
	}
}

func hasParam(cs, param string) bool {
	for _, p := range strings.Split(cs, ";") {
		if strings.TrimSpace(p) == param {
			return true
		}
	}
	return false
}

func contextWithCancel(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithCancel(r.Context())
}
