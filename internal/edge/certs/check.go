package certs

import (
	"fmt"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// ExpiryWarning is how long before its end a certificate is reported as
// expiring soon: 30 days, or a third of its lifetime when that is shorter
// (so that a 6-day certificate is not always "expiring").
const ExpiryWarning = 30 * 24 * time.Hour

// Warnings are what `sturdy check` says about the certificates of the
// compiled listeners ls (from Compile) at time now: expired and soon
// expiring certificates, explicit names the certificate does not hold,
// route hosts that no certificate of a TLS listener covers, certificates
// whose names no route serves, and routes requiring a verified client
// certificate where none is verified. They never stop a load.
func Warnings(c *config.Config, ls map[string]*Listener, now time.Time) []config.Error {
	var out []config.Error
	warn := func(path, format string, args ...any) {
		out = append(out, config.Error{File: c.File, Line: c.Line(path), Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	for i, l := range c.Listeners {
		cl := ls[l.Name]
		if cl == nil {
			continue
		}
		for _, ct := range cl.Store.certs {
			expiry(warn, ct, now)
			for k, n := range ct.Names {
				probe := n
				if rest, ok := cutWild(n); ok {
					probe = "sturdy-check." + rest
				}
				if ct.leaf.VerifyHostname(probe) != nil {
					warn(fmt.Sprintf("%s.names[%d]", ct.Path, k), "%s is not among the names of %s (%v); clients asking for it will reject the certificate", n, ct.File, ct.leaf.DNSNames)
				}
			}
		}
		routeHosts(warn, c, i, cl)
	}
	routeRequirements(warn, c)
	return out
}

func expiry(warn func(string, string, ...any), ct *Cert, now time.Time) {
	left := ct.NotAfter.Sub(now)
	ahead := min(ExpiryWarning, ct.NotAfter.Sub(ct.NotBefore)/3)
	day := ct.NotAfter.UTC().Format(time.DateOnly)
	switch {
	case left <= 0:
		warn(ct.Path, "%s expired on %s; clients refuse it: replace it", ct.File, day)
	case left < ahead:
		warn(ct.Path, "%s expires in %s (on %s); check warns %s ahead: renew it", ct.File, roundDays(left), day, roundDays(ahead))
	}
}

func roundDays(d time.Duration) string {
	if d >= 48*time.Hour {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.Round(time.Minute).String()
}

// routeHosts warns about the routes of listeners[i] whose hosts no
// certificate covers, and the certificates that serve no route's host.
func routeHosts(warn func(string, string, ...any), c *config.Config, i int, cl *Listener) {
	l := c.Listeners[i]
	anyHost := false
	type host struct{ path, name string }
	var hosts []host
	for ri, r := range c.Routes {
		if !servedOn(r, l.Name) {
			continue
		}
		if len(r.Hosts) == 0 || r.Default {
			anyHost = true
		}
		for hi, h := range r.Hosts {
			hosts = append(hosts, host{fmt.Sprintf("routes[%d].hosts[%d]", ri, hi), h})
		}
	}
	acme := cl.Store.source != nil
	for _, h := range hosts {
		if coveredBy(cl.Store.certs, h.name) || (acme && !isWild(h.name)) {
			continue
		}
		switch def := cl.Store.def; {
		case acme:
			warn(h.path, "no certificate of listener %s covers %s, and ACME cannot obtain wildcards (it needs DNS-01); add a certificate file for it", l.Name, h.name)
		case cl.Store.refuse || def == nil:
			warn(h.path, "no certificate of listener %s covers %s; its handshakes are refused (unknown_sni: refuse)", l.Name, h.name)
		default:
			warn(h.path, "no certificate of listener %s covers %s; clients get the default certificate %s and a name mismatch", l.Name, h.name, def.File)
		}
	}
	if anyHost {
		return // a route for any host, or the default route, serves every name
	}
	for _, ct := range cl.Store.certs {
		used := len(ct.Names) == 0
		for _, n := range ct.Names {
			for _, h := range hosts {
				used = used || covers(n, h.name) || covers(h.name, n) || routeWildMatches(h.name, n)
			}
		}
		if !used {
			warn(ct.Path, "no route on listener %s serves any of %v (the names of %s); check the routes' hosts or remove the certificate", l.Name, ct.Names, ct.File)
		}
	}
}

func servedOn(r config.Route, listener string) bool {
	if len(r.Listeners) == 0 {
		return true
	}
	for _, n := range r.Listeners {
		if n == listener {
			return true
		}
	}
	return false
}

// coveredBy reports whether a certificate serves every name host stands
// for: an exact name, or all of a route's *.wildcard (only a certificate
// wildcard for the same domain does).
func coveredBy(certs []*Cert, host string) bool {
	for _, ct := range certs {
		for _, n := range ct.Names {
			if covers(n, host) {
				return true
			}
		}
	}
	return false
}

// routeWildMatches reports whether a route's host pattern (a wildcard
// matches one label or more) matches the certificate name n.
func routeWildMatches(route, n string) bool {
	rest, ok := cutWild(route)
	if !ok {
		return false
	}
	if nr, ok := cutWild(n); ok {
		n = nr
		return n == rest || hasSuffixDot(n, rest)
	}
	return hasSuffixDot(n, rest)
}

func hasSuffixDot(n, domain string) bool {
	return len(n) > len(domain) && n[len(n)-len(domain)-1] == '.' && n[len(n)-len(domain):] == domain
}

func cutWild(n string) (string, bool) {
	if len(n) > 2 && n[:2] == "*." {
		return n[2:], true
	}
	return n, false
}

func isWild(n string) bool { _, ok := cutWild(n); return ok }

// routeRequirements warns about routes that require a verified client
// certificate on a listener that never verifies one: every request there
// is refused with 403.
func routeRequirements(warn func(string, string, ...any), c *config.Config) {
	for ri, r := range c.Routes {
		if r.ClientCert != config.ClientCertRequired {
			continue
		}
		for _, l := range c.Listeners {
			if !servedOn(r, l.Name) || l.RedirectHTTPS != nil || (l.TLS != nil && l.TLS.ClientAuth.VerifiesClients()) {
				continue
			}
			warn(fmt.Sprintf("routes[%d].client_cert", ri), "listener %s does not verify client certificates (tls.client_auth.mode verify_if_given or require_and_verify), so route %s answers 403 to every request there; set listeners on the route or client_auth on the listener", l.Name, r.Name)
		}
	}
}
