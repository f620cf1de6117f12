package kube

import (
	"fmt"
	"net/textproto"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// filters is what an HTTPRoute rule's filters ask of its routes, as
// sturdy route keys (docs/routing.md, "From Gateway API").
type filters struct {
	request, response *config.HeaderRules
	hostHeader        string
	redirect          *config.Redirect
	rewrite           *config.Rewrite
	mirror            *gwv1.HTTPRequestMirrorFilter
	// fail500 is set by a filter sturdy cannot resolve: Gateway API says
	// the requests it would have processed get an error, never that the
	// filter is skipped.
	fail500 string
	seen    map[gwv1.HTTPRouteFilterType]bool
}

// add lowers one filter; why says what sturdy cannot serve of it, and
// the rule is then left out.
func (f *filters) add(fl gwv1.HTTPRouteFilter) (why string) {
	if f.seen == nil {
		f.seen = map[gwv1.HTTPRouteFilterType]bool{}
	}
	if f.seen[fl.Type] && fl.Type != gwv1.HTTPRouteFilterExtensionRef {
		// The API refuses a second filter of a kind on one rule, except
		// mirrors; a backendRef's filter can meet the rule's.
		if fl.Type == gwv1.HTTPRouteFilterRequestMirror {
			return "more than one RequestMirror: sturdy copies a route's requests to one pool"
		}
		return fmt.Sprintf("%s on both the rule and its backendRef: sturdy has one per route", fl.Type)
	}
	f.seen[fl.Type] = true
	switch fl.Type {
	case gwv1.HTTPRouteFilterRequestHeaderModifier:
		if fl.RequestHeaderModifier == nil {
			return "RequestHeaderModifier without its settings"
		}
		rules, host, why := headerRules(fl.RequestHeaderModifier, true)
		f.request = rules
		if host != "" {
			if f.hostHeader != "" {
				return "Host set by both RequestHeaderModifier and URLRewrite"
			}
			f.hostHeader = host
		}
		return why
	case gwv1.HTTPRouteFilterResponseHeaderModifier:
		if fl.ResponseHeaderModifier == nil {
			return "ResponseHeaderModifier without its settings"
		}
		rules, _, why := headerRules(fl.ResponseHeaderModifier, false)
		f.response = rules
		return why
	case gwv1.HTTPRouteFilterRequestRedirect:
		rr := fl.RequestRedirect
		if rr == nil {
			return "RequestRedirect without its settings"
		}
		rd := &config.Redirect{Status: 302}
		if rr.Scheme != nil {
			rd.Scheme = *rr.Scheme
		}
		if rr.Hostname != nil {
			rd.Host = string(*rr.Hostname)
		}
		if rr.Port != nil {
			rd.Port = int(*rr.Port)
		}
		if rr.StatusCode != nil {
			rd.Status = *rr.StatusCode
		}
		if p := rr.Path; p != nil {
			full, prefix, why := pathModifier(p)
			if why != "" {
				return why
			}
			rd.Path, rd.Prefix = full, prefix
		}
		f.redirect = rd
	case gwv1.HTTPRouteFilterURLRewrite:
		rw := fl.URLRewrite
		if rw == nil {
			return "URLRewrite without its settings"
		}
		if rw.Hostname != nil {
			if f.hostHeader != "" {
				return "Host set by both RequestHeaderModifier and URLRewrite"
			}
			f.hostHeader = literal(string(*rw.Hostname))
		}
		if p := rw.Path; p != nil {
			full, prefix, why := pathModifier(p)
			if why != "" {
				return why
			}
			f.rewrite = &config.Rewrite{Path: full, Prefix: prefix}
		}
	case gwv1.HTTPRouteFilterRequestMirror:
		if fl.RequestMirror == nil {
			return "RequestMirror without its settings"
		}
		f.mirror = fl.RequestMirror
	case gwv1.HTTPRouteFilterExtensionRef:
		name := "?"
		if fl.ExtensionRef != nil {
			name = string(fl.ExtensionRef.Kind) + " " + string(fl.ExtensionRef.Name)
		}
		f.fail500 = "extensionRef " + name + " is not a filter sturdy knows; its requests are answered 500"
	default:
		return fmt.Sprintf("filter %s is not supported", fl.Type)
	}
	return ""
}

// headerRules lowers a header modifier. Values are literal in Gateway
// API and templates in sturdy, so "$" is written "$$". Host, on the way
// in, is sturdy's host_header.
func headerRules(h *gwv1.HTTPHeaderFilter, request bool) (*config.HeaderRules, string, string) {
	out := &config.HeaderRules{}
	host := ""
	seen := map[string]string{}
	use := func(what, name string) string {
		k := textproto.CanonicalMIMEHeaderKey(name)
		if prev, dup := seen[k]; dup {
			return fmt.Sprintf("header %s is both in %s and %s: sturdy has one rule per header", name, prev, what)
		}
		seen[k] = what
		return ""
	}
	for _, kv := range h.Set {
		if request && strings.EqualFold(string(kv.Name), "Host") {
			host = literal(kv.Value)
			continue
		}
		if why := firstOf(use("set", string(kv.Name)), config.RuleHeaderProblem(string(kv.Name))); why != "" {
			return nil, "", why
		}
		if out.Set == nil {
			out.Set = map[string]string{}
		}
		out.Set[string(kv.Name)] = literal(kv.Value)
	}
	for _, kv := range h.Add {
		if why := firstOf(use("add", string(kv.Name)), config.RuleHeaderProblem(string(kv.Name))); why != "" {
			return nil, "", why
		}
		if out.Add == nil {
			out.Add = map[string]string{}
		}
		out.Add[string(kv.Name)] = literal(kv.Value)
	}
	for _, name := range h.Remove {
		if why := firstOf(use("remove", name), config.RuleHeaderProblem(name)); why != "" {
			return nil, "", why
		}
		out.Remove = append(out.Remove, name)
	}
	if out.Set == nil && out.Add == nil && out.Remove == nil {
		out = nil
	}
	return out, host, ""
}

// pathModifier lowers a redirect's or rewrite's path: the whole path, or
// the prefix the route matched.
func pathModifier(p *gwv1.HTTPPathModifier) (full string, prefix *string, why string) {
	switch p.Type {
	case gwv1.FullPathHTTPPathModifier:
		if p.ReplaceFullPath == nil {
			return "", nil, "ReplaceFullPath without a path"
		}
		full = literal(*p.ReplaceFullPath)
		if full == "" {
			full = "/"
		}
	case gwv1.PrefixMatchHTTPPathModifier:
		if p.ReplacePrefixMatch == nil {
			return "", nil, "ReplacePrefixMatch without a prefix"
		}
		s := literal(*p.ReplacePrefixMatch)
		prefix = &s
	default:
		return "", nil, fmt.Sprintf("path modifier %s is not supported", p.Type)
	}
	v := full
	if prefix != nil {
		v = *prefix
	}
	if strings.ContainsAny(v, "?#") {
		return "", nil, fmt.Sprintf("path %q holds ? or #: sturdy keeps the client's query", v)
	}
	return full, prefix, ""
}

// literal writes a Gateway API value as a sturdy template that expands
// to exactly that value.
func literal(s string) string { return strings.ReplaceAll(s, "$", "$$") }

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
