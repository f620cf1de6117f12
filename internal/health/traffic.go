package health

import (
	"sync/atomic"
	"time"

	"github.com/sturdyproxy/sturdy/internal/health/recent"
	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// HeaderTimeBounds are the upper bounds, in seconds, of the histogram of a
// host's time to response headers.
var HeaderTimeBounds = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// Slots of a host's recent window.
const (
	recentAttempts = iota
	recentFailures
)

// traffic is what the request path measures on a host besides the outcome
// counters: the time to response headers, body bytes each way, and the
// last minute's attempts and failures for the status page. All atomics,
// shared across reloads with the rest of hostState.
type traffic struct {
	// headerTime[i] counts times <= HeaderTimeBounds[i] (not cumulative);
	// the last slot counts the rest.
	headerTime  [16]atomic.Uint64
	headerNanos atomic.Uint64
	bytesIn     atomic.Uint64 // response body bytes read from the host
	bytesOut    atomic.Uint64 // request body bytes sent to it
	last        recent.Window
}

// Observe counts one attempt on the host that ended in class c at end
// (Unix nanoseconds). When it got response headers (c is OK or
// Status5xx), d is how long they took; sent is the request body bytes
// sent.
func (s *hostState) Observe(c outcome.Class, d time.Duration, sent int64, end int64) {
	t := &s.traffic
	if c.Failure() {
		t.last.Add2(end, recentAttempts, recentFailures)
	} else {
		t.last.Add(end, recentAttempts)
	}
	if sent > 0 {
		t.bytesOut.Add(uint64(sent))
	}
	if c != outcome.OK && c != outcome.Status5xx {
		return
	}
	sec := d.Seconds()
	i := 0
	for i < len(HeaderTimeBounds) && sec > HeaderTimeBounds[i] {
		i++
	}
	t.headerTime[i].Add(1)
	t.headerNanos.Add(uint64(d))
}

// Received counts n response body bytes read from the host.
func (s *hostState) Received(n int64) {
	if n > 0 {
		s.traffic.bytesIn.Add(uint64(n))
	}
}

// Bytes returns the body bytes received from and sent to the host, since
// start.
func (s *hostState) Bytes() (received, sent uint64) {
	return s.traffic.bytesIn.Load(), s.traffic.bytesOut.Load()
}

// HeaderTime returns the histogram of times to response headers since
// start: cumulative counts per HeaderTimeBounds, the total count and sum.
func (s *hostState) HeaderTime() (counts []uint64, count uint64, sum time.Duration) {
	t := &s.traffic
	counts = make([]uint64, len(HeaderTimeBounds))
	var cum uint64
	for i := range HeaderTimeBounds {
		cum += t.headerTime[i].Load()
		counts[i] = cum
	}
	return counts, cum + t.headerTime[len(HeaderTimeBounds)].Load(), time.Duration(t.headerNanos.Load())
}

// Recent returns the last minute's attempts and failed attempts (any
// outcome but ok and client_cancel), and the span they cover.
func (s *hostState) Recent(now time.Time) (attempts, failures uint64, span time.Duration) {
	t := s.traffic.last.Sum(now)
	return t.N[recentAttempts], t.N[recentFailures], t.Span
}
