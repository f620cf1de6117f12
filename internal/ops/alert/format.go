package alert

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
)

// encoder turns events into request bodies for one receiver format. Its
// methods run on the sender's goroutine only, so it may keep state.
type encoder interface {
	// encode returns the body for e, or nil when this receiver has
	// nothing to be told about it.
	encode(e event.Event) ([]byte, error)
	// resends reports whether refresh must be called periodically.
	resends() bool
	// refresh returns a body that re-sends what is still firing, or nil.
	refresh() []byte
}

func newEncoder(format string, o *Options) encoder {
	switch format {
	case FormatSlack:
		return &slackEncoder{opts: o}
	case FormatAlertmanager:
		return newAlertmanagerEncoder(o)
	}
	return &jsonEncoder{opts: o}
}

// jsonEncoder posts the event as it is, plus the instance it came from.
type jsonEncoder struct{ opts *Options }

func (j *jsonEncoder) encode(e event.Event) ([]byte, error) {
	return json.Marshal(struct {
		event.Event
		Instance string `json:"instance,omitempty"`
	}{e, j.opts.Instance})
}

func (*jsonEncoder) resends() bool   { return false }
func (*jsonEncoder) refresh() []byte { return nil }

// recovery lists the event types that end a condition; they are shown in
// green whatever their severity.
var recovery = map[string]bool{
	event.HostRestored: true, event.HostUp: true, event.HostReady: true, event.PoolRestored: true,
	event.PanicLeft: true, event.ClientReleased: true, event.RouteRecovered: true, event.StaleEnded: true,
	event.ReloadApplied: true, event.DNSRecovered: true, event.CertObtained: true, event.CertRenewed: true, event.SharedLimitsUp: true,
}

// slackEncoder builds a Slack incoming-webhook message: one line of text
// that reads well in a notification, and an attachment with the subject and
// evidence as fields.
type slackEncoder struct{ opts *Options }

type slackField struct {
	Title string `json:"title"`
	Value string `json:"value"`
	Short bool   `json:"short"`
}

type slackAttachment struct {
	Color     string       `json:"color"`
	Fallback  string       `json:"fallback"`
	Fields    []slackField `json:"fields,omitempty"`
	Footer    string       `json:"footer"`
	TitleLink string       `json:"title_link,omitempty"`
	Title     string       `json:"title,omitempty"`
	TS        int64        `json:"ts"`
}

func (s *slackEncoder) encode(e event.Event) ([]byte, error) {
	color, icon := "#1a7f37", ":large_green_circle:"
	switch {
	case recovery[e.Type]:
	case e.Severity == event.Critical:
		color, icon = "#cf222e", ":red_circle:"
	case e.Severity == event.Warning:
		color, icon = "#bf8700", ":large_orange_circle:"
	default:
		color, icon = "#0969da", ":large_blue_circle:"
	}
	text := fmt.Sprintf("%s *%s* %s", icon, slackEscape(e.Type), slackEscape(e.Message))
	var fields []slackField
	for _, kv := range subject(e) {
		fields = append(fields, slackField{kv[0], slackEscape(kv[1]), true})
	}
	for _, k := range slices.Sorted(maps.Keys(e.Evidence)) {
		fields = append(fields, slackField{k, slackEscape(fmt.Sprint(e.Evidence[k])), len(fmt.Sprint(e.Evidence[k])) < 40})
	}
	a := slackAttachment{
		Color: color, Fallback: e.Type + ": " + e.Message, Fields: fields,
		Footer: fmt.Sprintf("sturdy %s · event %d", s.opts.Instance, e.Seq), TS: e.Time.Unix(),
	}
	if s.opts.StatusURL != "" {
		a.Title, a.TitleLink = "status page", s.opts.StatusURL
	}
	return json.Marshal(map[string]any{"text": text, "attachments": []slackAttachment{a}})
}

func (*slackEncoder) resends() bool   { return false }
func (*slackEncoder) refresh() []byte { return nil }

// slackEscape escapes the three characters Slack's mrkdwn treats as markup
// (client keys and messages may hold them).
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// subject returns the event's non-empty pool, host, route and client.
func subject(e event.Event) [][2]string {
	var out [][2]string
	for _, kv := range [][2]string{{"pool", e.Pool}, {"host", e.Host}, {"route", e.Route}, {"client", e.Client}} {
		if kv[1] != "" {
			out = append(out, kv)
		}
	}
	return out
}

// evidenceText renders evidence as "k=v, k=v" in key order.
func evidenceText(ev map[string]any) string {
	parts := make([]string, 0, len(ev))
	for _, k := range slices.Sorted(maps.Keys(ev)) {
		parts = append(parts, fmt.Sprintf("%s=%v", k, ev[k]))
	}
	return strings.Join(parts, ", ")
}

// timeOr returns t, or now when t is unset.
func timeOr(t time.Time, now func() time.Time) time.Time {
	if t.IsZero() {
		return now()
	}
	return t
}
