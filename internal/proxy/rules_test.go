package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/outcome"
	"github.com/sturdyproxy/sturdy/internal/wire/h1client"
)

// step is what a scripted host does with one attempt: answer with status
// (and body), or fail with err. readBody makes it read the request body
// before failing, as a backend that got the whole request would.
type step struct {
	status   int
	body     string
	err      error
	readBody bool
	// atDeadline makes the host fail with err only once the attempt's
	// context has ended, as an HTTP/2 transport reports the stream reset
	// it sent when the deadline passed.
	atDeadline bool
	retryAfter string // the answer's Retry-After
}

// shedding is a host at its capacity: 503 with Retry-After.
var shedding = step{status: 503, body: "503 from the backend: full", retryAfter: "1"}

var (
	refused  = step{err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	dialWait = step{err: &net.OpError{Op: "dial", Net: "tcp", Err: &timeoutErr{}}}
	reset    = step{err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, readBody: true}
	hangUp   = step{err: io.ErrUnexpectedEOF, readBody: true}
	slow     = step{err: context.DeadlineExceeded, readBody: true}
	garbage  = step{err: errors.New("malformed HTTP status code"), readBody: true}
	// cutWait is a request that was waiting on a host when the host was
	// found dead (its probe failed, or the pool was found failing).
	cutWait = step{err: &h1client.Error{Phase: h1client.PhaseHeader, Err: h1client.ErrCut}, readBody: true}
	// resentHangUp is a host that hung up on a reused connection and,
	// sent the request again on a new one, hung up again: one host asked
	// twice (a dying host under keep-alive load).
	resentHangUp = step{err: &h1client.Error{Phase: h1client.PhaseHeader, Resent: true, Err: io.ErrUnexpectedEOF}, readBody: true}
	// staleHangUp is a reused connection found closed before any of the
	// answer: the keep-alive race, or a host going down.
	staleHangUp = step{err: &h1client.Error{Phase: h1client.PhaseHeader, Reused: true, Err: io.ErrUnexpectedEOF}, readBody: true}
)

type timeoutErr struct{}

func (*timeoutErr) Error() string   { return "i/o timeout" }
func (*timeoutErr) Timeout() bool   { return true }
func (*timeoutErr) Temporary() bool { return true }

func answer(status int) step {
	return step{status: status, body: strconv.Itoa(status) + " from the backend"}
}

// script is a scripted upstream: attempt i of a request gets steps[i]
// (whichever host the pool chose), and attempts past the script succeed. It
// records every attempt.
type script struct {
	mu       sync.Mutex
	steps    []step
	attempts []attempt
}

type attempt struct {
	host, method, body string
}

func (s *script) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	host := r.URL.Host
	st := step{status: 200, body: "ok from " + host}
	if n := len(s.attempts); n < len(s.steps) {
		st = s.steps[n]
	}
	s.mu.Unlock()
	var body []byte
	if r.Body != nil && (st.err == nil || st.readBody) {
		body, _ = io.ReadAll(r.Body)
	}
	s.mu.Lock()
	s.attempts = append(s.attempts, attempt{host, r.Method, string(body)})
	s.mu.Unlock()
	if st.atDeadline {
		<-r.Context().Done()
	}
	if st.err != nil {
		return nil, st.err
	}
	hdr := http.Header{"Content-Type": {"text/plain"}, "Content-Length": {strconv.Itoa(len(st.body))}}
	if st.retryAfter != "" {
		hdr["Retry-After"] = []string{st.retryAfter}
	}
	return &http.Response{
		StatusCode: st.status, ProtoMajor: 1, ProtoMinor: 1,
		Header:        hdr,
		ContentLength: int64(len(st.body)),
		Body:          io.NopCloser(strings.NewReader(st.body)),
	}, nil
}

func (s *script) hosts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, a := range s.attempts {
		out = append(out, a.host)
	}
	return out
}

// A rule of the request path: a request, what each host does, and what
// must come of it.
type rule struct {
	name   string
	method string
	body   string // request body; "" means none
	tune   func(*health.PoolConfig, *Route)
	before func(*fixture) // e.g. take hosts out
	steps  []step         // what attempt 1, 2, ... meet

	tries     int // attempts made, each on a different host
	status    int
	bodyHas   string                // a part of the client's answer body
	hostFails map[int]outcome.Class // the host of attempt i is charged with it
	retries   uint64                // retries counted against the budget
	// charged, when -1, says that hostFails are counted attempts only:
	// nothing is attributed to a host, nor in its window.
	charged    int
	attributed health.Attribution
}

func TestRequestPathRules(t *testing.T) {
	bigPUT := strings.Repeat("p", 70<<10) // above the 64 KiB replay buffer
	rules := []rule{
		{
			name:  "a GET whose first host refuses is retried at no cost to the budget",
			steps: []step{refused}, tries: 2, status: 200,
			hostFails: map[int]outcome.Class{0: outcome.ConnectRefused},
		},
		{
			name:  "a connect timeout is retried like a refusal",
			steps: []step{dialWait}, tries: 2, status: 200,
			hostFails: map[int]outcome.Class{0: outcome.ConnectTimeout},
		},
		{
			name:  "a GET that reached a backend and failed is retried within the budget",
			steps: []step{reset}, tries: 2, status: 200, retries: 1,
			hostFails: map[int]outcome.Class{0: outcome.Reset}, attributed: health.AttrHost,
		},
		{
			name:   "a POST that was sent is never replayed",
			method: "POST", body: "charge=1", steps: []step{reset},
			tries: 1, status: 502, bodyHas: "backend reset the connection",
			hostFails: map[int]outcome.Class{0: outcome.Reset}, attributed: health.AttrHost,
		},
		{
			name:   "a POST whose host refused the connection goes to the next host, body intact",
			method: "POST", body: "charge=1", steps: []step{refused},
			tries: 2, status: 200, hostFails: map[int]outcome.Class{0: outcome.ConnectRefused},
		},
		{
			name:   "a small PUT is buffered and replayed whole",
			method: "PUT", body: "doc", steps: []step{hangUp},
			tries: 2, status: 200, retries: 1,
			hostFails: map[int]outcome.Class{0: outcome.EOFBeforeResponse},
		},
		{
			name:   "a PUT too large to buffer is not replayed once sent",
			method: "PUT", body: bigPUT, steps: []step{reset},
			tries: 1, status: 502, hostFails: map[int]outcome.Class{0: outcome.Reset},
		},
		{
			name:  "the same failure on two hosts is the request's: no host is charged",
			steps: []step{reset, reset}, tries: 2,
			status: 502, bodyHas: "failed the same way on two backends", retries: 1, attributed: health.AttrRequest,
		},
		{
			// A slow route: every request of it times out wherever it goes.
			name: "the same failure on two hosts while the route's other clients fail that way, none served since, is the route's: nobody is charged",
			before: func(f *fixture) {
				f.rt.Tracker.AttemptFailed(outcome.ResponseTimeout, ^uint64(0)) // other clients' first timeouts
			},
			steps: []step{slow, slow}, tries: 2,
			status: 504, bodyHas: "this route's requests are failing the same way", retries: 1, attributed: health.AttrRoute, charged: -1,
		},
		{
			name: "the same failure on two hosts that serve nobody else is theirs: the answer does not blame the request",
			before: func(f *fixture) {
				for _, h := range f.pool.Hosts { // each failed lately, and served nothing since
					f.pool.Settle(&health.Request{Route: f.rt.Tracker, RouteBit: 1, ClientKey: "192.0.2.99", ClientBit: 1 << 9},
						[]health.Failure{{Host: h, Class: outcome.Reset}}, false, time.Now())
				}
			},
			steps: []step{reset, reset}, tries: 2,
			status: 502, bodyHas: "no usable answer from the backends", retries: 1, attributed: health.AttrHost,
		},
		{
			name:  "a keep-alive resend to the same host is not a second backend's agreement: the GET goes to another host",
			steps: []step{resentHangUp}, tries: 2, status: 200, retries: 1,
			hostFails: map[int]outcome.Class{0: outcome.EOFBeforeResponse}, attributed: health.AttrHost,
		},
		{
			name:  "a resend to the same host, then the same failure on another host, is the request's",
			steps: []step{resentHangUp, hangUp}, tries: 2,
			status: 502, bodyHas: "failed the same way on two backends", retries: 1, attributed: health.AttrRequest,
		},
		{
			name:  "a GET on a reused connection found closed goes to another host, free of the budget, charged to nobody",
			steps: []step{staleHangUp}, tries: 2, status: 200,
			hostFails: map[int]outcome.Class{0: outcome.EOFBeforeResponse}, charged: -1,
		},
		{
			name:  "a GET that finds its connection closed on two hosts is the request's",
			steps: []step{staleHangUp, staleHangUp}, tries: 2,
			status: 502, bodyHas: "failed the same way on two backends", attributed: health.AttrRequest,
		},
		{
			// A pool whose other hosts are out: no second host can agree.
			name: "a GET failing the same way each time it came lately, on the one host left serving others in between, is the request's",
			before: func(f *fixture) {
				left := f.pool.Hosts[0]
				for _, h := range f.pool.Hosts[1:] {
					f.pool.SetMode(h.Addr, health.Maintenance, time.Now())
				}
				for range 2 { // the same GET failed there twice, on kept-alive connections
					f.pool.Record(left, outcome.OK, &health.Request{Route: f.rt.Tracker, RouteBit: 1, ClientKey: "192.0.2.98", ClientBit: 1 << 8, Method: "GET", Path: "/other"}, time.Now())
					f.pool.Settle(&health.Request{Route: f.rt.Tracker, RouteBit: 1, ClientKey: "192.0.2.99", ClientBit: 1 << 9, Method: "GET", Path: "/x"},
						[]health.Failure{{Host: left, Class: outcome.EOFBeforeResponse, Stale: true}}, false, time.Now())
				}
				f.pool.Record(left, outcome.OK, &health.Request{Route: f.rt.Tracker, RouteBit: 1, ClientKey: "192.0.2.98", ClientBit: 1 << 8, Method: "GET", Path: "/other"}, time.Now())
			},
			steps: []step{staleHangUp}, tries: 1,
			status: 502, bodyHas: "this request failed the same way each time it was sent lately", attributed: health.AttrRequest,
		},
		{
			name:   "a POST that failed on its host after a resend there is the host's failure, not the request's",
			method: "POST", body: "charge=1", steps: []step{resentHangUp},
			tries: 1, status: 502, bodyHas: "no usable answer from the backends",
			hostFails: map[int]outcome.Class{0: outcome.EOFBeforeResponse}, attributed: health.AttrHost,
		},
		{
			name:  "a backend's own 503 is passed on when the retry fails too",
			steps: []step{answer(503), answer(503)}, tries: 2,
			status: 503, bodyHas: "503 from the backend", retries: 1, attributed: health.AttrRequest,
		},
		{
			name:  "a 503 with Retry-After is overload: charged to nobody, the GET tries a host with room, within the budget",
			steps: []step{shedding}, tries: 2, status: 200, retries: 1,
			hostFails: map[int]outcome.Class{0: outcome.Status5xx}, charged: -1,
		},
		{
			name:  "with every host shedding, the host's own 503 and Retry-After are passed on",
			steps: []step{shedding, shedding}, tries: 2, status: 503, bodyHas: "503 from the backend: full", retries: 1,
			hostFails: map[int]outcome.Class{0: outcome.Status5xx, 1: outcome.Status5xx}, charged: -1,
		},
		{
			name:   "a POST a host shed is not sent again; its answer is passed on",
			method: "POST", body: "charge=1", steps: []step{shedding}, tries: 1, status: 503, bodyHas: "503 from the backend: full",
			hostFails: map[int]outcome.Class{0: outcome.Status5xx}, charged: -1,
		},
		{
			name: "hosts that shed are sent no more than they had in flight; the excess is answered at once with Retry-After",
			before: func(f *fixture) {
				for _, h := range f.pool.Hosts {
					f.pool.Overloaded(h, time.Second, 2, time.Now()) // held to 1 at once
					h.Acquire()                                      // and 1 in flight
				}
			},
			tries: 0, status: 503, bodyHas: "shedding load",
		},
		{
			name:  "a 503 then a success gives the success",
			steps: []step{answer(503)}, tries: 2, status: 200, retries: 1,
			hostFails: map[int]outcome.Class{0: outcome.Status5xx},
		},
		{
			name:  "a GET waiting on a host found dead goes to another host, charged to nobody, free of the budget",
			steps: []step{cutWait}, tries: 2, status: 200,
		},
		{
			name:  "a GET waiting on a host found dead does not use up a try",
			tune:  func(_ *health.PoolConfig, r *Route) { r.Tries = 1 },
			steps: []step{cutWait}, tries: 2, status: 200,
		},
		{
			name:   "a POST waiting on a host found dead is answered by the chain at once, never sent again",
			method: "POST", body: "charge=1", steps: []step{cutWait},
			tries: 1, status: 503, bodyHas: "sorry",
		},
		{
			name:   "a POST cut on a host found dead is not handed to the fallback pool either",
			method: "POST", body: "charge=1", steps: []step{cutWait},
			tune:  func(_ *health.PoolConfig, r *Route) { r.Fallback = fallbackPool() },
			tries: 1, status: 503, bodyHas: "sorry",
		},
		{
			name:  "a 4xx is the client's answer, never a failure",
			steps: []step{answer(404)}, tries: 1, status: 404,
		},
		{
			name:  "an attempt the route's deadline ended is a response timeout, whatever error the transport gave",
			tune:  func(_ *health.PoolConfig, r *Route) { r.Tries, r.Total = 1, 10*time.Millisecond },
			steps: []step{{err: reset.err, readBody: true, atDeadline: true}}, tries: 1,
			status: 504, bodyHas: "response_timeout",
			hostFails: map[int]outcome.Class{0: outcome.ResponseTimeout}, attributed: health.AttrHost,
		},
		{
			name:  "a response timeout with one try is a 504",
			tune:  func(_ *health.PoolConfig, r *Route) { r.Tries = 1 },
			steps: []step{slow}, tries: 1, status: 504, bodyHas: "response_timeout",
			hostFails: map[int]outcome.Class{0: outcome.ResponseTimeout},
		},
		{
			name:  "an unparsable answer with one try is a 502",
			tune:  func(_ *health.PoolConfig, r *Route) { r.Tries = 1 },
			steps: []step{garbage}, tries: 1, status: 502, bodyHas: "bad_response",
			hostFails: map[int]outcome.Class{0: outcome.BadResponse},
		},
		{
			name:  "an empty retry budget stops retries of sent requests",
			tune:  func(_ *health.PoolConfig, r *Route) { r.RetryBudget, r.MinRetries = 0, 0 },
			steps: []step{reset}, tries: 1, status: 502, hostFails: map[int]outcome.Class{0: outcome.Reset},
		},
		{
			name:  "an empty retry budget still lets a refused connection move on",
			tune:  func(_ *health.PoolConfig, r *Route) { r.RetryBudget, r.MinRetries = 0, 0 },
			steps: []step{refused}, tries: 2, status: 200, hostFails: map[int]outcome.Class{0: outcome.ConnectRefused},
		},
		{
			name:   "a request body above the route's limit is refused before any attempt",
			method: "POST", body: "0123456789",
			tune:  func(_ *health.PoolConfig, r *Route) { r.MaxBodyBytes = 4 },
			tries: 0, status: 413,
		},
		{
			name:   "with every host out by an operator the sorry page answers, with Retry-After",
			before: func(f *fixture) { drainAll(f.pool) },
			tries:  0, status: 503, bodyHas: "sorry",
		},
		{
			name: "with every host ejected on passive evidence, panic routing tries the least recently failed",
			before: func(f *fixture) {
				at := time.Now()
				for i, h := range f.pool.Hosts {
					for range 3 { // the first host failed least recently
						f.pool.Record(h, outcome.ConnectRefused, nil, at.Add(time.Duration(i)*time.Millisecond))
					}
				}
			},
			tune:  func(pc *health.PoolConfig, _ *Route) { pc.Passive.MaxEjected = 1 },
			tries: 1, status: 200,
		},
		{
			name: "an empty pool hands over to the fallback pool",
			tune: func(_ *health.PoolConfig, r *Route) {
				r.Fallback = fallbackPool()
			},
			before: func(f *fixture) { drainAll(f.pool) },
			tries:  1, status: 200,
		},
		{
			name: "a route at its in-flight limit sheds at once",
			tune: func(_ *health.PoolConfig, r *Route) { r.MaxInFlight = 1 },
			before: func(f *fixture) {
				f.rt.Stats.InFlight.Add(1) // one request already in flight
			},
			tries: 0, status: 503, bodyHas: "limit of requests in flight",
		},
	}
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			up := &script{steps: r.steps}
			var tunes []func(*health.PoolConfig, *Route)
			if r.tune != nil {
				tunes = append(tunes, r.tune)
			}
			f := newFixture(t, 3, up, tunes...)
			if r.before != nil {
				r.before(f)
			}
			method := r.method
			if method == "" {
				method = "GET"
			}
			var body io.Reader
			if r.body != "" {
				body = strings.NewReader(r.body)
			}
			req := httptest.NewRequest(method, "http://example.com/x", body)
			req.RemoteAddr = "192.0.2.7:5000"
			w := httptest.NewRecorder()
			f.h.ServeHTTP(w, req)

			tried := up.hosts()
			if len(tried) != r.tries {
				t.Errorf("%d attempts (%v), want %d", len(tried), tried, r.tries)
			}
			seen := map[string]bool{}
			for _, h := range tried {
				if seen[h] {
					t.Errorf("host %s tried twice for one request: %v", h, tried)
				}
				seen[h] = true
			}
			if w.Code != r.status {
				t.Errorf("status %d, want %d (body %q)", w.Code, r.status, w.Body.String())
			}
			if !strings.Contains(w.Body.String(), r.bodyHas) {
				t.Errorf("body %q lacks %q", w.Body.String(), r.bodyHas)
			}
			if w.Code == 503 && !strings.Contains(w.Body.String(), "from the backend") && w.Header().Get("Retry-After") == "" {
				t.Error("a 503 of sturdy's own without Retry-After")
			}
			if r.status == 200 && r.body != "" {
				if last := up.attempts[len(up.attempts)-1]; last.body != r.body {
					t.Errorf("the answering host got body %q, want the client's %q", last.body, r.body)
				}
			}
			charged := map[string]outcome.Class{}
			for i, c := range r.hostFails {
				charged[tried[i]] = c
			}
			for _, h := range f.pool.Hosts {
				want, isCharged := charged[h.Addr]
				for _, c := range outcome.All() {
					if !c.Failure() {
						continue
					}
					got := h.Attempts(c)
					if isCharged && c == want && got == 0 {
						t.Errorf("host %s: no %s counted", h.Addr, c)
					}
					if got > 0 && !(isCharged && c == want) && r.attributed != health.AttrRequest && r.before == nil {
						t.Errorf("host %s: %d %s counted, want none", h.Addr, got, c)
					}
				}
			}
			if r.charged < 0 {
				if n := f.mon.AttributedCount(health.AttrHost); n != 0 {
					t.Errorf("%d failures attributed to hosts, want none", n)
				}
				for _, h := range f.pool.Hosts {
					if n := h.Window(time.Now()).Failures; n != 0 {
						t.Errorf("host %s: %d failures in its window, want none", h.Addr, n)
					}
				}
			}
			if got := f.pool.Budget().Made.Load(); got != r.retries {
				t.Errorf("%d retries counted against the budget, want %d", got, r.retries)
			}
			if r.attributed != 0 && f.mon.AttributedCount(r.attributed) == 0 {
				t.Errorf("nothing attributed to the %s", r.attributed)
			}
			if r.attributed == health.AttrRequest && f.mon.AttributedCount(health.AttrHost) != 0 {
				t.Errorf("%d failures attributed to hosts; the request is the cause", f.mon.AttributedCount(health.AttrHost))
			}
		})
	}
}

func drainAll(p *health.Pool) {
	for _, h := range p.Hosts {
		p.SetMode(h.Addr, health.Maintenance, time.Now())
	}
}

func fallbackPool() *health.Pool {
	mon := health.NewMonitor(health.Options{})
	p, err := health.NewPool(mon, &health.Attributing{Window: time.Second}, health.PoolConfig{
		Name: "backup", Balance: "round_robin", Passive: defaultPassive(),
		Hosts: []health.HostSpec{{Addr: "10.9.0.1:80", Weight: 1}},
	}, nil)
	if err != nil {
		panic(err)
	}
	return p
}

// A client that goes away is answered nothing (499 in the counters) and
// charged to no host.
func TestClientGoneIsChargedToNobody(t *testing.T) {
	up := &script{steps: []step{slow}}
	f := newFixture(t, 2, up)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequest("GET", "http://example.com/", nil).WithContext(ctx)
	req.RemoteAddr = "192.0.2.7:5000"
	defer func() {
		if v := recover(); v != http.ErrAbortHandler {
			t.Fatalf("recovered %v, want http.ErrAbortHandler (no answer at all)", v)
		}
		for _, h := range f.pool.Hosts {
			if h.Attempts(outcome.ResponseTimeout) != 0 || h.Window(time.Now()).Failures != 0 {
				t.Errorf("host %s charged for a client that left", h.Addr)
			}
		}
		if n := f.mon.AttributedCount(health.AttrHost); n != 0 {
			t.Errorf("%d host attributions", n)
		}
	}()
	f.h.ServeHTTP(httptest.NewRecorder(), req)
}

// A client attributed with its own failures is refused with 429 when the
// route sheds such clients; others are served.
func TestAnAttributedClientIsShed(t *testing.T) {
	up := &script{}
	f := newFixture(t, 2, up, func(_ *health.PoolConfig, r *Route) { r.ShedClients = true })
	scanner := "203.0.113.66"
	for range 10 {
		hr := &health.Request{Route: f.rt.Tracker, RouteBit: 1, ClientKey: scanner, ClientBit: 1 << 3}
		f.pool.Settle(hr, []health.Failure{{Host: f.pool.Hosts[0], Class: outcome.Status5xx, Status: 502}, {Host: f.pool.Hosts[1], Class: outcome.Status5xx, Status: 502}}, true, time.Now())
		for _, h := range f.pool.Hosts {
			f.pool.Record(h, outcome.OK, &health.Request{Route: f.rt.Tracker, RouteBit: 1, ClientKey: "192.0.2.1", ClientBit: 1 << 9}, time.Now())
		}
	}
	if !f.mon.Attributed(scanner) {
		t.Fatal("the scanner is not attributed")
	}
	for client, want := range map[string]int{scanner: 429, "192.0.2.1": 200} {
		req := httptest.NewRequest("GET", "http://example.com/", nil)
		req.RemoteAddr = client + ":5000"
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, req)
		if w.Code != want {
			t.Errorf("client %s: %d, want %d", client, w.Code, want)
		}
	}
}
