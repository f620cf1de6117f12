package server

import (
	"context"
	"fmt"
	"time"

	"github.com/sturdyproxy/sturdy/internal/edge/certs"
	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// Certificates expire whether or not anyone looks: the watch looks at
// every certificate served (files and ACME) on a schedule derived from
// the shortest lifetime held and from the next moment one of them
// changes state, and says so once per change (certificate_expiring,
// certificate_expired). The status page and /readyz read the same
// states (certState).

// certExpiring is how long before its end a certificate is expiring: for
// a file, what sturdy check warns about (30 days, or a third of a
// shorter lifetime); for an ACME certificate, half of its renewal window
// (renewal starts with a third of the lifetime left), so that a renewal
// that keeps failing is news well before the end and an on-time one never
// is.
func certExpiring(c view.Certificate) time.Duration {
	life := c.NotAfter.Sub(c.NotBefore)
	if c.Source == "acme" {
		return life / 6
	}
	return min(certs.ExpiryWarning, life/3)
}

func certState(c view.Certificate, now time.Time) string {
	switch left := c.NotAfter.Sub(now); {
	case left <= 0:
		return view.CertExpired
	case left <= certExpiring(c):
		return view.CertExpiring
	}
	return view.CertOK
}

// certWatchMax and certWatchMin bound the time between two looks.
const (
	certWatchMax = 10 * time.Minute
	certWatchMin = time.Second
)

// certWatchEvery is how long to wait before the next look at certs: a
// twentieth of the shortest lifetime, and no later than the next time a
// certificate becomes expiring or expired.
func certWatchEvery(certs []view.Certificate, now time.Time) time.Duration {
	d := certWatchMax
	for _, c := range certs {
		d = min(d, c.NotAfter.Sub(c.NotBefore)/20)
		for _, at := range []time.Time{c.NotAfter.Add(-certExpiring(c)), c.NotAfter} {
			if wait := at.Sub(now); wait > 0 {
				d = min(d, wait)
			}
		}
	}
	return max(d, certWatchMin)
}

// certWatch remembers each certificate's state; not safe for concurrent
// use (one goroutine runs it).
type certWatch struct {
	state map[string]string // by certKey
}

func certKey(c view.Certificate) string { return c.Source + "\x00" + c.Listener + "\x00" + c.Names }

// check returns the events of the certificates whose state changed since
// the last check. A file certificate back to ok (replaced by a reload) is
// certificate_renewed; an ACME one's renewal is told by the ACME manager.
func (w *certWatch) check(list []view.Certificate, now time.Time) []event.Event {
	var out []event.Event
	seen := make(map[string]bool, len(list))
	for _, c := range list {
		k := certKey(c)
		seen[k] = true
		st, was := certState(c, now), w.state[k]
		w.state[k] = st
		if st == was || (was == "" && st == view.CertOK) {
			continue
		}
		ev := event.Event{Host: c.Names, Time: now, Evidence: map[string]any{
			"listener": c.Listener, "source": c.Source, "not_after": c.NotAfter,
		}}
		switch st {
		case view.CertExpired:
			ev.Type, ev.Severity = event.CertExpired, event.Critical
			ev.Message = fmt.Sprintf("certificate of listener %s expired at %s: clients refuse it", c.Listener, c.NotAfter.UTC().Format(time.RFC3339))
		case view.CertExpiring:
			ev.Type, ev.Severity = event.CertExpiring, event.Warning
			ev.Message = fmt.Sprintf("certificate of listener %s expires in %s and has not been replaced", c.Listener, c.NotAfter.Sub(now).Round(time.Second))
			if c.Source == "acme" {
				ev.Message += ": its renewal is late"
			}
		default:
			if c.Source == "acme" {
				continue
			}
			ev.Type, ev.Message = event.CertRenewed, "certificate of listener "+c.Listener+" replaced by a valid one"
		}
		out = append(out, ev)
	}
	for k := range w.state {
		if !seen[k] {
			delete(w.state, k) // no longer served (a reload replaced it)
		}
	}
	return out
}

// watchCertificates runs the watch until ctx ends.
func (s *Server) watchCertificates(ctx context.Context) error {
	return runCertWatch(ctx, s.certificates, s.bus.Emit)
}

func runCertWatch(ctx context.Context, certificates func() []view.Certificate, emit func(event.Event)) error {
	w := &certWatch{state: map[string]string{}}
	for {
		now := time.Now()
		list := certificates()
		for _, e := range w.check(list, now) {
			emit(e)
		}
		t := time.NewTimer(certWatchEvery(list, now))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}
