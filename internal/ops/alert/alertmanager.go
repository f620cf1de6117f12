package alert

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
)

// Alertmanager (POST /api/v2/alerts) wants conditions, not events: an alert
// fires with a label set and is resolved by sending the same label set with
// endsAt in the past. The tables below pair the event types into
// conditions; the encoder remembers what is firing, resolves it on the
// closing event, and re-sends firing alerts before Alertmanager would time
// them out.

// condition is one kind of alert.
type condition struct {
	severity string
	keys     []string // the event fields that identify one alert of this kind
}

var (
	hostKeys  = []string{"pool", "host"}
	poolKeys  = []string{"pool"}
	routeKeys = []string{"route"}
)

// conditions by alertname.
var conditions = map[string]condition{
	"SturdyHostSuspect":         {"info", hostKeys},
	"SturdyHostEjected":         {"warning", hostKeys},
	"SturdyHostDown":            {"warning", hostKeys},
	"SturdyHostGrayFailure":     {"warning", hostKeys},
	"SturdyHostDrained":         {"info", hostKeys},
	"SturdyHostMaintenance":     {"info", hostKeys},
	"SturdyPoolEmpty":           {"critical", poolKeys},
	"SturdyPoolPanicRouting":    {"critical", poolKeys},
	"SturdyPoolFailing":         {"critical", poolKeys},
	"SturdyClientAttributed":    {"info", []string{"client"}},
	"SturdyRouteDegraded":       {"warning", routeKeys},
	"SturdyStaleMasking":        {"warning", routeKeys},
	"SturdyConfigReloadRefused": {"warning", nil},
	"SturdyDNSFailed":           {"warning", hostKeys},
	"SturdyDNSExpired":          {"critical", hostKeys},
	"SturdyCertificateFailing":  {"warning", []string{"host"}},
	"SturdyCertificateExpiring": {"warning", []string{"host"}},
	"SturdyCertificateExpired":  {"critical", []string{"host"}},
	"SturdySharedLimitsDown":    {"warning", []string{"host"}},
	"SturdyResourcesExhausted":  {"critical", nil},
}

// transition says which alert an event type fires and which it resolves.
type transition struct {
	fire    string
	resolve []string
}

var transitions = map[string]transition{
	event.HostSuspect:       {fire: "SturdyHostSuspect"},
	event.HostEjected:       {fire: "SturdyHostEjected", resolve: []string{"SturdyHostSuspect"}},
	event.HostDown:          {fire: "SturdyHostDown", resolve: []string{"SturdyHostSuspect", "SturdyHostEjected"}},
	event.HostRestored:      {resolve: []string{"SturdyHostSuspect", "SturdyHostEjected", "SturdyHostDown", "SturdyHostGrayFailure"}},
	event.HostUp:            {resolve: []string{"SturdyHostDown", "SturdyHostSuspect", "SturdyHostEjected", "SturdyHostGrayFailure"}},
	event.ProbeDisagrees:    {fire: "SturdyHostGrayFailure", resolve: []string{"SturdyHostSuspect"}},
	event.HostDrained:       {fire: "SturdyHostDrained", resolve: []string{"SturdyHostMaintenance"}},
	event.HostMaintenance:   {fire: "SturdyHostMaintenance", resolve: []string{"SturdyHostDrained"}},
	event.HostReady:         {resolve: []string{"SturdyHostDrained", "SturdyHostMaintenance"}},
	event.PoolEmpty:         {fire: "SturdyPoolEmpty"},
	event.PoolRestored:      {resolve: []string{"SturdyPoolEmpty"}},
	event.PanicEntered:      {fire: "SturdyPoolPanicRouting"},
	event.PanicLeft:         {resolve: []string{"SturdyPoolPanicRouting"}},
	event.PoolFailing:       {fire: "SturdyPoolFailing"},
	event.PoolRecovered:     {resolve: []string{"SturdyPoolFailing"}},
	event.ClientAttributed:  {fire: "SturdyClientAttributed"},
	event.ClientReleased:    {resolve: []string{"SturdyClientAttributed"}},
	event.RouteDegraded:     {fire: "SturdyRouteDegraded"},
	event.RouteRecovered:    {resolve: []string{"SturdyRouteDegraded"}},
	event.StaleStarted:      {fire: "SturdyStaleMasking"},
	event.StaleEnded:        {resolve: []string{"SturdyStaleMasking"}},
	event.ReloadRefused:     {fire: "SturdyConfigReloadRefused"},
	event.ReloadApplied:     {resolve: []string{"SturdyConfigReloadRefused"}},
	event.DNSFailed:         {fire: "SturdyDNSFailed"},
	event.DNSRecovered:      {resolve: []string{"SturdyDNSFailed", "SturdyDNSExpired"}},
	event.DNSExpired:        {fire: "SturdyDNSExpired"},
	event.DNSChanged:        {}, // news, not a condition: the hosts follow
	event.CertFailed:        {fire: "SturdyCertificateFailing"},
	event.CertRevoked:       {fire: "SturdyCertificateFailing"},
	event.CertObtained:      {resolve: []string{"SturdyCertificateFailing", "SturdyCertificateExpiring", "SturdyCertificateExpired"}},
	event.CertRenewed:       {resolve: []string{"SturdyCertificateFailing", "SturdyCertificateExpiring", "SturdyCertificateExpired"}},
	event.CertExpiring:      {fire: "SturdyCertificateExpiring"},
	event.CertExpired:       {fire: "SturdyCertificateExpired", resolve: []string{"SturdyCertificateExpiring"}},
	event.SharedLimitsDown:  {fire: "SturdySharedLimitsDown"},
	event.SharedLimitsUp:    {resolve: []string{"SturdySharedLimitsDown"}},
	event.ResourceExhausted: {fire: "SturdyResourcesExhausted"},
	event.ResourceRecovered: {resolve: []string{"SturdyResourcesExhausted"}},
}

// amAlert is Alertmanager's postableAlert.
type amAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

type alertmanagerEncoder struct {
	opts   *Options
	firing map[string]*amAlert // by fingerprint
}

func newAlertmanagerEncoder(o *Options) *alertmanagerEncoder {
	return &alertmanagerEncoder{opts: o, firing: map[string]*amAlert{}}
}

func (*alertmanagerEncoder) resends() bool { return true }

// validity is how long a sent firing alert stays firing in Alertmanager
// without being sent again.
func (a *alertmanagerEncoder) validity() time.Duration { return 4 * a.opts.ResendInterval }

func (a *alertmanagerEncoder) encode(e event.Event) ([]byte, error) {
	tr, ok := transitions[e.Type]
	if !ok {
		return nil, nil
	}
	at := timeOr(e.Time, a.opts.Now)
	var out []*amAlert
	for _, name := range tr.resolve {
		fp := fingerprint(name, e)
		if al := a.firing[fp]; al != nil {
			al.EndsAt = at
			al.Annotations["resolved_by"] = e.Type + ": " + e.Message
			out = append(out, al)
			delete(a.firing, fp)
		}
	}
	if tr.fire != "" {
		fp := fingerprint(tr.fire, e)
		al := &amAlert{
			Labels:       labels(tr.fire, e, a.opts.Instance),
			Annotations:  map[string]string{"summary": e.Message, "event": e.Type, "seq": strconv.FormatUint(e.Seq, 10)},
			StartsAt:     at,
			EndsAt:       a.opts.Now().Add(a.validity()),
			GeneratorURL: a.opts.StatusURL,
		}
		if len(e.Evidence) > 0 {
			al.Annotations["description"] = evidenceText(e.Evidence)
		}
		if prev := a.firing[fp]; prev != nil {
			al.StartsAt = prev.StartsAt // the same condition again: it has not ended
		}
		a.firing[fp] = al
		out = append(out, al)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return json.Marshal(out)
}

func (a *alertmanagerEncoder) refresh() []byte {
	if len(a.firing) == 0 {
		return nil
	}
	ends := a.opts.Now().Add(a.validity())
	out := make([]*amAlert, 0, len(a.firing))
	for _, fp := range slices.Sorted(maps.Keys(a.firing)) {
		al := a.firing[fp]
		al.EndsAt = ends
		out = append(out, al)
	}
	body, _ := json.Marshal(out) // plain strings and times: cannot fail
	return body
}

func labels(name string, e event.Event, instance string) map[string]string {
	c := conditions[name]
	l := map[string]string{"alertname": name, "severity": c.severity, "service": "sturdy"}
	if instance != "" {
		l["instance"] = instance
	}
	for _, k := range c.keys {
		if v := field(e, k); v != "" {
			l[k] = v
		}
	}
	return l
}

func fingerprint(name string, e event.Event) string {
	var b strings.Builder
	b.WriteString(name)
	for _, k := range conditions[name].keys {
		b.WriteByte(0)
		b.WriteString(field(e, k))
	}
	return b.String()
}

func field(e event.Event, k string) string {
	switch k {
	case "pool":
		return e.Pool
	case "host":
		return e.Host
	case "route":
		return e.Route
	case "client":
		return e.Client
	}
	return ""
}
