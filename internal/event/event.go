// Package event carries state transitions (a host ejected, a pool empty, a
// client attributed, a reload refused) from where they happen to the log,
// the status page and webhooks. Events are rare by construction: one per
// transition, never one per request, so the bus may take a lock.
package event

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Types of events. Each names a transition; most come in pairs.
const (
	HostSuspect      = "host_suspect"
	HostEjected      = "host_ejected"
	HostRestored     = "host_restored"
	HostDown         = "host_down" // active checks failed
	HostUp           = "host_up"   // active checks passed again
	HostDrained      = "host_drained"
	HostMaintenance  = "host_maintenance"
	HostReady        = "host_ready" // operator returned the host to service
	PoolEmpty        = "pool_empty"
	PoolRestored     = "pool_restored"
	PanicEntered     = "panic_entered"
	PanicLeft        = "panic_left"
	ClientAttributed = "client_attributed"
	ClientReleased   = "client_released"
	RouteDegraded    = "route_degraded"
	RouteRecovered   = "route_recovered"
	StaleStarted     = "stale_started"
	StaleEnded       = "stale_ended"
	ReloadApplied    = "reload_applied"
	ReloadRefused    = "reload_refused"
	DNSFailed        = "dns_failed"
	DNSRecovered     = "dns_recovered"
	DNSChanged       = "dns_changed" // a name's addresses changed: its hosts follow
	DNSExpired       = "dns_expired" // the last good addresses outlived dns.hold
	ProbeDisagrees   = "probe_disagrees"
	PoolFailing      = "pool_failing"         // every host fails everything: the empty-pool chain answers
	PoolRecovered    = "pool_recovered"       // a request to a failing pool succeeded again
	CertObtained     = "certificate_obtained" // from the ACME CA, first time
	CertRenewed      = "certificate_renewed"
	CertFailed       = "certificate_failed" // an order or renewal failed; retried with backoff
	CertRevoked      = "certificate_revoked"
	CertExpiring     = "certificate_expiring" // a served certificate nears its end and was not replaced in time
	CertExpired      = "certificate_expired"  // a served certificate is past its end: clients refuse it
	SharedLimitsDown = "shared_limits_down"   // the shared rate-limit store is unreachable; local buckets
	SharedLimitsUp   = "shared_limits_up"
	// ResourceExhausted: sturdy itself ran out of file descriptors,
	// socket buffers, memory or local ports (never a backend's doing);
	// ResourceRecovered: it has had none of those failures for a while.
	ResourceExhausted = "resource_exhausted"
	ResourceRecovered = "resource_recovered"
)

// Severity levels.
const (
	Info     = "info"
	Warning  = "warning"
	Critical = "critical"
)

// Event is one state transition with its evidence.
type Event struct {
	Seq      uint64         `json:"seq"`
	Time     time.Time      `json:"time"`
	Type     string         `json:"type"`
	Severity string         `json:"severity"`
	Pool     string         `json:"pool,omitempty"`
	Host     string         `json:"host,omitempty"`
	Route    string         `json:"route,omitempty"`
	Client   string         `json:"client,omitempty"`
	Message  string         `json:"message"`
	Evidence map[string]any `json:"evidence,omitempty"`
}

// Emitter is what producers of events need.
type Emitter interface {
	Emit(Event)
}

// Bus logs each event once, keeps the most recent ones for the status page,
// and hands each to subscribers (webhooks) in order. Subscribers must not
// block: they get the event synchronously on the emitter's goroutine.
type Bus struct {
	log *slog.Logger
	now func() time.Time

	mu     sync.Mutex // guards everything below
	seq    uint64
	recent []Event // ring of the last cap(recent) events
	next   int
	subs   []func(Event)
}

// NewBus returns a bus that logs to log and remembers the last keep events.
// now may be nil (time.Now).
func NewBus(log *slog.Logger, keep int, now func() time.Time) *Bus {
	if now == nil {
		now = time.Now
	}
	if keep < 1 {
		keep = 1
	}
	return &Bus{log: log, now: now, recent: make([]Event, 0, keep)}
}

// Subscribe adds fn to the receivers of every later event.
func (b *Bus) Subscribe(fn func(Event)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.subs = append(b.subs, fn)
}

// SubscribeWithHistory is Subscribe, but fn first gets the events still
// remembered, oldest first, so that no event falls between looking and
// subscribing.
func (b *Bus) SubscribeWithHistory(fn func(Event)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.recent)
	for i := range n {
		idx := i
		if n == cap(b.recent) {
			idx = (b.next + i) % n
		}
		fn(b.recent[idx])
	}
	b.subs = append(b.subs, fn)
}

// Emit stamps e with a sequence number and time (if unset) and delivers it.
func (b *Bus) Emit(e Event) {
	b.mu.Lock()
	b.seq++
	e.Seq = b.seq
	if e.Time.IsZero() {
		e.Time = b.now()
	}
	if e.Severity == "" {
		e.Severity = Info
	}
	if len(b.recent) < cap(b.recent) {
		b.recent = append(b.recent, e)
	} else {
		b.recent[b.next] = e
		b.next = (b.next + 1) % cap(b.recent)
	}
	subs := b.subs
	// Deliver under the lock so that every subscriber sees events in order.
	for _, fn := range subs {
		fn(e)
	}
	b.mu.Unlock()
	b.logEvent(e)
}

func (b *Bus) logEvent(e Event) {
	if b.log == nil {
		return
	}
	attrs := make([]any, 0, 12+2*len(e.Evidence))
	attrs = append(attrs, "event", e.Type)
	for _, kv := range [][2]string{{"pool", e.Pool}, {"host", e.Host}, {"route", e.Route}, {"client", e.Client}} {
		if kv[1] != "" {
			attrs = append(attrs, kv[0], kv[1])
		}
	}
	for k, v := range e.Evidence {
		attrs = append(attrs, k, v)
	}
	level := slog.LevelInfo
	switch e.Severity {
	case Warning:
		level = slog.LevelWarn
	case Critical:
		level = slog.LevelError
	}
	b.log.Log(context.Background(), level, e.Message, attrs...)
}

// Recent returns up to n of the latest events, newest first.
func (b *Bus) Recent(n int) []Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := len(b.recent)
	if n > l || n <= 0 {
		n = l
	}
	out := make([]Event, 0, n)
	for i := 0; i < n; i++ {
		// newest is just before next (when full) or at the end (when not)
		idx := (b.next - 1 - i + 2*l) % l
		if len(b.recent) < cap(b.recent) {
			idx = l - 1 - i
		}
		out = append(out, b.recent[idx])
	}
	return out
}
