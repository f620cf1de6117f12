package server

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/edge/acme"
	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// certEvent turns what the ACME manager reports into events. It runs on
// the manager's goroutines; Emit does not block.
func (s *Server) certEvent(e acme.Event) {
	ev := event.Event{Host: e.Name, Evidence: map[string]any{}}
	if !e.NotAfter.IsZero() {
		ev.Evidence["not_after"] = e.NotAfter
	}
	switch e.Kind {
	case acme.Obtained:
		ev.Type, ev.Message = event.CertObtained, "certificate obtained from the ACME CA"
	case acme.Renewed:
		ev.Type, ev.Message = event.CertRenewed, "certificate renewed"
	case acme.Revoked:
		ev.Type, ev.Severity, ev.Message = event.CertRevoked, event.Warning, "certificate revoked by the CA; it is being replaced"
	case acme.Failed:
		ev.Type, ev.Severity = event.CertFailed, event.Warning
		ev.Message = fmt.Sprintf("certificate order failed (%d in a row); retrying with backoff", e.Failures)
		if e.Renewal {
			ev.Message = fmt.Sprintf("certificate renewal failed (%d in a row, %s left); retrying with backoff", e.Failures, e.Remaining.Round(1e9))
			ev.Evidence["remaining_seconds"] = e.Remaining.Seconds()
		}
		if e.Urgent() {
			ev.Severity = event.Critical
			ev.Message += "; the certificate expires soon: act now"
		}
		ev.Evidence["failures"] = e.Failures
		if e.Err != nil {
			ev.Evidence["error"] = e.Err.Error()
		}
	default:
		return // ordering and loading are progress, not news
	}
	s.bus.Emit(ev)
}

// certificates lists every certificate served, with its validity and
// state: files per listener, ACME ones once per listener with tls.acme
// that serves their name.
func (s *Server) certificates() []view.Certificate {
	rt := s.cur.Load()
	now := time.Now()
	var out []view.Certificate
	add := func(c view.Certificate) {
		c.State = certState(c, now)
		out = append(out, c)
	}
	var held []acme.Certificate
	if s.acme != nil {
		held = s.acme.Certificates()
	}
	for _, l := range rt.Listeners {
		if l.TLS == nil {
			continue
		}
		for _, c := range l.TLS.Store.Certificates() {
			add(view.Certificate{Listener: l.Name, Names: strings.Join(c.Names, ","), NotBefore: c.NotBefore, NotAfter: c.NotAfter, Source: "file"})
		}
		if len(held) == 0 || !l.Listener.TLS.ACME {
			continue
		}
		names := rt.ACMENamesOn(l.Name)
		for _, c := range held {
			if slices.Contains(names, c.Name) {
				add(view.Certificate{Listener: l.Name, Names: c.Name, NotBefore: c.NotBefore, NotAfter: c.NotAfter, Source: "acme"})
			}
		}
	}
	return out
}
