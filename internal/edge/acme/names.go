package acme

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/edge/certs"
)

// NamesFor returns the names to give SetNames: the exact hosts of the
// routes served on listeners with tls.acme that no certificate file of
// that listener covers (ls from certs.Compile). Wildcards are left out:
// they need DNS-01, which sturdy does not do.
func NamesFor(c *config.Config, ls map[string]*certs.Listener) []string { return NamesOn(c, ls, "") }

// NamesOn is NamesFor for one listener (all with tls.acme when "").
func NamesOn(c *config.Config, ls map[string]*certs.Listener, listener string) []string {
	var names []string
	for _, l := range c.Listeners {
		if l.TLS == nil || !l.TLS.ACME || (listener != "" && l.Name != listener) {
			continue
		}
		cl := ls[l.Name]
		for _, r := range c.Routes {
			if len(r.Listeners) > 0 && !slices.Contains(r.Listeners, l.Name) {
				continue
			}
			for _, h := range r.Hosts {
				if strings.HasPrefix(h, "*.") || (cl != nil && cl.Store.Covers(h)) || slices.Contains(names, h) {
					continue
				}
				names = append(names, h)
			}
		}
	}
	slices.Sort(names)
	return names
}

// Warnings are what `sturdy check` says about the acme section: settings
// that load but cannot work as the operator expects.
func Warnings(c *config.Config) []config.Error {
	a := c.ACME
	if a == nil {
		return nil
	}
	var out []config.Error
	warn := func(path, format string, args ...any) {
		out = append(out, config.Error{File: c.File, Line: c.Line(path), Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	if a.Email == "" {
		warn("acme", "no email: the CA cannot warn you before a certificate expires if renewal keeps failing; set acme.email")
	}
	var plain, secure bool
	for _, l := range c.Listeners {
		plain = plain || l.TLS == nil
		secure = secure || (l.TLS != nil && l.TLS.ACME)
	}
	if !secure {
		warn("acme", "no listener has tls.acme: true, so no certificate is ordered")
	}
	http01, tlsalpn := slices.Contains(a.Challenges, config.ChallengeHTTP01), slices.Contains(a.Challenges, config.ChallengeTLSALPN01)
	if secure && !tlsalpn && (!http01 || !plain) {
		warn("acme.challenges", "no challenge can be answered: http-01 needs a plain listener (port 80 for a public CA), tls-alpn-01 the TLS listener (port 443)")
	}
	return out
}
