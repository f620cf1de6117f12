package server

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/testing/testpki"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// A 120 s ACME certificate (pebble's kind) whose renewal never comes is
// expiring 20 s before its end and expired at its end, each said once
// and on time (the watch looks on a schedule derived from the lifetime,
// not every 10 minutes); a file certificate replaced by a valid one is
// renewed.
func TestCertificateWatchIsOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		list := []view.Certificate{
			{Listener: "web", Names: "short.test", NotBefore: start, NotAfter: start.Add(120 * time.Second), Source: "acme"},
			{Listener: "web", Names: "file.test", NotBefore: start.Add(-89 * 24 * time.Hour), NotAfter: start.Add(24 * time.Hour), Source: "file"},
		}
		type seen struct {
			typ, host string
			at        time.Duration
		}
		var got []seen
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			runCertWatch(ctx, func() []view.Certificate {
				mu.Lock()
				defer mu.Unlock()
				return append([]view.Certificate(nil), list...)
			}, func(e event.Event) {
				got = append(got, seen{e.Type, e.Host, time.Since(start)})
			})
		}()
		time.Sleep(time.Hour)
		mu.Lock()
		list[1].NotBefore, list[1].NotAfter = time.Now(), time.Now().Add(90*24*time.Hour) // a reload with a new file
		mu.Unlock()
		time.Sleep(11 * time.Minute)
		cancel()
		<-done
		want := []seen{
			{event.CertExpiring, "file.test", 0},
			{event.CertExpiring, "short.test", 100 * time.Second},
			{event.CertExpired, "short.test", 120 * time.Second},
			{event.CertRenewed, "file.test", time.Hour + 10*time.Minute},
		}
		if len(got) != len(want) {
			t.Fatalf("events %v, want %v", got, want)
		}
		for i, w := range want {
			g := got[i]
			// On time: within the watch's least wait after the moment
			// (the replaced file is seen at the next look, 10 min at most).
			if g.typ != w.typ || g.host != w.host || g.at < w.at || g.at > w.at+certWatchMin+time.Millisecond {
				if !(w.typ == event.CertRenewed && g.typ == w.typ && g.at >= time.Hour && g.at <= time.Hour+certWatchMax) {
					t.Errorf("event %d: %+v, want %+v", i, g, w)
				}
			}
		}
	})
}

func TestCertificateStates(t *testing.T) {
	now := time.Now()
	day := 24 * time.Hour
	for _, tc := range []struct {
		c    view.Certificate
		want string
	}{
		{view.Certificate{Source: "acme", NotBefore: now.Add(-60 * day), NotAfter: now.Add(30 * day)}, view.CertOK},        // renewal starts now: no news
		{view.Certificate{Source: "acme", NotBefore: now.Add(-76 * day), NotAfter: now.Add(14 * day)}, view.CertExpiring},  // half the window passed
		{view.Certificate{Source: "file", NotBefore: now.Add(-300 * day), NotAfter: now.Add(29 * day)}, view.CertExpiring}, // sturdy check's 30 days
		{view.Certificate{Source: "file", NotBefore: now.Add(-300 * day), NotAfter: now.Add(31 * day)}, view.CertOK},
		{view.Certificate{Source: "file", NotBefore: now.Add(-4 * day), NotAfter: now.Add(time.Second)}, view.CertExpiring}, // a third of 4 days
		{view.Certificate{Source: "file", NotBefore: now.Add(-4 * day), NotAfter: now.Add(-time.Second)}, view.CertExpired},
	} {
		if got := certState(tc.c, now); got != tc.want {
			t.Errorf("%s certificate valid %s of %s: %s, want %s", tc.c.Source, tc.c.NotAfter.Sub(now), tc.c.NotAfter.Sub(tc.c.NotBefore), got, tc.want)
		}
	}
}

const expiredCertConfig = `
admin: { listen: "127.0.0.1:0", expired_certificate_not_ready: {{strict}} }
listeners: [ { name: secure, listen: "127.0.0.1:0", tls: { cert: "{{cert}}", key: "{{key}}" } } ]
routes: [ { name: site, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: "{{b1}}" } ] } ]
`

// An expired certificate shows in the status (state expired), fires
// certificate_expired once, and makes the instance not ready only when
// admin.expired_certificate_not_ready says so.
func TestExpiredCertificateIsShown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testpki.NewCA(t, "expired CA")
	now := time.Now()
	cert, key := ca.Write(t, dir, "old", testpki.Leaf{DNS: []string{"old.test"}, NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-time.Hour)})
	b1 := backend(t, "127.1.0.1", named("b1"))
	for _, strict := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "not ready"}[strict], func(t *testing.T) {
			s, _, _ := startSturdy(t, parseConfig(t, expiredCertConfig, map[string]string{
				"cert": cert, "key": key, "b1": addr(b1), "strict": map[bool]string{false: "false", true: "true"}[strict],
			}))
			st := s.Status()
			if len(st.Certificates) != 1 || st.Certificates[0].State != view.CertExpired || st.Certificates[0].Listener != "secure" {
				t.Fatalf("certificates %+v, want the listener's, expired", st.Certificates)
			}
			if !testutil.Eventually(3*time.Second, func() bool {
				for _, e := range s.Events().Recent(50) {
					if e.Type == event.CertExpired && e.Host == "old.test" {
						return true
					}
				}
				return false
			}) {
				t.Error("no certificate_expired event")
			}
			resp, body := get(t, http.DefaultClient, "http://"+s.AdminAddr()+"/readyz")
			if strict != (resp.StatusCode == 503) || strict != strings.Contains(body, "certificate of listener secure (old.test) expired") {
				t.Errorf("expired_certificate_not_ready=%v: /readyz %d %q", strict, resp.StatusCode, body)
			}
		})
	}
}
