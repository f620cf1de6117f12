// Package alert delivers events (state transitions) to webhooks: plain JSON,
// Slack incoming webhooks, or an Alertmanager. Each webhook has a bounded
// queue and one sender goroutine, so a slow or dead receiver costs queued,
// then dropped (and counted) events, never time on the path that emitted
// them. Events are delivered in order, retried with capped exponential
// backoff, and each is sent at most once per webhook.
package alert

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// Defaults for Options.
const (
	DefaultQueueSize      = 1024
	DefaultMaxAttempts    = 6
	DefaultMinBackoff     = time.Second
	DefaultMaxBackoff     = time.Minute
	DefaultResendInterval = time.Minute
	DefaultDrainTimeout   = 5 * time.Second
	// retireTimeout bounds how long a webhook removed by Reconfigure may
	// spend delivering what it had queued.
	retireTimeout = 30 * time.Second
)

// Formats of a webhook's requests.
const (
	FormatJSON         = "json"         // the event as JSON
	FormatSlack        = "slack"        // a Slack incoming-webhook message
	FormatAlertmanager = "alertmanager" // an Alertmanager v2 alert list
)

// Webhook is one receiver of events.
type Webhook struct {
	// Name identifies the webhook in logs and stats.
	Name string
	// URL receives a POST per event (or per batch, for Alertmanager).
	URL string
	// Format is one of the Format constants.
	Format string
	// Events filters by event type; empty means all.
	Events []string
	// Timeout bounds one delivery attempt.
	Timeout time.Duration
}

// Options configure a Dispatcher. The zero value is usable.
type Options struct {
	// Client sends the requests. Default: a client of its own (proxy from
	// the environment, no overall timeout: each attempt is bounded by the
	// webhook's timeout).
	Client *http.Client
	// Log receives delivery problems, once per streak of failures.
	Log *slog.Logger
	// QueueSize bounds the events waiting per webhook. When full, the
	// oldest waiting event is dropped and counted: the newest transitions
	// say what the state is now. Default 1024.
	QueueSize int
	// MaxAttempts bounds the tries per event before it is given up and
	// counted as failed. Default 6.
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the wait between tries, which doubles
	// from MinBackoff and is capped at MaxBackoff (also for a receiver's
	// Retry-After). Defaults 1s and 1m.
	MinBackoff, MaxBackoff time.Duration
	// ResendInterval is how often firing alerts are sent to an
	// Alertmanager again. Alertmanager resolves an alert on its own when
	// it is not refreshed, so a sturdy that died leaves no alert firing
	// forever; each alert is valid for four intervals. Default 1m.
	ResendInterval time.Duration
	// Instance names this sturdy in messages and as the Alertmanager
	// "instance" label. Default: the host name.
	Instance string
	// StatusURL, when set, links messages to the status page.
	StatusURL string
	// UserAgent is sent with every request. Default "sturdy".
	UserAgent string
	// Now is the clock for alert timestamps. Default time.Now.
	Now func() time.Time
	// DrainTimeout bounds how long the end of Run spends delivering what
	// is queued (one try each). Default 5s.
	DrainTimeout time.Duration
}

func (o *Options) setDefaults() {
	if o.Client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 2
		o.Client = &http.Client{Transport: t}
	}
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(DefaultMaxBackoff, o.MinBackoff)
	}
	if o.ResendInterval <= 0 {
		o.ResendInterval = DefaultResendInterval
	}
	if o.Instance == "" {
		o.Instance, _ = os.Hostname()
	}
	if o.UserAgent == "" {
		o.UserAgent = "sturdy"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
}

// Dispatcher fans events out to webhooks. Subscribe its Notify to the event
// bus; Run delivers.
type Dispatcher struct {
	opts Options

	mu      sync.Mutex // guards senders, running, stopped
	senders []*sender
	running bool
	stopped bool
	wg      sync.WaitGroup // every sender goroutine, removed ones included
}

// New returns a dispatcher for hooks (validated: config.Load does it);
// Run starts one sender goroutine per webhook.
func New(hooks []Webhook, o Options) *Dispatcher {
	o.setDefaults()
	d := &Dispatcher{opts: o}
	for _, h := range hooks {
		d.senders = append(d.senders, newSender(h, &d.opts))
	}
	return d
}

// Notify queues e for every webhook whose filter accepts it. It never
// blocks on a receiver: it is meant to run on the emitter's goroutine, as
// an event.Bus subscriber.
func (d *Dispatcher) Notify(e event.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.senders {
		s.enqueue(e)
	}
}

// Stats reports each webhook's counts, in config order.
func (d *Dispatcher) Stats() []view.Webhook {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]view.Webhook, 0, len(d.senders))
	for _, s := range d.senders {
		out = append(out, s.stats())
	}
	return out
}

// Run delivers events until ctx ends, then delivers what is queued (one
// try each, no more retries) within the drain timeout, cancels what is in
// flight and waits for every sender goroutine. Events left undelivered are
// counted as dropped.
func (d *Dispatcher) Run(ctx context.Context) error {
	d.mu.Lock()
	d.running = true
	for _, s := range d.senders {
		d.launch(s)
	}
	d.mu.Unlock()
	<-ctx.Done()
	drain, cancel := context.WithTimeout(context.Background(), d.opts.DrainTimeout)
	defer cancel()
	d.mu.Lock()
	d.stopped = true
	senders := d.senders
	d.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.stop(drain)
		}()
	}
	wg.Wait()
	d.wg.Wait()
	return nil
}

// launch starts s's goroutine; d.mu is held.
func (d *Dispatcher) launch(s *sender) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		s.run()
	}()
}

// Reconfigure applies the webhooks of a reloaded config. A webhook whose
// settings did not change keeps its queue, counts and goroutine; the others
// are started, and removed ones deliver what they had queued (for at most
// 30s) before their goroutine ends.
func (d *Dispatcher) Reconfigure(hooks []Webhook) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return
	}
	old := make(map[string]*sender, len(d.senders))
	for _, s := range d.senders {
		old[s.cfg.Name] = s
	}
	next := make([]*sender, 0, len(hooks))
	for _, h := range hooks {
		if s := old[h.Name]; s != nil && sameWebhook(s.cfg, h) {
			next = append(next, s)
			delete(old, h.Name)
			continue
		}
		s := newSender(h, &d.opts)
		if d.running {
			d.launch(s)
		}
		next = append(next, s)
	}
	d.senders = next
	if !d.running {
		return // the removed ones never started
	}
	for _, s := range old {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), retireTimeout)
			defer cancel()
			s.stop(ctx)
		}()
	}
}

func sameWebhook(a, b Webhook) bool {
	if a.Name != b.Name || a.URL != b.URL || a.Format != b.Format || a.Timeout != b.Timeout || len(a.Events) != len(b.Events) {
		return false
	}
	for i := range a.Events {
		if a.Events[i] != b.Events[i] {
			return false
		}
	}
	return true
}
