package acme

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"slices"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Kind is what happened to a name's certificate.
type Kind string

// Kinds of events.
const (
	// Ordering: an order starts (this instance holds the storage lock and
	// storage had no usable certificate).
	Ordering Kind = "ordering"
	// Obtained: a first certificate was issued.
	Obtained Kind = "obtained"
	// Renewed: a certificate was replaced before its end.
	Renewed Kind = "renewed"
	// Failed: an order or renewal failed; it is tried again with backoff.
	Failed Kind = "failed"
	// Loaded: a certificate was put in service (from storage, including one
	// another instance ordered, or just after issuance).
	Loaded Kind = "loaded"
	// Revoked: the CA's OCSP answer says the certificate is revoked; it is
	// replaced.
	Revoked Kind = "revoked"
)

// Event is one issuance, renewal, failure or load.
type Event struct {
	Kind Kind
	// Name is the host name of the certificate.
	Name string
	// Renewal is true for renewals (Ordering, Renewed, Failed).
	Renewal bool
	// Remaining is the time left on the certificate being renewed
	// (renewals only).
	Remaining time.Duration
	// NotAfter is the end of the new certificate (Obtained, Renewed, Loaded).
	NotAfter time.Time
	// Failures counts the failures in a row for Name, this one included
	// (Failed); a success resets it.
	Failures int
	// Err is why it failed (Failed).
	Err error
}

// UrgentWithin is how close to its end a certificate must be for a
// failing renewal to be urgent.
const UrgentWithin = 7 * 24 * time.Hour

// Urgent reports a renewal that keeps failing close to the certificate's
// end: at least the third failure in a row with less than UrgentWithin
// left. Alert on it; single failures are retried and usually pass.
func (e Event) Urgent() bool {
	return e.Kind == Failed && e.Renewal && e.Failures >= 3 && e.Remaining < UrgentWithin
}

// onEvent turns certmagic's events into Events. It returns nil always:
// an error would abort the operation.
func (m *Manager) onEvent(ctx context.Context, name string, data map[string]any) error {
	ev := Event{Name: str(data["identifier"])}
	ev.Renewal, _ = data["renewal"].(bool)
	ev.Remaining, _ = data["remaining"].(time.Duration)
	switch name {
	case "cert_obtaining":
		ev.Kind = Ordering
	case "cert_obtained":
		ev.Kind = Obtained
		if ev.Renewal {
			ev.Kind = Renewed
		}
		m.mu.Lock()
		delete(m.failures, ev.Name)
		m.mu.Unlock()
		if r := m.live.Load(); r != nil {
			ev.NotAfter = notAfter(ctx, r.cfg.Storage, str(data["certificate_path"]))
		}
	case "cert_failed":
		ev.Kind = Failed
		ev.Err, _ = data["error"].(error)
		m.mu.Lock()
		m.failures[ev.Name]++
		ev.Failures = m.failures[ev.Name]
		m.mu.Unlock()
	case "cert_ocsp_revoked":
		ev.Kind = Revoked
		if sans, _ := data["subjects"].([]string); len(sans) > 0 {
			ev.Name = sans[0]
		}
	case "cached_managed_cert":
		sans, _ := data["sans"].([]string)
		m.setReady(sans, true)
		r := m.live.Load()
		for _, n := range sans {
			ev := Event{Kind: Loaded, Name: n}
			if r != nil {
				for _, c := range r.cache.AllMatchingCertificates(n) {
					if c.Leaf != nil && c.Leaf.NotAfter.After(ev.NotAfter) {
						ev.NotAfter = c.Leaf.NotAfter
					}
				}
			}
			m.emit(ev)
		}
		return nil
	default:
		return nil
	}
	m.emit(ev)
	return nil
}

func (m *Manager) emit(ev Event) {
	if m.opts.OnEvent != nil {
		m.opts.OnEvent(ev)
	}
}

func str(v any) string { s, _ := v.(string); return s }

func notAfter(ctx context.Context, s certmagic.Storage, key string) time.Time {
	if key == "" {
		return time.Time{}
	}
	b, err := s.Load(ctx, key)
	if err != nil {
		return time.Time{}
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return time.Time{}
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return time.Time{}
	}
	return c.NotAfter
}

// newZap gives certmagic a logger that writes into log at debug level:
// what matters reaches operators as Events; the library's step-by-step
// account is there for debugging.
func newZap(log *slog.Logger) *zap.Logger {
	if log == nil {
		return zap.NewNop()
	}
	return zap.New(&slogCore{h: log.Handler()})
}

type slogCore struct {
	h     slog.Handler
	attrs []slog.Attr
}

func (c *slogCore) Enabled(zapcore.Level) bool {
	return c.h.Enabled(context.Background(), slog.LevelDebug)
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{h: c.h, attrs: append(slices.Clip(c.attrs), attrsOf(fields)...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	r := slog.NewRecord(e.Time, slog.LevelDebug, "acme: "+e.Message, 0)
	r.AddAttrs(c.attrs...)
	r.AddAttrs(attrsOf(fields)...)
	return c.h.Handle(context.Background(), r)
}

func (c *slogCore) Sync() error { return nil }

func attrsOf(fields []zapcore.Field) []slog.Attr {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	attrs := make([]slog.Attr, len(keys))
	for i, k := range keys {
		attrs[i] = slog.Any(k, enc.Fields[k])
	}
	return attrs
}
