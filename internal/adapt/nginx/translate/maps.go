package translate

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// proxy_pass http://$pool, where $pool comes from map (on a request
// header, a cookie, or another such variable) and split_clients, becomes
// the route's backends (docs/routing.md#traffic-splitting): the map's
// keys are header or cookie conditions tried in order, split_clients
// shares are weights. Anything else (maps on the method, the URI, $host;
// regex keys that RE2 does not take) is listed.

// choice is one way a variable's value comes out.
type choice struct {
	cond   *condition // nil: whatever the request has
	value  string     // a literal value
	weight int        // > 0: a split_clients share, in hundredths of a percent
}

type condition struct {
	cookie bool
	name   string
	match  config.ValueMatch
	// method, when set, is the condition instead: the request's method
	// (a map on $request_method), which becomes a companion route.
	method string
}

// backendPlan is one entry of a route's backends.
type backendPlan struct {
	pool   *pool
	weight int
	cond   *condition
	// value is what the variable held when this entry was chosen, and
	// headers the request rules that send it (proxy_set_header X $pool).
	value   string
	headers []headerRule
	// host is the Host nginx sent this entry's requests ($proxy_host:
	// the value), "" for the route's.
	host string
}

// mapBackends resolves proxy_pass's $name into backends; why says what
// keeps it from doing so.
func (t *translator) mapBackends(c *locCtx, name string, tg *nginx.ProxyTarget, pass *nginx.Directive) ([]backendPlan, string) {
	chs, why := t.resolveVar(name, 0)
	if why != "" {
		return nil, why
	}
	var out []backendPlan
	weighted := false
	for i, ch := range chs {
		if ch.cond != nil && ch.cond.method != "" && i > 0 && (chs[i-1].cond == nil || chs[i-1].cond.method == "") {
			return nil, fmt.Sprintf("$%s tests the method after other conditions; sturdy routes by method first", name)
		}
		if ch.cond == nil && ch.weight == 0 && weighted {
			break
		}
		if ch.value == "" {
			return nil, fmt.Sprintf("$%s can be empty, and nginx then failed the request", name)
		}
		var target *nginx.ProxyTarget
		if tg.Scheme == "" {
			// proxy_pass $target, whose values are whole URLs.
			target = t.site.DecodeTarget(ch.value)
			switch {
			case target.Scheme == "" || target.Variable:
				return nil, fmt.Sprintf("$%s is %q, not a URL", name, ch.value)
			case target.URI != "":
				return nil, fmt.Sprintf("$%s is %q, a URL with a path", name, ch.value)
			}
		} else {
			target = t.site.DecodeTarget(tg.Scheme + "://" + ch.value + tg.URI)
		}
		p, ns := t.poolFor(target, pass)
		if p == nil {
			return nil, strings.Join(ns.reasons(), "; ")
		}
		c.differs.merge(ns)
		out = append(out, backendPlan{pool: p, weight: ch.weight, cond: ch.cond, value: ch.value})
		if ch.cond == nil && ch.weight == 0 {
			out[len(out)-1].weight = 1
			break // nothing after an unconditional choice is reached
		}
		weighted = weighted || ch.cond == nil
	}
	if len(out) == 0 {
		return nil, "no value of $" + name + " names a pool"
	}
	return out, ""
}

// methodPool is a pool a map on $request_method chose for some methods:
// a companion route with match.methods.
type methodPool struct {
	methods []string
	pool    *pool
	value   string // the variable's value for these methods
	// host is the Host nginx sent these methods' requests ($proxy_host:
	// the value), "" for the route's.
	host string
}

// splitMethods takes the leading method conditions off bs, one entry per
// pool, in nginx's order.
func splitMethods(bs []backendPlan) (rest []backendPlan, byMethod []methodPool) {
	for len(bs) > 0 && bs[0].cond != nil && bs[0].cond.method != "" {
		b := bs[0]
		bs = bs[1:]
		if i := slices.IndexFunc(byMethod, func(m methodPool) bool { return m.pool == b.pool && m.value == b.value }); i >= 0 {
			byMethod[i].methods = appendOnce(byMethod[i].methods, b.cond.method)
			continue
		}
		byMethod = append(byMethod, methodPool{methods: []string{b.cond.method}, pool: b.pool, value: b.value})
	}
	return bs, byMethod
}

// resolveVar lists the values $name takes, in the order nginx would decide.
func (t *translator) resolveVar(name string, depth int) ([]choice, string) {
	if depth > 6 || t.site.HTTP == nil {
		return nil, "maps refer to each other too deeply"
	}
	for _, d := range t.site.HTTP.Local("split_clients") {
		if d.Arg(1) == "$"+name {
			return splitChoices(d)
		}
	}
	for _, d := range t.site.HTTP.Local("map") {
		if d.Arg(1) == "$"+name {
			return t.mapChoices(d, depth)
		}
	}
	switch name {
	case "host", "http_host", "server_name", "hostname":
		// With a resolver, nginx proxied to whatever the client named.
		return nil, fmt.Sprintf("$%s names the backend by the request's host, resolved per request; sturdy proxies only to the pools it was given", name)
	}
	return nil, fmt.Sprintf("$%s is not set by a map, split_clients or a set of a fixed value", name)
}

func splitChoices(d *nginx.Directive) ([]choice, string) {
	var out []choice
	left := 10000
	for _, e := range d.Children {
		v := e.Arg(0)
		if strings.Contains(v, "$") {
			return nil, fmt.Sprintf("split_clients %s (%s) gives a variable", d.Arg(1), e.Pos())
		}
		if e.Name == "*" {
			out = append(out, choice{value: v, weight: max(left, 0)})
			continue
		}
		p, ok := strings.CutSuffix(e.Name, "%")
		f, err := strconv.ParseFloat(p, 64)
		if !ok || err != nil || f < 0 || f > 100 {
			return nil, fmt.Sprintf("split_clients share %q (%s)", e.Name, e.Pos())
		}
		w := int(f*100 + 0.5)
		left -= w
		if w > 0 {
			out = append(out, choice{value: v, weight: w})
		}
	}
	return out, ""
}

// mapChoices: a map on a header or cookie becomes conditions; a map on
// another map's variable is evaluated over that variable's values.
func (t *translator) mapChoices(d *nginx.Directive, depth int) ([]choice, string) {
	src := d.Arg(0)
	type entry struct{ key, value string }
	var entries []entry
	def := ""
	for _, e := range d.Children {
		switch e.Name {
		case "hostnames", "volatile":
			continue
		case "include":
			return nil, fmt.Sprintf("map %s (%s) includes a file", d.Arg(1), e.Pos())
		case "default":
			def = e.Arg(0)
			continue
		}
		entries = append(entries, entry{e.Name, e.Arg(0)})
	}
	// value turns a map value into choices: a literal, or another variable.
	value := func(v string, self []choice) ([]choice, string) {
		if !strings.HasPrefix(v, "$") {
			if strings.Contains(v, "$") {
				return nil, fmt.Sprintf("map %s (%s) builds values from variables", d.Arg(1), d.Pos())
			}
			return []choice{{value: v}}, ""
		}
		if v == src && self != nil {
			return self, ""
		}
		return t.resolveVar(strings.TrimPrefix(v, "$"), depth+1)
	}
	var cond func(key string) (*condition, bool)
	switch {
	case src == "$request_method":
		cond = func(key string) (*condition, bool) {
			return &condition{method: key}, slices.Contains(config.LimitExceptMethods, key)
		}
	case strings.HasPrefix(src, "$http_") && len(src) > 6:
		name := http.CanonicalHeaderKey(strings.ReplaceAll(src[6:], "_", "-"))
		cond = func(key string) (*condition, bool) {
			m, ok := keyMatch(key)
			return &condition{name: name, match: m}, ok
		}
	case strings.HasPrefix(src, "$cookie_") && len(src) > 8:
		cond = func(key string) (*condition, bool) {
			m, ok := keyMatch(key)
			return &condition{cookie: true, name: src[8:], match: m}, ok
		}
	case strings.HasPrefix(src, "$") && !strings.ContainsAny(src[1:], "$ "):
		// A map over another variable: look its values up here.
		subs, why := t.resolveVar(src[1:], depth+1)
		if why != "" {
			return nil, fmt.Sprintf("map %s (%s) reads %s: %s", d.Arg(1), d.Pos(), src, why)
		}
		var out []choice
		for _, s := range subs {
			v := def
			for _, e := range entries {
				if strings.HasPrefix(e.key, "~") {
					return nil, fmt.Sprintf("map %s (%s) has regex keys over another map", d.Arg(1), d.Pos())
				}
				if strings.EqualFold(e.key, s.value) || (e.key == `""` || e.key == "") && s.value == "" {
					v = e.value
					break
				}
			}
			vs, why := value(v, []choice{{value: s.value}})
			if why != "" {
				return nil, why
			}
			for _, x := range vs {
				switch {
				case len(vs) == 1 && x.cond == nil && x.weight == 0:
					out = append(out, choice{cond: s.cond, value: x.value, weight: s.weight})
				case s.cond == nil && s.weight == 0:
					out = append(out, x)
				default:
					return nil, fmt.Sprintf("map %s (%s) combines conditions sturdy cannot put in one backend", d.Arg(1), d.Pos())
				}
			}
		}
		return out, ""
	default:
		return nil, fmt.Sprintf("map %s (%s) reads %s; sturdy's backends choose by a request header or cookie", d.Arg(1), d.Pos(), src)
	}
	var out []choice
	for _, e := range entries {
		cd, ok := cond(e.key)
		if !ok && src == "$request_method" {
			return nil, fmt.Sprintf("map key %s (%s) is not a method sturdy routes by (%s)", e.key, d.Pos(), strings.Join(config.LimitExceptMethods, " "))
		}
		if !ok {
			return nil, fmt.Sprintf("map key %s (%s) is a regex sturdy's RE2 does not take", e.key, d.Pos())
		}
		vs, why := value(e.value, nil)
		if why != "" {
			return nil, why
		}
		if len(vs) != 1 || vs[0].cond != nil || vs[0].weight != 0 {
			return nil, fmt.Sprintf("map %s (%s) key %s leads to further conditions", d.Arg(1), d.Pos(), e.key)
		}
		out = append(out, choice{cond: cd, value: vs[0].value})
	}
	vs, why := value(def, nil)
	if why != "" {
		return nil, why
	}
	return append(out, vs...), ""
}

// keyMatch is a map key as a value condition: nginx compares strings
// ignoring case, and ~ / ~* keys are regular expressions.
func keyMatch(key string) (config.ValueMatch, bool) {
	switch {
	case strings.HasPrefix(key, "~*"):
		_, err := regexp.Compile("(?i)" + key[2:])
		return config.ValueMatch{Regex: "(?i)" + key[2:]}, err == nil
	case strings.HasPrefix(key, "~"):
		_, err := regexp.Compile(key[1:])
		return config.ValueMatch{Regex: key[1:]}, err == nil
	case key == `""` || key == "":
		f := false
		return config.ValueMatch{Present: &f}, true
	}
	return config.ValueMatch{Regex: "^(?i:" + regexp.QuoteMeta(key) + ")$"}, true
}
