package proxy

import (
	"bytes"
	"context"
	"io"
	"math/bits"
	"net/http"
	"sync/atomic"
	"time"
)

// Mirror copies a share of a route's requests to another pool and
// ignores the answers (Gateway API's RequestMirror, nginx's mirror). A
// copy never delays or changes the client's answer and never touches the
// route's own pools: it goes through its own pool's health model, at most
// MaxInFlight at once, each within Timeout.
type Mirror struct {
	Transport *PoolTransport
	// Num/Den is the share of requests copied.
	Num, Den uint64
	// MaxBody is the largest request body copied.
	MaxBody int64
	// MaxInFlight bounds copies in flight; past it copies are dropped.
	MaxInFlight int64
	// Timeout bounds one copy.
	Timeout time.Duration
	// Stats count the copies; they live as long as the route's name.
	Stats *MirrorStats

	// ctx ends every copy in flight when the runtime closes: it owns the
	// copies' goroutines.
	ctx      context.Context
	cancel   context.CancelFunc
	n        atomic.Uint64
	inFlight atomic.Int64
}

// MirrorStats count what happened to a route's copies.
type MirrorStats struct {
	Sent    atomic.Uint64 // answered by the mirror pool (any status)
	Failed  atomic.Uint64 // no answer: no host, connection failure, timeout
	Dropped atomic.Uint64 // max_in_flight copies were already in flight
	Skipped atomic.Uint64 // the body was larger than max_body or of unknown length
}

// MirrorConfig is what NewMirror needs: Mirror's exported fields.
type MirrorConfig struct {
	Transport   *PoolTransport
	Num, Den    uint64
	MaxBody     int64
	MaxInFlight int64
	Timeout     time.Duration
	Stats       *MirrorStats
}

// View is the counts by result, for the status page and metrics.
func (s *MirrorStats) View() map[string]uint64 {
	return map[string]uint64{"sent": s.Sent.Load(), "failed": s.Failed.Load(), "dropped": s.Dropped.Load(), "skipped": s.Skipped.Load()}
}

// NewMirror returns a mirror; Close ends its copies in flight.
func NewMirror(m MirrorConfig) *Mirror {
	out := &Mirror{Transport: m.Transport, Num: m.Num, Den: m.Den, MaxBody: m.MaxBody,
		MaxInFlight: m.MaxInFlight, Timeout: m.Timeout, Stats: m.Stats}
	if out.Stats == nil {
		out.Stats = new(MirrorStats)
	}
	out.ctx, out.cancel = context.WithCancel(context.Background())
	return out
}

// Close cancels the copies in flight; later copies fail at once.
func (m *Mirror) Close() { m.cancel() }

// InFlight is the number of copies in flight.
func (m *Mirror) InFlight() int64 { return m.inFlight.Load() }

// take reports whether this request is in the mirrored share: exactly
// Num of every Den consecutive requests, spread evenly.
func (m *Mirror) take() bool {
	if m.Num == m.Den {
		return true
	}
	n := m.n.Add(1)
	return share(n, m.Num, m.Den) != share(n-1, m.Num, m.Den)
}

// share is floor(n*num/den) without overflow (num <= den).
func share(n, num, den uint64) uint64 {
	hi, lo := bits.Mul64(n, num)
	q, _ := bits.Div64(hi, lo, den)
	return q
}

// send starts a copy of out (with body, nil for none). It returns at once.
func (m *Mirror) send(out *http.Request, body []byte) {
	if m.inFlight.Add(1) > m.MaxInFlight {
		m.inFlight.Add(-1)
		m.Stats.Dropped.Add(1)
		return
	}
	// Copied now: the attempts go on changing out's URL and Host.
	u := *out.URL
	cp := &http.Request{
		Method: out.Method, URL: &u, Proto: out.Proto, ProtoMajor: 1, ProtoMinor: 1,
		Header: out.Header.Clone(), Host: out.Host, ContentLength: int64(len(body)), Body: http.NoBody,
	}
	go m.run(cp, body)
}

func (m *Mirror) run(r *http.Request, body []byte) {
	defer m.inFlight.Add(-1)
	ctx, cancel := context.WithTimeout(m.ctx, m.Timeout)
	defer cancel()
	if len(body) > 0 {
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := m.Transport.RoundTrip(r.WithContext(ctx))
	if err != nil {
		m.Stats.Failed.Add(1)
		return
	}
	io.CopyN(io.Discard, resp.Body, 64<<10)
	resp.Body.Close()
	m.Stats.Sent.Add(1)
}
