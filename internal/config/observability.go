package config

// Defaults and validation of the admin, webhook and log settings: the
// operator-facing half of the config (design.md section 8).

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
)

// Observability defaults. docs/config.md and docs/observability.md list the
// same values.
const (
	DefaultWebhookTimeout    = 5 * time.Second
	DefaultWebhookFormat     = WebhookJSON
	DefaultAggregateInterval = 10 * time.Second
)

// Webhook formats.
const (
	WebhookJSON         = "json"
	WebhookSlack        = "slack"
	WebhookAlertmanager = "alertmanager"
)

// EventTypes returns every event type a webhook may filter on, in the
// order docs/observability.md documents them. A test keeps it in step with
// the constants of package event.
func EventTypes() []string {
	return []string{
		event.HostSuspect, event.HostEjected, event.HostRestored,
		event.HostDown, event.HostUp, event.ProbeDisagrees,
		event.HostDrained, event.HostMaintenance, event.HostReady,
		event.PoolEmpty, event.PoolRestored,
		event.PanicEntered, event.PanicLeft,
		event.PoolFailing, event.PoolRecovered,
		event.ClientAttributed, event.ClientReleased,
		event.RouteDegraded, event.RouteRecovered,
		event.StaleStarted, event.StaleEnded,
		event.ReloadApplied, event.ReloadRefused,
		event.CertObtained, event.CertRenewed, event.CertFailed, event.CertRevoked,
		event.CertExpiring, event.CertExpired,
		event.SharedLimitsDown, event.SharedLimitsUp,
		event.DNSFailed, event.DNSRecovered, event.DNSChanged, event.DNSExpired,
		event.ResourceExhausted, event.ResourceRecovered,
	}
}

func (c *Config) setObservabilityDefaults() {
	for i := range c.Webhooks {
		w := &c.Webhooks[i]
		if w.Format == "" {
			w.Format = DefaultWebhookFormat
		}
		if w.Timeout == 0 {
			w.Timeout = Duration(DefaultWebhookTimeout)
		}
	}
	if c.Log.AggregateInterval == 0 {
		c.Log.AggregateInterval = Duration(DefaultAggregateInterval)
	}
}

func (v *validator) observability() {
	c := v.c
	v.adminToken()
	routes := make(map[string]bool, len(c.Routes))
	for _, r := range c.Routes {
		routes[r.Name] = true
	}
	seen := map[string]int{}
	for i, name := range c.Admin.ReadyRoutes {
		p := fmt.Sprintf("admin.ready_routes[%d]", i)
		if !routes[name] {
			v.errorf(p, "no route named %q; %slist names from routes, or leave ready_routes out to count every route", name, didYouMean(name, v.routeNames()))
		}
		if j, dup := seen[name]; dup {
			v.errorf(p, "route %q is already listed as ready_routes[%d]", name, j)
		}
		seen[name] = i
	}
	if c.Log.AggregateInterval.D() < time.Second {
		v.errorf("log.aggregate_interval", "%s is too short; expected at least 1s (the point is fewer lines)", c.Log.AggregateInterval)
	}
	names := map[string]int{}
	for i, w := range c.Webhooks {
		v.webhook(fmt.Sprintf("webhooks[%d]", i), w, names, i)
	}
}

// adminToken refuses an admin listener reachable from other machines
// without a token: the runtime API can drain every host.
func (v *validator) adminToken() {
	a := v.c.Admin
	if a.Listen == "off" {
		return
	}
	host, _, err := net.SplitHostPort(a.Listen)
	if err != nil || IsLoopback(host) {
		return // checkAddr reports a bad address
	}
	switch {
	case a.Token == "":
		v.errorf("admin.listen", "%s is reachable from other machines; set admin.token (sent as Authorization: Bearer TOKEN to the runtime API) or listen on 127.0.0.1", a.Listen)
	case len(a.Token) < minPublicToken:
		v.errorf("admin.token", "token is %d characters, too easy to guess on an admin listener reachable from other machines; use at least %d random characters (e.g. openssl rand -hex 16)", len(a.Token), minPublicToken)
	}
}

// minPublicToken is the shortest token accepted for an admin listener on a
// non-loopback address.
const minPublicToken = 16

// IsLoopback reports whether host (an IP or a name, without port) can only
// be reached from this machine. An empty host means every interface.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && ip.IsLoopback()
}

func (v *validator) webhook(p string, w Webhook, names map[string]int, i int) {
	v.uniqueName(p, w.Name, "webhook", names, i)
	if w.URL == "" {
		v.errorf(p+".url", "missing; expected an http or https URL to POST events to")
	} else if u, err := url.Parse(w.URL); err != nil {
		v.errorf(p+".url", "invalid URL: %v", unwrapURLError(err))
	} else if u.Scheme != "http" && u.Scheme != "https" {
		v.errorf(p+".url", "scheme %q not supported; expected http or https", u.Scheme)
	} else if u.Host == "" {
		v.errorf(p+".url", "URL %q has no host", w.URL)
	}
	switch w.Format {
	case WebhookJSON, WebhookSlack, WebhookAlertmanager:
	default:
		v.errorf(p+".format", "unknown format %q; expected json, slack or alertmanager", w.Format)
	}
	types := EventTypes()
	for j, t := range w.Events {
		if !slices.Contains(types, t) {
			v.errorf(fmt.Sprintf("%s.events[%d]", p, j), "unknown event type %q; %sexpected one of: %s", t, didYouMean(t, types), strings.Join(types, ", "))
		}
	}
	if w.Timeout.D() > time.Minute {
		v.errorf(p+".timeout", "%s is longer than 1m; a slow receiver would hold its queue that long per event", w.Timeout)
	}
}

// unwrapURLError drops url.Error's "parse URL:" prefix, which repeats the
// URL the message already names.
func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}
