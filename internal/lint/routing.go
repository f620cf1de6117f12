package lint

import (
	"fmt"
	"net/textproto"
	"slices"
	"sort"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// identityHeaders are set by sturdy from a verified client certificate
// (internal/certs): a backend that trusts them trusts sturdy alone.
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
			for _, rule := range ruleNames(h) {
				k := textproto.CanonicalMIMEHeaderKey(rule.name)
				q := p + ".request_headers." + rule.key
				switch {
				case slices.Contains(config.ForwardingHeaders, k):
					l.warn(q, "this rule %s sturdy's own %s (set from the connection and trusted_proxies); backends that trust it may log or allow the wrong client. Remove the rule unless that is meant", rule.does(), rule.name)
				case slices.Contains(identityHeaders, k):
					l.warn(q, "this rule %s %s, which sturdy sets only from a verified client certificate; a backend that trusts it could be told anything", rule.does(), rule.name)
				case rid.On() && strings.EqualFold(rule.name, rid.Header):
					l.warn(q, "this rule %s %s, which carries the request id; sturdy sets it after the rules, so the rule has no effect", rule.does(), rule.name)
				}
			}
		}
	}
}

type namedRule struct{ key, name, verb string }

func (r namedRule) does() string {
	switch r.verb {
	case "add":
		return "adds to"
	case "remove":
		return "removes"
	}
	return "replaces"
}

func ruleNames(h *config.HeaderRules) []namedRule {
	var out []namedRule
	for _, kind := range []struct {
		key string
		m   map[string]string
	}{{"set", h.Set}, {"add", h.Add}} {
		names := make([]string, 0, len(kind.m))
		for n := range kind.m {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			out = append(out, namedRule{kind.key + "." + n, n, kind.key})
		}
	}
	for j, n := range h.Remove {
		out = append(out, namedRule{fmt.Sprintf("remove[%d]", j), n, "remove"})
	}
	return out
}
