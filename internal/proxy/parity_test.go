package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/cache"
	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/outcome"
	"github.com/sturdyproxy/sturdy/internal/proxy/accesslog"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// The same upstream behaviours are sent through a route without a cache and
// a route with one. A client must not tell the two apart (Age and
// Cache-Status aside), and the route's counters, the access log's bytes and
// the host's late failures must be the same. Real sockets at both ends: a
// loopback backend, the proxy's Handler behind httptest, Go's client.

// paritySlow bounds every wait of these tests; it is a guard against a hang,
// never a threshold a passing run comes near.
const paritySlow = 10 * time.Second

// parityMaxObject is the cached route's MaxObjectBytes.
const parityMaxObject = 64 << 10

// parityCase is one upstream behaviour.
type parityCase struct {
	name   string
	method string
	header []string // request header, name/value pairs
	body   string   // request body
	// backend answers; wait blocks until the client has read the last
	// chunk of a stream (false: give up, the client is gone or stuck).
	backend func(w http.ResponseWriter, r *http.Request, wait func() bool)
	// chunks, for streams, are what the client must receive one by one,
	// each before the backend sends the next: a proxy that holds a chunk
	// back until the stream ends makes the client wait forever.
	chunks []string
	// repeat asks a second time; on the cached route the second answer
	// may come from the store and must still look the same.
	repeat bool
	// check holds what both routes must show, so that a case cannot pass
	// by both routes being wrong in the same way.
	check func(t *testing.T, s seen, c charged)
	// cacheStatus is what the cached route must say, per request; a
	// trailing * matches anything.
	cacheStatus []string
}

// seen is what the client got.
type seen struct {
	status  int
	header  http.Header
	body    string
	trailer http.Header
	broken  bool // the exchange or the body failed: the response was aborted
	why     string
}

// charged is what the proxy counted for one request.
type charged struct {
	codes      map[string]uint64 // the route's requests by status class
	logStatus  int               // the access log's status
	logBytes   int64             // the access log's body bytes
	bodyErrors uint64            // late failures charged to the host
	inFlight   int64             // the host's in-flight count after the request
}

var parityCases = []parityCase{
	{
		name: "trailers announced and sent",
		backend: func(w http.ResponseWriter, r *http.Request, _ func() bool) {
			h := w.Header()
			h.Set("Content-Type", "text/plain; charset=utf-8")
			h.Set("Cache-Control", "max-age=60")
			h.Set("Trailer", "X-Checksum, X-Rows")
			io.WriteString(w, "rows follow\n")
			h.Set("X-Checksum", "sha256:abc")
			h.Set("X-Rows", "1")
		},
		repeat: true,
		check: func(t *testing.T, s seen, _ charged) {
			if s.trailer.Get("X-Checksum") != "sha256:abc" || s.trailer.Get("X-Rows") != "1" {
				t.Errorf("trailers %v, want X-Checksum and X-Rows", s.trailer)
			}
		},
		cacheStatus: []string{"sturdy; fwd=uri-miss; fwd-status=200; detail=trailers", "sturdy; fwd=uri-miss; fwd-status=200; detail=trailers"},
	},
	{
		name: "trailer sent without announcement",
		backend: func(w http.ResponseWriter, r *http.Request, _ func() bool) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Cache-Control", "max-age=60")
			io.WriteString(w, "late trailer\n")
			w.(http.Flusher).Flush() // chunked: Go's server sends no trailers with a Content-Length
			w.Header().Set(http.TrailerPrefix+"X-Late", "yes")
		},
		repeat: true,
		check: func(t *testing.T, s seen, _ charged) {
			if s.trailer.Get("X-Late") != "yes" {
				t.Errorf("trailers %v, want X-Late", s.trailer)
			}
		},
		// Not stored: the trailer only shows at the body's end.
		cacheStatus: []string{"sturdy; fwd=uri-miss; fwd-status=200", "sturdy; fwd=uri-miss; fwd-status=200"},
	},
	{
		name: "no Content-Type",
		backend: func(w http.ResponseWriter, r *http.Request, _ func() bool) {
			w.Header()["Content-Type"] = nil // the backend sends none, and neither may we
			w.Header().Set("Cache-Control", "max-age=60")
			io.WriteString(w, "<!DOCTYPE html><html><body>undeclared</body></html>")
		},
		repeat: true,
		check: func(t *testing.T, s seen, _ charged) {
			if ct, ok := s.header["Content-Type"]; ok {
				t.Errorf("Content-Type %q, want none (sniffed)", ct)
			}
		},
		cacheStatus: []string{"sturdy; fwd=uri-miss; fwd-status=200; stored", "sturdy; hit; ttl=*"},
	},
	{
		name:   "text/event-stream flushed",
		chunks: []string{"data: one\n\n", "data: two\n\n", "data: three\n\n"},
		backend: func(w http.ResponseWriter, r *http.Request, wait func() bool) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			streamChunks(w, wait, "data: one\n\n", "data: two\n\n", "data: three\n\n")
		},
		cacheStatus: []string{"sturdy; fwd=uri-miss; fwd-status=200; detail=no-freshness"},
	},
	{
		// A stream of stated length is flushed too: its type says so.
		name:   "text/event-stream of known length flushed",
		chunks: []string{"data: a\n\n", "data: b\n\n"},
		backend: func(w http.ResponseWriter, r *http.Request, wait func() bool) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			w.Header().Set("Content-Length", strconv.Itoa(len("data: a\n\ndata: b\n\n")))
			streamChunks(w, wait, "data: a\n\n", "data: b\n\n")
		},
		cacheStatus: []string{"sturdy; fwd=uri-miss; fwd-status=200; detail=no-freshness"},
	},
	{
		name:   "unknown length flushed",
		chunks: []string{"part one, ", "part two, ", "the end"},
		backend: func(w http.ResponseWriter, r *http.Request, wait func() bool) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Cache-Control", "max-age=60")
			streamChunks(w, wait, "part one, ", "part two, ", "the end")
		},
		repeat: true,
		check: func(t *testing.T, s seen, _ charged) {
			if s.body != "part one, part two, the end" {
				t.Errorf("body %q", s.body)
			}
		},
		cacheStatus: []string{"sturdy; fwd=uri-miss; fwd-status=200", "sturdy; hit; ttl=*"},
	},
	{
		name: "body breaks after the header",
		backend: func(w http.ResponseWriter, r *http.Request, _ func() bool) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Cache-Control", "max-age=60")
			w.Header().Set("Content-Length", "100")
			io.WriteString(w, "ten bytes.")
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		},
		check: func(t *testing.T, s seen, c charged) {
			if !s.broken {
				t.Errorf("the client got a complete answer: %d %q", s.status, s.body)
			}
			if c.bodyErrors != 1 || c.logStatus != http.StatusBadGateway || c.codes["5xx"] != 1 {
				t.Errorf("charged %+v, want one body error on the host and a 502", c)
			}
		},
	},
	{
		name:   "HEAD",
		method: http.MethodHead,
		backend: func(w http.ResponseWriter, r *http.Request, _ func() bool) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Cache-Control", "max-age=60")
			w.Header().Set("Content-Length", "12")
			io.WriteString(w, "twelve bytes")
		},
		repeat: true,
		check: func(t *testing.T, s seen, _ charged) {
			if s.header.Get("Content-Length") != "12" || s.body != "" {
				t.Errorf("Content-Length %q, body %q", s.header.Get("Content-Length"), s.body)
			}
		},
		cacheStatus: []string{"sturdy; fwd=uri-miss; fwd-status=200", "sturdy; fwd=uri-miss; fwd-status=200"},
	},
	{
		name:   "POST",
		method: http.MethodPost,
		body:   "posted form",
		header: []string{"Content-Type", "text/plain"},
		backend: func(w http.ResponseWriter, r *http.Request, _ func() bool) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Cache-Control", "max-age=60")
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "got %q", b)
		},
		repeat: true,
		check: func(t *testing.T, s seen, _ charged) {
			if s.body != `got "posted form"` {
				t.Errorf("body %q", s.body)
			}
		},
		cacheStatus: []string{"sturdy; fwd=bypass; fwd-status=200; detail=method", "sturdy; fwd=bypass; fwd-status=200; detail=method"},
	},
	{
		name:   "304 to a conditional",
		header: []string{"If-None-Match", `"v1"`},
		backend: func(w http.ResponseWriter, r *http.Request, _ func() bool) {
			w.Header().Set("Etag", `"v1"`)
			w.Header().Set("Cache-Control", "max-age=60")
			w.Header().Set("X-Page", "home")
			if r.Header.Get("If-None-Match") == `"v1"` {
				w.WriteHeader(http.StatusNotModified)
				return
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			io.WriteString(w, "home page")
		},
		repeat: true,
		check: func(t *testing.T, s seen, _ charged) {
			if s.status != http.StatusNotModified || s.body != "" {
				t.Errorf("%d %q, want an empty 304", s.status, s.body)
			}
		},
		// The cache asks for the whole response, keeps it, and answers the
		// client's conditional itself.
		cacheStatus: []string{"sturdy; fwd=uri-miss; fwd-status=200; stored", "sturdy; hit; ttl=*"},
	},
	{
		name: "body above max_object_bytes, known length",
		backend: func(w http.ResponseWriter, r *http.Request, _ func() bool) {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Cache-Control", "max-age=60")
			w.Header().Set("Content-Length", strconv.Itoa(4*parityMaxObject))
			w.Write(bytes.Repeat([]byte("k"), 4*parityMaxObject))
		},
		repeat: true,
		check: func(t *testing.T, s seen, c charged) {
			if len(s.body) != 4*parityMaxObject || c.logBytes != 4*parityMaxObject {
				t.Errorf("body %d bytes, logged %d", len(s.body), c.logBytes)
			}
		},
		cacheStatus: []string{"sturdy; fwd=uri-miss; fwd-status=200; detail=too-large", "sturdy; fwd=uri-miss; fwd-status=200; detail=too-large"},
	},
	{
		name: "body above max_object_bytes, unknown length",
		backend: func(w http.ResponseWriter, r *http.Request, _ func() bool) {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Cache-Control", "max-age=60")
			for range 8 {
				w.Write(bytes.Repeat([]byte("u"), parityMaxObject/2))
				w.(http.Flusher).Flush()
			}
		},
		repeat: true,
		check: func(t *testing.T, s seen, _ charged) {
			if len(s.body) != 4*parityMaxObject {
				t.Errorf("body %d bytes", len(s.body))
			}
		},
		cacheStatus: []string{"sturdy; fwd=uri-miss; fwd-status=200", "sturdy; fwd=uri-miss; fwd-status=200"},
	},
	{
		name: "backend's own 503",
		backend: func(w http.ResponseWriter, r *http.Request, _ func() bool) {
			w.Header().Set("Retry-After", "5")
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
		},
		check: func(t *testing.T, s seen, c charged) {
			if s.status != http.StatusServiceUnavailable || s.body != "maintenance\n" || c.codes["5xx"] != 1 {
				t.Errorf("%d %q, charged %+v", s.status, s.body, c)
			}
		},
		cacheStatus: []string{"sturdy; fwd=uri-miss; fwd-status=503; detail=error-status"},
	},
}

// streamChunks writes chunks one by one, flushing each and waiting for the
// client to have read it before writing the next.
func streamChunks(w http.ResponseWriter, wait func() bool, chunks ...string) {
	for i, c := range chunks {
		io.WriteString(w, c)
		w.(http.Flusher).Flush()
		if i < len(chunks)-1 && !wait() {
			return
		}
	}
}

func TestCachedAndUncachedRoutesAnswerAlike(t *testing.T) {
	for _, tc := range parityCases {
		t.Run(tc.name, func(t *testing.T) {
			// One Date for both routes' backends, so that their answers and
			// the stored copy compare equal.
			date := time.Now().UTC().Format(http.TimeFormat)
			plain := newParityRoute(t, tc, date, false)
			cached := newParityRoute(t, tc, date, true)
			n := 1
			if tc.repeat {
				n = 2
			}
			type exchange struct {
				s seen
				c charged
			}
			var ps, cs []exchange
			for range n {
				s, c := plain.do(t, tc)
				ps = append(ps, exchange{s, c})
				s, c = cached.do(t, tc)
				cs = append(cs, exchange{s, c})
			}
			plainLog, cachedLog := plain.records(), cached.records()
			if len(plainLog) != n || len(cachedLog) != n {
				t.Fatalf("access log: %d and %d records, want %d each", len(plainLog), len(cachedLog), n)
			}
			for i := range n {
				p, c := &ps[i], &cs[i]
				p.c.logStatus, p.c.logBytes = plainLog[i].Status, plainLog[i].Bytes
				c.c.logStatus, c.c.logBytes = cachedLog[i].Status, cachedLog[i].Bytes
				if tc.check != nil {
					t.Run(fmt.Sprintf("request %d without cache", i+1), func(t *testing.T) { tc.check(t, p.s, p.c) })
					t.Run(fmt.Sprintf("request %d with cache", i+1), func(t *testing.T) { tc.check(t, c.s, c.c) })
				}
				if i < len(tc.cacheStatus) {
					want := tc.cacheStatus[i]
					got := c.s.header.Get("Cache-Status")
					if prefix, ok := strings.CutSuffix(want, "*"); ok && strings.HasPrefix(got, prefix) {
						got = want // ttl counts down with the wall clock
					}
					if got != want {
						t.Errorf("request %d: Cache-Status %q, want %q", i+1, got, want)
					}
				}
				if p.s.header.Get("Cache-Status") != "" {
					t.Errorf("request %d: the uncached route says Cache-Status %q", i+1, p.s.header.Get("Cache-Status"))
				}
				fromStore := strings.Contains(c.s.header.Get("Cache-Status"), "; hit")
				for _, d := range diffSeen(p.s, c.s, fromStore) {
					t.Errorf("request %d: %s", i+1, d)
				}
				for _, d := range diffCharged(p.c, c.c, fromStore) {
					t.Errorf("request %d: %s", i+1, d)
				}
				if plainLog[i].Host != plain.addr {
					t.Errorf("request %d: access log host %q without cache, want %q", i+1, plainLog[i].Host, plain.addr)
				}
				if want := cached.addr; cachedLog[i].Host != want && !fromStore {
					t.Errorf("request %d: access log host %q with cache, want %q", i+1, cachedLog[i].Host, want)
				}
				if !p.s.broken && p.c.logBytes != int64(len(p.s.body)) {
					t.Errorf("request %d: logged %d bytes, the client got %d", i+1, p.c.logBytes, len(p.s.body))
				}
			}
		})
	}
}

// parityRoute is one route (with or without a cache) on its own pool of
// one loopback backend, behind its own front server.
type parityRoute struct {
	fx    *fixture
	addr  string // the backend's
	host  *health.Host
	front *httptest.Server
	// handled gets one value per request the proxy finished, so that the
	// counters are read after the handler's deferred accounting.
	handled chan struct{}
	gate    chan struct{}
	client  *http.Client
	records func() []logRecord // stops the access log; call once, at the end
}

// logRecord is the part of an access log line these tests compare.
type logRecord struct {
	Status int    `json:"status"`
	Bytes  int64  `json:"bytes"`
	Host   string `json:"host"`
}

func newParityRoute(t *testing.T, tc parityCase, date string, cached bool) *parityRoute {
	pr := &parityRoute{handled: make(chan struct{}, 4), gate: make(chan struct{}, 8)}
	back := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Date", date)
		tc.backend(w, r, func() bool {
			select {
			case <-pr.gate:
				return true
			case <-r.Context().Done():
				return false
			case <-time.After(paritySlow):
				return false
			}
		})
	}))
	t.Cleanup(back.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	var c *cache.Cache
	if cached {
		c = cache.New(cache.Options{MaxObjectBytes: parityMaxObject})
		t.Cleanup(func() { c.Close() })
	}
	addr := strings.TrimPrefix(back.URL, "http://")
	pr.fx = newFixture(t, 1, tr, func(pc *health.PoolConfig, rt *Route) {
		pc.Scheme = "http"
		pc.Hosts = []health.HostSpec{{Addr: addr, Weight: 1}}
		if c != nil {
			rt.Cache, rt.CachePolicy = c, &cache.Policy{Route: rt.Name}
		}
	})
	pr.addr, pr.host = addr, pr.fx.pool.Host(addr)

	var logBuf bytes.Buffer
	logger := accesslog.New(&logBuf, accesslog.Options{})
	ctx, stop := context.WithCancel(context.Background())
	logDone := make(chan struct{})
	go func() { defer close(logDone); logger.Run(ctx) }()
	t.Cleanup(func() { stop(); <-logDone })
	pr.fx.h.Current().Access = logger
	pr.records = func() []logRecord {
		stop()
		<-logDone
		var recs []logRecord
		for line := range strings.Lines(logBuf.String()) {
			var rec logRecord
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("access log line %q: %v", line, err)
			}
			recs = append(recs, rec)
		}
		return recs
	}

	pr.front = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { pr.handled <- struct{}{} }()
		pr.fx.h.ServeHTTP(w, r)
	}))
	t.Cleanup(pr.front.Close)
	ctr := &http.Transport{DisableCompression: true}
	t.Cleanup(ctr.CloseIdleConnections)
	pr.client = &http.Client{Transport: ctr, Timeout: paritySlow}
	return pr
}

// do sends tc's request once and returns what the client saw and what the
// proxy charged for it.
func (pr *parityRoute) do(t *testing.T, tc parityCase) (seen, charged) {
	t.Helper()
	for len(pr.gate) > 0 {
		<-pr.gate
	}
	var before view.Route
	pr.fx.rt.Stats.View(&before)
	bodyErrors := pr.host.Attempts(outcome.BodyError)

	method := tc.method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if tc.body != "" {
		body = strings.NewReader(tc.body)
	}
	req, err := http.NewRequest(method, pr.front.URL+"/"+strings.ReplaceAll(tc.name, " ", "-"), body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(tc.header); i += 2 {
		req.Header.Set(tc.header[i], tc.header[i+1])
	}
	var s seen
	resp, err := pr.client.Do(req)
	if err != nil {
		s.broken, s.why = true, err.Error()
	} else {
		s.status, s.header = resp.StatusCode, resp.Header
		var got strings.Builder
		for i, chunk := range tc.chunks {
			buf := make([]byte, len(chunk))
			if _, err := io.ReadFull(resp.Body, buf); err != nil {
				t.Fatalf("chunk %d of the stream never arrived while the backend held the rest (not flushed?): %v", i+1, err)
			}
			got.Write(buf)
			pr.gate <- struct{}{}
		}
		rest, err := io.ReadAll(resp.Body)
		got.Write(rest)
		resp.Body.Close()
		s.body, s.trailer = got.String(), resp.Trailer
		if err != nil {
			s.broken, s.why = true, err.Error()
		}
	}
	select {
	case <-pr.handled:
	case <-time.After(paritySlow):
		t.Fatal("the proxy's handler did not return")
	}

	var after view.Route
	pr.fx.rt.Stats.View(&after)
	c := charged{codes: map[string]uint64{}, bodyErrors: pr.host.Attempts(outcome.BodyError) - bodyErrors, inFlight: pr.host.InFlight()}
	for k, v := range after.Requests {
		if d := v - before.Requests[k]; d != 0 {
			c.codes[k] = d
		}
	}
	return s, c
}

// diffSeen lists how the cached route's answer differs from the uncached
// one's. Age and Cache-Status are the cache's own; a stored answer also
// states the Content-Length of a body that was streamed without one.
func diffSeen(plain, cached seen, fromStore bool) []string {
	var d []string
	if plain.status != cached.status {
		d = append(d, fmt.Sprintf("status %d without cache, %d with", plain.status, cached.status))
	}
	if plain.body != cached.body {
		d = append(d, fmt.Sprintf("body %q without cache, %q with", clip(plain.body), clip(cached.body)))
	}
	if plain.broken != cached.broken {
		d = append(d, fmt.Sprintf("broken %v (%s) without cache, %v (%s) with", plain.broken, plain.why, cached.broken, cached.why))
	}
	ph, ch := plain.header.Clone(), cached.header.Clone()
	for _, h := range []http.Header{ph, ch} {
		delete(h, "Age")
		delete(h, "Cache-Status")
	}
	if fromStore && ph.Get("Content-Length") == "" && ch.Get("Content-Length") == strconv.Itoa(len(cached.body)) {
		delete(ch, "Content-Length")
	}
	if !maps.EqualFunc(ph, ch, slices.Equal) {
		d = append(d, fmt.Sprintf("header\n\twithout cache %v\n\twith cache    %v", ph, ch))
	}
	if !maps.EqualFunc(plain.trailer, cached.trailer, slices.Equal) {
		d = append(d, fmt.Sprintf("trailers %v without cache, %v with", plain.trailer, cached.trailer))
	}
	return d
}

// diffCharged lists how the cached route's accounting differs. An answer
// from the store cost no backend, so only its status and bytes compare.
func diffCharged(plain, cached charged, fromStore bool) []string {
	var d []string
	if plain.logStatus != cached.logStatus || plain.logBytes != cached.logBytes {
		d = append(d, fmt.Sprintf("access log: status %d, %d bytes without cache; status %d, %d bytes with",
			plain.logStatus, plain.logBytes, cached.logStatus, cached.logBytes))
	}
	if !maps.Equal(plain.codes, cached.codes) {
		d = append(d, fmt.Sprintf("route status counts %v without cache, %v with", plain.codes, cached.codes))
	}
	if plain.bodyErrors != cached.bodyErrors && !fromStore {
		d = append(d, fmt.Sprintf("late failures on the host: %d without cache, %d with", plain.bodyErrors, cached.bodyErrors))
	}
	if plain.inFlight != 0 || cached.inFlight != 0 {
		d = append(d, fmt.Sprintf("in flight on the host after the request: %d without cache, %d with", plain.inFlight, cached.inFlight))
	}
	return d
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + fmt.Sprintf("... (%d bytes)", len(s))
	}
	return s
}
