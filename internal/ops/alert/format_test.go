package alert

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/event"
)

var at = time.Date(2026, 9, 26, 6, 44, 25, 0, time.UTC)

func TestSlackMessage(t *testing.T) {
	o := fast()
	o.StatusURL = "http://127.0.0.1:9901/status"
	o.setDefaults()
	body, err := newEncoder(FormatSlack, &o).encode(event.Event{
		Seq: 7, Time: at, Type: event.PoolEmpty, Severity: event.Critical, Pool: "default",
		Message:  "pool default has no available host; answering with the sorry page <503>",
		Evidence: map[string]any{"hosts": 3, "ejected": 2, "down": 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Text        string
		Attachments []struct {
			Color, Footer, Title, Title_link string
			TS                               int64
			Fields                           []struct {
				Title, Value string
				Short        bool
			}
		}
	}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if want := ":red_circle: *pool_empty* pool default has no available host; answering with the sorry page &lt;503&gt;"; m.Text != want {
		t.Errorf("text %q\nwant %q", m.Text, want)
	}
	a := m.Attachments[0]
	if a.Color != "#cf222e" || a.TS != at.Unix() || a.Footer != "sturdy test · event 7" || a.Title_link != o.StatusURL {
		t.Errorf("attachment %+v", a)
	}
	var fields []string
	for _, f := range a.Fields {
		fields = append(fields, f.Title+"="+f.Value)
	}
	if got := strings.Join(fields, " "); got != "pool=default down=1 ejected=2 hosts=3" {
		t.Errorf("fields %s", got)
	}
	// A recovery is green whatever its severity.
	body, _ = newEncoder(FormatSlack, &o).encode(event.Event{Type: event.PoolRestored, Severity: event.Warning, Pool: "default"})
	if !strings.Contains(string(body), `"color":"#1a7f37"`) || !strings.Contains(string(body), ":large_green_circle:") {
		t.Errorf("restored: %s", body)
	}
}

func decodeAlerts(t *testing.T, body []byte) []amAlert {
	t.Helper()
	var out []amAlert
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return out
}

func TestAlertmanagerFiresResolvesAndRefreshes(t *testing.T) {
	now := at
	o := fast()
	o.ResendInterval = time.Minute
	o.Now = func() time.Time { return now }
	o.setDefaults()
	enc := newEncoder(FormatAlertmanager, &o)
	host := event.Event{Pool: "web", Host: "10.0.0.2:80"}

	suspect := host
	suspect.Type, suspect.Time, suspect.Message, suspect.Seq = event.HostSuspect, at, "5 failures", 1
	body, _ := enc.encode(suspect)
	got := decodeAlerts(t, body)
	if len(got) != 1 || got[0].Labels["alertname"] != "SturdyHostSuspect" || got[0].Labels["host"] != "10.0.0.2:80" ||
		got[0].Labels["instance"] != "test" || got[0].Labels["severity"] != "info" || !got[0].EndsAt.Equal(at.Add(4*time.Minute)) {
		t.Fatalf("suspect: %+v", got)
	}

	// Ejection fires its alert and resolves the suspicion, same labels.
	now = at.Add(10 * time.Second)
	ejected := host
	ejected.Type, ejected.Time, ejected.Message, ejected.Evidence = event.HostEjected, now, "ejected", map[string]any{"refused": 5}
	got = decodeAlerts(t, mustEncode(t, enc, ejected))
	if len(got) != 2 || got[0].Labels["alertname"] != "SturdyHostSuspect" || !got[0].EndsAt.Equal(now) ||
		got[1].Labels["alertname"] != "SturdyHostEjected" || got[1].Annotations["description"] != "refused=5" {
		t.Fatalf("ejected: %+v", got)
	}
	if len(got[0].Labels) != len(got[1].Labels) || got[0].Labels["pool"] != got[1].Labels["pool"] {
		t.Errorf("label sets differ: %v %v", got[0].Labels, got[1].Labels)
	}

	// Refresh re-sends what fires, valid for four more intervals.
	now = at.Add(time.Minute)
	got = decodeAlerts(t, enc.refresh())
	if len(got) != 1 || got[0].Labels["alertname"] != "SturdyHostEjected" || !got[0].EndsAt.Equal(now.Add(4*time.Minute)) ||
		!got[0].StartsAt.Equal(at.Add(10*time.Second)) {
		t.Fatalf("refresh: %+v", got)
	}

	restored := host
	restored.Type, restored.Time = event.HostRestored, now
	got = decodeAlerts(t, mustEncode(t, enc, restored))
	if len(got) != 1 || got[0].Labels["alertname"] != "SturdyHostEjected" || !got[0].EndsAt.Equal(now) {
		t.Fatalf("restored: %+v", got)
	}
	if enc.refresh() != nil {
		t.Error("refresh after everything resolved")
	}
	// Closing events with nothing firing, and events with no alert, send nothing.
	for _, typ := range []string{event.PoolRestored, event.ReloadApplied} {
		if body := mustEncode(t, enc, event.Event{Type: typ, Pool: "web"}); body != nil {
			t.Errorf("%s: %s", typ, body)
		}
	}
}

func mustEncode(t *testing.T, enc encoder, e event.Event) []byte {
	t.Helper()
	b, err := enc.encode(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every event type is either an alert, closes one, or both; and every
// alert has a condition.
func TestAlertmanagerTablesCoverEveryEventType(t *testing.T) {
	for _, typ := range config.EventTypes() {
		tr, ok := transitions[typ]
		if !ok {
			t.Errorf("event %s has no transition", typ)
			continue
		}
		for _, name := range append([]string{tr.fire}, tr.resolve...) {
			if _, ok := conditions[name]; name != "" && !ok {
				t.Errorf("event %s names unknown alert %s", typ, name)
			}
		}
	}
}

// The Alertmanager sender re-posts firing alerts on its own.
func TestAlertmanagerResendsOverHTTP(t *testing.T) {
	r := newReceiver(t, nil)
	o := fast()
	o.ResendInterval = 5 * time.Millisecond
	d := started(t, New([]Webhook{hook("am", r.URL, "alertmanager")}, o))
	d.Notify(event.Event{Type: event.PoolEmpty, Pool: "default", Message: "empty"})
	r.wait(t, 3) // the alert, then at least two refreshes
	stop(t, d)
	for _, b := range r.snapshot()[:3] {
		if got := decodeAlerts(t, b); len(got) != 1 || got[0].Labels["alertname"] != "SturdyPoolEmpty" || got[0].Labels["severity"] != "critical" {
			t.Errorf("%s", b)
		}
	}
	if st := d.Stats()[0]; st.Sent != 1 {
		t.Errorf("refreshes counted as events: %+v", st)
	}
}

// docs/observability.md must describe every event type and every
// Alertmanager alert.
func TestDocsListEveryEventAndAlert(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range config.EventTypes() {
		if !strings.Contains(string(doc), "| `"+typ+"` |") {
			t.Errorf("no table row for event %s", typ)
		}
	}
	for name := range conditions {
		if !strings.Contains(string(doc), "| `"+name+"` |") {
			t.Errorf("no table row for alert %s", name)
		}
	}
}
