package proxy

import (
	"sync/atomic"
	"time"

	"github.com/sturdyproxy/sturdy/internal/health/recent"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// Answer kinds: requests answered some other way than by a backend in
// rotation.
const (
	AnswerPanic    = iota // a passively ejected host, because none was left
	AnswerFallback        // the route's fallback pool
	AnswerStale           // a stale cached copy
	AnswerSorry           // the sorry page
	AnswerShed            // refused at once: a limit was full or the client is shed
	numAnswers
)

// answerNames are the kinds' names, owned by the status's vocabulary.
var answerNames = view.AnswerKinds

// The kinds and their names agree in number, or this does not compile.
var _ = [1]struct{}{}[numAnswers-len(view.AnswerKinds)]

// DurationBounds are the request duration histogram's upper bounds, seconds.
var DurationBounds = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// Stats are a route's counters. They live as long as the route's name, across
// reloads, so that counters only go up.
type Stats struct {
	InFlight atomic.Int64
	// Mirror counts the route's mirrored copies.
	Mirror MirrorStats
	// codes counts answers by class: 1xx..5xx at 1..5, 499 (client gone) at 0.
	codes   [6]atomic.Uint64
	answers [numAnswers]atomic.Uint64
	// buckets[i] counts durations <= DurationBounds[i] (not cumulative);
	// the last slot counts the rest.
	buckets  [16]atomic.Uint64
	sumNanos atomic.Uint64
	// last counts the last minute's answers in the slots of codes, and in
	// slotClientFault the 5xx answers whose failure was attributed to the
	// client itself (a scanner behind a WAF): the status page judges a
	// route by how it answers its clients now, not since start.
	last recent.Window
	// clientFaults counts, since start, the 5xx answers whose failure was
	// attributed to the client itself.
	clientFaults atomic.Uint64
}

// slotClientFault is the recent window's slot for 5xx answers to clients
// whose failures are their own.
const slotClientFault = 6

// Answer counts one request answered by kind.
func (s *Stats) Answer(kind int) { s.answers[kind].Add(1) }

// observe counts one answer with status that took d and ended at end
// (Unix nanoseconds); clientFault tells that its failure was attributed
// to the client.
func (s *Stats) observe(status int, d time.Duration, end int64, clientFault bool) {
	c := status / 100
	if status == 499 || c < 1 || c > 5 {
		c = 0
	}
	s.codes[c].Add(1)
	if c == 5 && clientFault {
		s.clientFaults.Add(1)
		s.last.Add2(end, c, slotClientFault)
	} else {
		s.last.Add(end, c)
	}
	sec := d.Seconds()
	i := 0
	for i < len(DurationBounds) && sec > DurationBounds[i] {
		i++
	}
	s.buckets[i].Add(1)
	s.sumNanos.Add(uint64(d))
}

// reattribute counts n earlier 5xx answers, already counted, as the
// client's own: their client has been attributed since (now, end).
func (s *Stats) reattribute(n uint64, end int64) {
	s.clientFaults.Add(n)
	for range n {
		s.last.Add(end, slotClientFault)
	}
}

// View fills the route's counters into v.
func (s *Stats) View(v *view.Route) {
	v.InFlight = s.InFlight.Load()
	v.ClientErrors = s.clientFaults.Load()
	v.Requests = map[string]uint64{"499": s.codes[0].Load()}
	for c := 1; c <= 5; c++ {
		v.Requests[string(rune('0'+c))+"xx"] = s.codes[c].Load()
	}
	v.Answers = make(map[string]uint64, numAnswers)
	for i, n := range answerNames {
		v.Answers[n] = s.answers[i].Load()
	}
	h := view.Histogram{Bounds: DurationBounds, Counts: make([]uint64, len(DurationBounds))}
	var cum uint64
	for i := range DurationBounds {
		cum += s.buckets[i].Load()
		h.Counts[i] = cum
	}
	h.Count = cum + s.buckets[len(DurationBounds)].Load()
	h.Sum = time.Duration(s.sumNanos.Load()).Seconds()
	v.Duration = h
}

// Recent returns the last minute's answers; up is how long the process has
// run, which bounds the window's span.
func (s *Stats) Recent(now time.Time, up time.Duration) view.RouteRecent {
	t := s.last.Sum(now)
	r := view.RouteRecent{
		Seconds:      min(t.Span, max(up, 0)).Seconds(),
		Requests:     map[string]uint64{"499": t.N[0]},
		ClientErrors: t.N[slotClientFault],
	}
	for c := 1; c <= 5; c++ {
		r.Requests[string(rune('0'+c))+"xx"] = t.N[c]
	}
	return r
}

// Read counts the bytes read from the host through the cache (and
// through PoolTransport): releasingBody is their way to a host's response
// body (cached.go); respond counts the rest.
func (b *releasingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.host.Received(int64(n))
	return n, err
}
