package drill

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/fake"
)

// bodyKeep is how much of each answer's body is kept for judging (a sorry
// page is recognised by its body).
const bodyKeep = 512

// request is one request a client sends.
type request struct {
	ep     endpoint
	target string // path and query; raw bytes allowed when raw is set
	// raw sends the request line byte for byte on a plain socket: Go's
	// HTTP client refuses to send raw non-ASCII targets (incident 003).
	raw bool
}

// stream is a group of clients sending at a steady pace. Every client is
// bounded twice: by count (rate × its share of the duration) and by the
// load's deadline.
type stream struct {
	group   string
	clients []string // source addresses, one client each
	rate    float64  // requests per second per client
	// start delays the stream's first request, e.g. after a baseline phase.
	start time.Duration
	// offsets spreads the clients' first requests within one interval
	// (seeded by the caller; nil: all start together).
	offsets []float64
	timeout time.Duration // per request
	next    func(client, i int) request
}

// answer is what one request got.
type answer struct {
	group   string
	client  int
	target  string
	at      time.Duration // sent, since the load began
	latency time.Duration
	status  int    // 0 when no HTTP answer came
	failure string // why no HTTP answer came: timeout, reset, closed, refused, error
	header  http.Header
	body    string
}

// key is the answer's status, or what happened instead.
func (a answer) key() string {
	if a.status != 0 {
		return strconv.Itoa(a.status)
	}
	return a.failure
}

func (a answer) failed() bool { return a.status == 0 || a.status >= 500 }

// loadRun is a finished load: every answer, in the order they came.
type loadRun struct {
	begin   time.Time
	answers []answer
}

// runLoad runs the streams for d and returns once every request has been
// answered or timed out. Nothing is sent after the deadline; in-flight
// requests finish within their own timeout.
func runLoad(ctx context.Context, d time.Duration, streams ...stream) *loadRun {
	run := &loadRun{begin: time.Now()}
	deadline := run.begin.Add(d)
	var mu sync.Mutex // guards run.answers
	var wg sync.WaitGroup
	for _, s := range streams {
		if s.rate <= 0 || s.start >= d {
			continue
		}
		interval := time.Duration(float64(time.Second) / s.rate)
		count := int(math.Ceil(s.rate*(d-s.start).Seconds())) + 1
		for c, ip := range s.clients {
			offset := s.start
			if c < len(s.offsets) {
				offset += time.Duration(s.offsets[c] * float64(interval))
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl := fake.Client(ip, s.timeout)
				defer cl.CloseIdleConnections()
				next := run.begin.Add(offset)
				for i := 0; i < count; i++ {
					if !sleepUntil(ctx, next) || time.Now().After(deadline) {
						return
					}
					// Never catch up with a burst after a slow answer: a
					// client waits for its answer, as real ones do.
					next = later(next.Add(interval), time.Now())
					a := do(ctx, cl, ip, s.next(c, i), s.timeout)
					a.group, a.client = s.group, c
					a.at = time.Since(run.begin) - a.latency
					mu.Lock()
					run.answers = append(run.answers, a)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return run
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// sleepUntil waits for t; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// do sends one request and records what came back.
func do(ctx context.Context, cl *http.Client, ip string, rq request, timeout time.Duration) answer {
	start := time.Now()
	a := answer{target: rq.target}
	if rq.raw {
		status, err := fake.RawGet(ip, rq.ep.Addr, rq.ep.Host, rq.target, timeout)
		a.latency = time.Since(start)
		if err != nil {
			a.failure = classify(err)
		}
		a.status = status
		return a
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+rq.ep.Addr+rq.target, nil)
	if err != nil {
		a.failure = "error"
		return a
	}
	req.Host = rq.ep.Host
	resp, err := cl.Do(req)
	if err != nil {
		a.latency = time.Since(start)
		a.failure = classify(err)
		return a
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, bodyKeep))
	// Drain a little more so that the connection can be reused; a proxy
	// answer in a drill is never large.
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	a.latency = time.Since(start)
	a.status, a.header, a.body = resp.StatusCode, resp.Header, string(body)
	return a
}

// classify names a request that got no HTTP answer.
func classify(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNRESET):
		return "reset"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "closed"
	}
	return "error"
}

// of returns the answers of one group, in arrival order.
func (r *loadRun) of(group string) []answer {
	var out []answer
	for _, a := range r.answers {
		if a.group == group {
			out = append(out, a)
		}
	}
	return out
}

// summarize turns answers into a Group.
func summarize(who string, as []answer) Group {
	g := Group{Who: who, Requests: len(as), Answers: map[string]int{}}
	lat := make([]time.Duration, 0, len(as))
	for _, a := range as {
		g.Answers[a.key()]++
		if a.failed() {
			g.Failures++
		}
		lat = append(lat, a.latency)
	}
	g.P50Ms, g.P99Ms, g.MaxMs = ms(quantile(lat, 0.50)), ms(quantile(lat, 0.99)), ms(quantile(lat, 1))
	return g
}

// quantile returns the q-quantile of d (nearest rank); 0 for none.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e4) / 100 }
