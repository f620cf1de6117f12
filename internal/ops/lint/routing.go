package lint

import (
	"fmt"
	"net/textproto"
	"slices"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// identityHeaders are set by sturdy from a verified client certificate
// (internal/edge/certs): a backend that trusts them trusts sturdy alone.
var identityHeaders = []string{"X-Client-Cert-Subject", "X-Client-Cert-Fingerprint", "X-Client-Cert-Verified"}

// routing warns about header rules that replace what sturdy sets itself:
// valid, sometimes meant (nginx configs set X-Real-IP by hand), and a way
// to lose the client's address or let clients spoof an identity.
func (l *linter) routing() {
	for i, r := range l.c.Routes {
		p := fmt.Sprintf("routes[%d]", i)
		rid := r.RequestID
		if rid == nil {
			rid = l.c.RequestID
		}
		if h := r.RequestHeaders; h != nil {
			for _, rule := range h.Rules() {
				k := textproto.CanonicalMIMEHeaderKey(rule.Name)
				q := p + ".request_headers." + rule.Key
				switch {
				case slices.Contains(config.ForwardingHeaders, k):
					l.warn(q, "this rule %s sturdy's own %s (set from the connection and trusted_proxies); backends that trust it may log or allow the wrong client. Remove the rule unless that is meant", does(rule.Verb), rule.Name)
				case slices.Contains(identityHeaders, k):
					l.warn(q, "this rule %s %s, which sturdy sets only from a verified client certificate; a backend that trusts it could be told anything", does(rule.Verb), rule.Name)
				case rid.On() && strings.EqualFold(rule.Name, rid.Header):
					l.warn(q, "this rule %s %s, which carries the request id; sturdy sets it after the rules, so the rule has no effect", does(rule.Verb), rule.Name)
				}
			}
		}
	}
}

// does says what a rule of verb does to a header.
func does(verb string) string {
	switch verb {
	case "add":
		return "adds to"
	case "remove":
		return "removes"
	}
	return "replaces"
}
