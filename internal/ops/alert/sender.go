package alert

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// sender owns one webhook: its queue and the goroutine that empties it.
type sender struct {
	cfg    Webhook
	opts   *Options
	filter map[string]bool // nil: every event
	enc    encoder

	mu      sync.Mutex // guards queue, closed, lastErr, lastErrAt
	queue   ring
	closed  bool
	lastErr string
	lastAt  time.Time

	wake     chan struct{} // capacity 1: "the queue is not empty"
	stopping chan struct{} // closed by stop: finish the queue, no new retries
	ctx      context.Context
	cancel   context.CancelFunc // hard stop: abort the attempt in flight
	done     chan struct{}

	sent, failed, dropped, retries atomic.Uint64

	// Owned by the goroutine.
	failing int // consecutive failed tries, for logging once per streak
}

func newSender(h Webhook, o *Options) *sender {
	s := &sender{
		cfg: h, opts: o, enc: newEncoder(h.Format, o),
		queue: newRing(o.QueueSize),
		wake:  make(chan struct{}, 1), stopping: make(chan struct{}), done: make(chan struct{}),
	}
	if len(h.Events) > 0 {
		s.filter = make(map[string]bool, len(h.Events))
		for _, t := range h.Events {
			s.filter[t] = true
		}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

func (s *sender) enqueue(e event.Event) {
	if s.filter != nil && !s.filter[e.Type] {
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.dropped.Add(1)
		return
	}
	if s.queue.push(e) {
		s.dropped.Add(1) // the oldest waiting event made room
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *sender) pop() (event.Event, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queue.pop()
}

func (s *sender) run() {
	defer close(s.done)
	var resend <-chan time.Time
	if s.enc.resends() {
		t := time.NewTicker(s.opts.ResendInterval)
		defer t.Stop()
		resend = t.C
	}
	for {
		if s.ctx.Err() != nil {
			return // hard stop: what is queued is counted as dropped by stop
		}
		if e, ok := s.pop(); ok {
			s.deliver(e)
			continue
		}
		select {
		case <-s.wake:
		case <-resend:
			if body := s.enc.refresh(); body != nil {
				// One try: the next tick is the retry.
				s.record(s.post(body))
			}
		case <-s.stopping:
			return
		case <-s.ctx.Done():
			return
		}
	}
}

// deliver sends one event, retrying with backoff until it is delivered,
// refused, out of tries, or the sender is stopping.
func (s *sender) deliver(e event.Event) {
	body, err := s.enc.encode(e)
	if err != nil {
		err = fmt.Errorf("cannot encode event %s: %w", e.Type, err)
		s.record(err)
		s.giveUp(e, 0, err)
		return
	}
	if body == nil {
		return // nothing for this receiver (an Alertmanager resolve of nothing firing)
	}
	backoff := s.opts.MinBackoff
	for attempt := 1; ; attempt++ {
		err := s.post(body)
		s.record(err)
		if err == nil {
			s.sent.Add(1)
			return
		}
		var perm *permanentError
		if errors.As(err, &perm) || attempt >= s.opts.MaxAttempts || s.isStopping() {
			s.giveUp(e, attempt, err)
			return
		}
		wait := jitter(backoff)
		var ra *retryAfterError
		if errors.As(err, &ra) && ra.after > wait {
			wait = ra.after
		}
		wait = min(wait, s.opts.MaxBackoff)
		backoff = min(2*backoff, s.opts.MaxBackoff)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-s.stopping:
			t.Stop()
			s.giveUp(e, attempt, err)
			return
		case <-s.ctx.Done():
			t.Stop()
			s.giveUp(e, attempt, err)
			return
		}
		s.retries.Add(1)
	}
}

// giveUp counts e as failed and logs it: one line per lost event, which is
// bounded by the backoff (a failing receiver holds each event for about
// half a minute of retries).
func (s *sender) giveUp(e event.Event, tries int, err error) {
	s.failed.Add(1)
	if s.opts.Log != nil && s.ctx.Err() == nil {
		s.opts.Log.Warn("webhook gave up on an event", "webhook", s.cfg.Name, "event", e.Type, "seq", e.Seq, "tries", tries, "err", err)
	}
}

// jitter spreads retries over [d/2, d] so that many sturdies do not retry
// a recovering receiver in lockstep.
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

func (s *sender) isStopping() bool {
	select {
	case <-s.stopping:
		return true
	default:
		return false
	}
}

// permanentError is a failure that retrying cannot fix (the receiver
// refused the request with a 4xx, or the event cannot be encoded).
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// retryAfterError carries a receiver's Retry-After.
type retryAfterError struct {
	err   error
	after time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

func (s *sender) post(body []byte) error {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return &permanentError{err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", s.opts.UserAgent)
	resp, err := s.opts.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// Read a little of the body: it says why a receiver refused (Slack
	// answers "invalid_payload"), and draining lets the connection be reused.
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	err = fmt.Errorf("%s answered %s: %.200s", s.cfg.Name, resp.Status, bytes.TrimSpace(msg))
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
		if secs, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && secs > 0 {
			return &retryAfterError{err, time.Duration(secs) * time.Second}
		}
		return err
	case resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode >= 500:
		return err
	}
	return &permanentError{err}
}

// record keeps the last error for the status page and logs the first
// failure of a streak and the recovery, never every try.
func (s *sender) record(err error) {
	if err == nil {
		if s.failing > 0 && s.opts.Log != nil {
			s.opts.Log.Info("webhook delivering again", "webhook", s.cfg.Name, "failed_tries", s.failing)
		}
		s.failing = 0
		s.mu.Lock()
		s.lastErr = ""
		s.mu.Unlock()
		return
	}
	if s.failing == 0 && s.opts.Log != nil {
		s.opts.Log.Warn("webhook delivery failing", "webhook", s.cfg.Name, "err", err)
	}
	s.failing++
	s.mu.Lock()
	s.lastErr, s.lastAt = err.Error(), s.opts.Now()
	s.mu.Unlock()
}

func (s *sender) stats() view.Webhook {
	s.mu.Lock()
	defer s.mu.Unlock()
	return view.Webhook{
		Name: s.cfg.Name, Format: s.cfg.Format, Queued: s.queue.len(),
		Sent: s.sent.Load(), Failed: s.failed.Load(), Dropped: s.dropped.Load(), Retries: s.retries.Load(),
		LastError: s.lastErr, LastErrorTime: s.lastAt,
	}
}

// stop closes the queue, lets the goroutine deliver what is queued until
// ctx ends, then aborts it. What is left is counted as dropped.
func (s *sender) stop(ctx context.Context) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.done
		return
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stopping)
	select {
	case <-s.done:
	case <-ctx.Done():
		s.cancel()
		<-s.done
	}
	s.cancel()
	s.mu.Lock()
	left := s.queue.len()
	s.queue = newRing(1)
	s.mu.Unlock()
	s.dropped.Add(uint64(left))
	if left > 0 && s.opts.Log != nil {
		s.opts.Log.Warn("webhook stopped with events undelivered", "webhook", s.cfg.Name, "dropped", left)
	}
}

// ring is a bounded FIFO that overwrites its oldest element when full.
type ring struct {
	buf        []event.Event
	head, size int
}

func newRing(n int) ring { return ring{buf: make([]event.Event, n)} }

func (r *ring) len() int { return r.size }

// push appends e and reports whether the oldest element was dropped.
func (r *ring) push(e event.Event) (dropped bool) {
	if r.size == len(r.buf) {
		r.buf[r.head] = e
		r.head = (r.head + 1) % len(r.buf)
		return true
	}
	r.buf[(r.head+r.size)%len(r.buf)] = e
	r.size++
	return false
}

func (r *ring) pop() (event.Event, bool) {
	if r.size == 0 {
		return event.Event{}, false
	}
	e := r.buf[r.head]
	r.buf[r.head] = event.Event{} // let the evidence be collected
	r.head = (r.head + 1) % len(r.buf)
	r.size--
	return e, true
}
