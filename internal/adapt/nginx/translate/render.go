package translate

import (
	"bytes"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// node helpers for building a commented YAML document.

func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }
func num(n int) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(n)}
}
func yes() *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"} }
func no() *yaml.Node  { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "false"} }
func dur(d time.Duration) *yaml.Node {
	return str(fmtDur(d))
}

func mapping(comment ...string) *yaml.Node {
	return &yaml.Node{Kind: yaml.MappingNode, HeadComment: wrapComment(comment)}
}

// clean makes text safe inside a YAML comment: control characters and
// invalid UTF-8 (from hostile or binary configs) become \xNN.
func clean(s string) string {
	if printable(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n <= 1) || r < 0x20 || r == 0x7f {
			fmt.Fprintf(&b, `\x%02X`, s[i])
			i++
			continue
		}
		b.WriteRune(r)
		i += n
	}
	return b.String()
}

// cleanBlock cleans each line of a multi-line comment.
func cleanBlock(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = clean(l)
	}
	return strings.Join(lines, "\n")
}

// wrapComment joins comment lines, wrapping each at about 100 columns.
func wrapComment(lines []string) string {
	const width = 96
	var out []string
	for _, l := range lines {
		l = cleanBlock(l)
		for len(l) > width {
			i := strings.LastIndexByte(l[:width], ' ')
			if i <= 2 { // only the continuation indent: a word longer than the line
				break
			}
			out = append(out, l[:i])
			l = "  " + l[i+1:]
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

func flowList(items []string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, s := range items {
		n.Content = append(n.Content, str(s))
	}
	return n
}

// set adds key: value to mapping m; comment goes above the key, line
// after the value.
func set(m *yaml.Node, key string, v *yaml.Node, comment, line string) {
	k := str(key)
	k.Tag = ""
	k.HeadComment = cleanBlock(comment)
	v.LineComment = clean(line)
	m.Content = append(m.Content, k, v)
}

func (t *translator) render() ([]byte, error) {
	root := mapping()
	admin := mapping()
	set(admin, "listen", str(t.adminListen()), "", "")
	set(root, "admin", admin, "sturdy's own status page, Prometheus metrics and runtime API (nginx's stub_status, and much more).", "")

	lns := &yaml.Node{Kind: yaml.SequenceNode}
	for _, ln := range t.listenersOut {
		lns.Content = append(lns.Content, t.renderListener(ln))
	}
	set(root, "listeners", lns, "Listeners accept client connections: one per nginx listen address.", "")

	if len(t.trusted) > 0 {
		set(root, "trusted_proxies", flowList(t.trusted), fmt.Sprintf("From set_real_ip_from (%s): only these peers' X-Forwarded-* headers are believed.", t.trustedFrom[0].Pos()), "")
	}

	edge := mapping()
	set(edge, "non_ascii", str(config.NonASCIIReencode), "", "")
	if len(t.deny) > 0 {
		set(edge, "deny", flowList(t.deny), wrapComment(append([]string{"From nginx's deny directives."}, t.denyNotes...)), "")
	}
	set(root, "edge", edge, "Request hygiene, decided before any backend is tried (incident 003): raw non-ASCII bytes in a URL\nare percent-encoded instead of reaching (and killing) a backend.", "")
	if t.dnsRefresh > 0 {
		dns := mapping()
		set(dns, "refresh", dur(t.dnsRefresh), "", "")
		set(root, "dns", dns, wrapComment([]string{t.dnsNote}), "")
	}
	if slices.ContainsFunc(t.routesOut, func(r *route) bool { return r.cache != nil }) {
		c := mapping()
		set(c, "max_bytes", str("64MiB"), "", "")
		set(root, "cache", c, "sturdy's shared cache is in memory and bounded; nginx's proxy_cache_path was on disk. Size it here.", "")
	}

	t.renderZones(root)
	routes := &yaml.Node{Kind: yaml.SequenceNode}
	for _, r := range t.routesOut {
		routes.Content = append(routes.Content, t.renderRoute(r))
	}
	set(root, "routes", routes, strings.Join([]string{
		"Routes: one per nginx location with proxy_pass. Among the routes whose hosts match, the",
		"longest path prefix wins, like nginx's prefix locations. Routes without hosts come from nginx's",
		"default servers: they answer every Host no other route names on their listeners. Routes on",
		"the refused pool stand for access rules sturdy cannot reproduce: they never reach a backend.",
		"timeouts: nginx's proxy_connect_timeout and proxy_read_timeout where they were set; otherwise",
		"  sturdy's defaults, connect 5s and response_header 30s (nginx waited 60s for each). Timeouts",
		"  and in-flight limits are per route: a slow route sheds with 503 and cannot eject the pool's hosts",
		"  for the other routes (incident 002).",
		"max_body_bytes: nginx's client_max_body_size (nginx's default 1m where it was not set).",
		"retry: nginx retried error and timeout on every server; sturdy retries once (tries: 2), only when",
		"  nothing reached a backend or the method is idempotent, within a 20% retry budget.",
		"The path a backend gets: where proxy_pass had no URI part, nginx sent the request URI as the",
		"  client wrote it (/a/../b//c, /%7Euser); sturdy sends the path it routed on: dot segments",
		"  resolved, runs of slashes merged, unreserved escapes decoded (/b/c, /~user), so that the",
		"  path its rules judged is the path the backend serves. %2F stays encoded where",
		"  allow_encoded_slashes says so. Where proxy_pass had a URI part, or a rewrite changed the path,",
		"  both send the normalised path with the prefix replaced.",
	}, "\n"), "")

	pools := &yaml.Node{Kind: yaml.SequenceNode}
	for _, p := range t.pools {
		pools.Content = append(pools.Content, t.renderPool(p))
	}
	set(root, "pools", pools, strings.Join([]string{
		"Pools: one per nginx upstream block (or proxy_pass address).",
		"health.passive replaces max_fails/fail_timeout. nginx ejected a server after max_fails failed",
		"attempts within fail_timeout, whoever caused them: one client (incident 000), one slow route (002),",
		"one malformed request (003). sturdy first attributes a failure to the client, route or request when",
		"it follows one across hosts; only what remains counts against a host, which is ejected when its",
		"failure rate is clearly worse than its peers' (50% over 30s, at least 10 requests from 3 clients) or",
		"after 3 refused connections in a row. Ejections back off from eject_time up to 5m, and passive",
		"evidence never ejects more than half of a pool.",
	}, "\n"), "")

	doc := &yaml.Node{Kind: yaml.DocumentNode, HeadComment: t.header(), Content: []*yaml.Node{root}}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("cannot write the sturdy config: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("cannot write the sturdy config: %w", err)
	}
	return b.Bytes(), nil
}

func (t *translator) renderListener(ln *listener) *yaml.Node {
	var from []string
	for _, d := range ln.from {
		from = append(from, fmt.Sprintf("%s (%s)", strings.TrimSuffix(d.String(), ";"), d.Pos()))
	}
	comment := append([]string{"nginx: " + strings.Join(from, ", ")}, ln.comments...)
	m := mapping(comment...)
	set(m, "name", str(ln.name), "", "")
	set(m, "listen", str(ln.listen), "", "")
	if ln.ssl {
		set(m, "tls", renderTLS(ln), "HTTPS with HTTP/2; `sturdy check` loads every certificate and key.", "")
	}
	if ln.redirect != nil {
		rm := mapping()
		set(rm, "status", num(ln.redirect.Status), "", "")
		if ln.redirect.Port != 0 && ln.redirect.Port != config.DefaultRedirectPort {
			set(rm, "port", num(ln.redirect.Port), "", "")
		}
		set(m, "redirect_https", rm, wrapComment([]string{ln.redirectNote}), "")
	}
	if ln.keepSlashes {
		// Merging is sturdy's default too; only a listener shared with a
		// server that kept slashes must say so.
		set(m, "merge_slashes", no(), "", "nginx merge_slashes off on a server here")
	}
	if ln.underscores {
		set(m, "allow_underscores_in_headers", yes(), "", "nginx underscores_in_headers on (or ignore_invalid_headers off)")
	}
	if ln.h2c && !ln.ssl {
		set(m, "h2c", yes(), "", "nginx listen ... http2 without ssl: HTTP/2 with prior knowledge")
	}
	if ln.proxyProtocol {
		set(m, "proxy_protocol", str(config.ProxyProtocolRequired), "", "nginx listen ... proxy_protocol, from trusted_proxies")
	}
	if ln.idle > 0 {
		set(m, "idle_timeout", dur(ln.idle), "", "nginx keepalive_timeout")
	}
	if ln.readHeader > 0 {
		set(m, "read_header_timeout", dur(ln.readHeader), "", "nginx client_header_timeout")
	}
	return m
}

func (t *translator) renderRoute(r *route) *yaml.Node {
	m := mapping(r.comments...)
	set(m, "name", str(r.name), "", "")
	set(m, "listeners", flowList(r.listeners), "", "")
	if len(r.hosts) > 0 {
		set(m, "hosts", flowList(r.hosts), "", "")
	}
	if pm := r.match; pm != nil && !r.plainPrefix() {
		mm := renderMatch(pm)
		if len(r.methods) > 0 {
			set(mm, "methods", flowList(r.methods), "", "")
		}
		set(m, "match", mm, "", "")
	} else {
		set(m, "path", str(r.path), "", "")
		if len(r.methods) > 0 {
			mm := mapping()
			set(mm, "methods", flowList(r.methods), "", "")
			set(m, "match", mm, "", "")
		}
	}
	if r.def {
		set(m, "default", yes(), "", "")
	}
	if rw := r.rewrite; rw != nil && rw.Rematch {
		// Nothing else of the route is used: the next route answers.
		rm := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		set(rm, "regex", str(rw.Regex), "", "")
		set(rm, "path", str(rw.Path), "", "")
		set(rm, "rematch", yes(), "", "")
		set(m, "rewrite", rm, "nginx's rewrite ... last: the new path is routed again", "")
		return m
	}
	if rd := r.redirect; rd != nil {
		rm := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		set(rm, "url", str(rd.URL), "", "")
		set(rm, "status", num(rd.Status), "", "")
		set(m, "redirect", rm, "", "")
	}
	if rs := r.respond; rs != nil {
		rm := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		comment := ""
		if rs.Close {
			set(rm, "close", yes(), "", "")
			comment = "nginx's return 444: the connection closed without an answer"
		} else {
			set(rm, "status", num(rs.Status), "", "")
			if rs.Body != "" {
				set(rm, "body", str(rs.Body), "", "")
			}
			set(rm, "content_type", str(rs.ContentType), "", "")
		}
		set(m, "respond", rm, "", comment)
	}
	if len(r.backends) > 0 {
		set(m, "backends", renderBackends(r.backends), "nginx's map / split_clients behind proxy_pass", "")
		t.renderTimeouts(m, r)
	} else if r.pool != nil {
		set(m, "pool", str(r.pool.name), "", "")
		t.renderTimeouts(m, r)
	}
	if r.maxBody != "" {
		note := "nginx client_max_body_size"
		if r.maxBodyDefault {
			note = "nginx's default client_max_body_size"
		}
		set(m, "max_body_bytes", str(r.maxBody), "", note)
	}
	if r.streamBody && r.pool != nil {
		set(m, "request_buffering", no(), "", "nginx proxy_request_buffering off: bodies stream to the backend as they arrive")
	}
	if r.noUpgrade && (r.pool != nil || len(r.backends) > 0) {
		set(m, "upgrades", &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}, "", "nginx sent no Upgrade header here (proxy_set_header Upgrade $http_upgrade), so it never switched to WebSocket")
	}
	if r.encodedSlashes && r.pool != nil {
		set(m, "allow_encoded_slashes", yes(), "", "nginx forwarded %2F as sent here (proxy_pass without a URI part)")
	}
	if r.tries > 0 && r.pool != nil {
		rt := mapping()
		set(rt, "tries", num(r.tries), "", "")
		set(m, "retry", rt, "", "")
	}
	if r.pool != nil && r.pool.fallback != nil && len(r.backends) == 0 {
		fb := mapping()
		set(fb, "pool", str(r.pool.fallback.name), "", "")
		set(m, "fallback", fb, "nginx's backup servers of this upstream.", "")
	}
	if r.sorryFile != "" {
		sm := mapping()
		set(sm, "body_file", str(r.sorryFile), "", "")
		set(m, "sorry", sm, "nginx's error_page for 502/503/504; sturdy answers it with 503 and Retry-After.", "")
	}
	if r.sorryBody != "" {
		sm := mapping()
		set(sm, "body", str(r.sorryBody), "", "")
		set(m, "sorry", sm, "The refusal page: this route never reaches a backend.", "")
	}
	t.renderRules(m, r)
	renderGuard(m, r)
	if r.static != nil {
		set(m, "static", renderStatic(r.static), "", "")
	}
	if r.compress != nil {
		set(m, "compress", renderCompress(r.compress), wrapComment([]string{r.compress.comment}), "")
	}
	if c := r.cache; c != nil {
		cm := mapping()
		set(cm, "enabled", yes(), "", "")
		if !c.staleOnError {
			set(cm, "stale_if_error_max", str("0s"), "", "")
		}
		set(m, "cache", cm, wrapComment([]string{c.comment}), "")
	}
	if r.keepNoSlash && r.slashPrefix() {
		set(m, "trailing_slash_redirect", no(), "", "nginx redirects a path without its trailing slash only for a location that proxies")
	}
	return m
}

func (t *translator) renderTimeouts(m *yaml.Node, r *route) {
	tm := mapping()
	if r.connect > 0 {
		set(tm, "connect", dur(r.connect), "", "nginx proxy_connect_timeout")
	} else {
		set(tm, "connect", dur(config.DefaultConnectTimeout), "", "")
	}
	if r.response > 0 {
		set(tm, "response_header", dur(r.response), "", "nginx proxy_read_timeout")
	} else {
		set(tm, "response_header", dur(config.DefaultResponseHeader), "", "")
	}
	set(m, "timeouts", tm, "", "")
}

func (t *translator) renderPool(p *pool) *yaml.Node {
	m := mapping(p.comments[0])
	set(m, "name", str(p.name), "", "")
	if p.balance != "" {
		set(m, "balance", str(p.balance), "", "")
	}
	if p.hashKey != "" {
		set(m, "hash_key", str(p.hashKey), "", "")
	}
	hosts := &yaml.Node{Kind: yaml.SequenceNode}
	for _, h := range p.hosts {
		hm := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		set(hm, "addr", str(h.addr), "", "")
		if h.weight != 1 {
			set(hm, "weight", num(h.weight), "", "")
		}
		hm.LineComment = h.comment
		hosts.Content = append(hosts.Content, hm)
	}
	set(m, "hosts", hosts, strings.Join(p.comments[1:], "\n"), "")
	if p.maxIdle > 0 {
		set(m, "max_idle_conns_per_host", num(p.maxIdle), "", "")
	}
	if p.maxConns > 0 {
		set(m, "max_conns_per_host", num(p.maxConns), "", "nginx max_conns")
	}
	if p.idle > 0 {
		set(m, "idle_conn_timeout", dur(p.idle), "", "nginx keepalive_timeout (upstream)")
	}
	if p.tls != nil {
		tm := mapping()
		if p.tls.InsecureSkipVerify {
			set(tm, "insecure_skip_verify", yes(), "", "as nginx: proxy_ssl_verify off")
		}
		set(m, "tls", tm, "HTTPS to the backends (proxy_pass https://).", "")
	}
	health := mapping()
	ps := mapping()
	if p.passive.off {
		set(ps, "enabled", no(), "", "")
	} else {
		eject := config.DefaultEjectTime
		if p.passive.ejectTime > 0 {
			eject = p.passive.ejectTime
		}
		set(ps, "eject_time", dur(eject), "", "")
		if eject > config.DefaultMaxEjectTime {
			set(ps, "max_eject_time", dur(eject), "", "")
		}
		set(ps, "min_clients", num(config.DefaultMinClients), "", "one client can never eject a host")
		set(ps, "max_ejected", str("50%"), "", "passive evidence never empties the pool")
	}
	set(health, "passive", ps, p.passive.comment, "")
	if a := p.active; a != nil {
		am := mapping()
		set(am, "path", str(a.Path), "", "")
		if a.Method != "" {
			set(am, "method", str(a.Method), "", "")
		}
		if a.Host != "" {
			set(am, "host", str(a.Host), "", "")
		}
		if a.ExpectStatus != "" {
			set(am, "expect_status", str(a.ExpectStatus), "", "")
		}
		if a.Interval > 0 {
			set(am, "interval", dur(a.Interval.D()), "", "")
		}
		if a.Timeout > 0 {
			set(am, "timeout", dur(a.Timeout.D()), "", "")
		}
		if a.Rise > 0 {
			set(am, "rise", num(a.Rise), "", "")
		}
		if a.Fall > 0 {
			set(am, "fall", num(a.Fall), "", "")
		}
		set(health, "active", am, "From nginx's `check` (upstream check module). With an active check, passive evidence only\nmakes a host suspect and probes it at once; the probe decides.", "")
	}
	hc := ""
	if p.active == nil && !p.refusal {
		hc = "nginx had no active check here; consider health.active with a readiness path (e.g. /healthz\nthat checks the database), so that a probe, not traffic, decides."
	}
	set(m, "health", health, hc, "")
	return m
}

// adminListen is sturdy's default admin address, moved to the next port
// when a translated listener already uses it.
func (t *translator) adminListen() string {
	host, port, _ := net.SplitHostPort(config.DefaultAdminListen)
	n, _ := strconv.Atoi(port)
	for {
		addr := net.JoinHostPort(host, strconv.Itoa(n))
		if !slices.ContainsFunc(t.listenersOut, func(l *listener) bool { return l.listen == addr }) {
			return addr
		}
		n++
	}
}

func renderMatch(pm *config.PathMatch) *yaml.Node {
	p := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	switch {
	case pm.Exact != "":
		set(p, "exact", str(pm.Exact), "", "")
	case pm.Regex != "":
		set(p, "regex", str(pm.Regex), "", "")
		if pm.CaseInsensitive {
			set(p, "case_insensitive", yes(), "", "")
		}
	default:
		set(p, "starts_with", str(pm.StartsWith), "", "")
		if pm.BeforeRegex {
			set(p, "before_regex", yes(), "", "")
		}
	}
	m := mapping()
	set(m, "path", p, "", "")
	return m
}

// renderRules writes the route's header rules, Host and request id.
func (t *translator) renderRules(m *yaml.Node, r *route) {
	if rw := r.rewrite; rw != nil {
		rm := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		switch {
		case rw.Prefix != nil:
			set(rm, "prefix", str(*rw.Prefix), "", "")
		default:
			if rw.Regex != "" {
				set(rm, "regex", str(rw.Regex), "", "")
			}
			set(rm, "path", str(rw.Path), "", "")
			if rw.Query != "" {
				set(rm, "query", str(rw.Query), "", "")
			}
		}
		set(m, "rewrite", rm, "the path the backend gets, as nginx built it", "")
	}
	if r.hostHeader != "" {
		set(m, "host_header", str(r.hostHeader), "", "nginx's Host")
	}
	if r.forwarding != nil {
		set(m, "forwarding_headers", flowList(r.forwarding), "", "only those nginx sent")
	}
	if len(r.reqSet)+len(r.reqRemove) > 0 {
		set(m, "request_headers", renderRuleSet(r.reqSet, nil, r.reqRemove), "nginx proxy_set_header", "")
	}
	if len(r.respAdd) > 0 {
		set(m, "response_headers", renderRuleSet(nil, r.respAdd, nil), "nginx add_header", "")
	}
	if len(r.hide) > 0 {
		set(m, "hide_response_headers", flowList(r.hide), "", "nginx proxy_hide_header")
	}
	if len(r.errorPages) > 0 {
		eps := &yaml.Node{Kind: yaml.SequenceNode}
		for _, ep := range r.errorPages {
			em := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
			codes := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
			for _, n := range ep.Codes {
				codes.Content = append(codes.Content, num(n))
			}
			set(em, "codes", codes, "", "")
			set(em, "file", str(ep.File), "", "")
			if ep.Status != 0 {
				set(em, "status", num(ep.Status), "", "")
			}
			eps.Content = append(eps.Content, em)
		}
		set(m, "error_pages", eps, "nginx error_page with proxy_intercept_errors on", "")
	}
	if id := r.requestID; id != nil {
		im := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		if id.Header != "" {
			set(im, "header", str(id.Header), "", "")
		}
		set(im, "accept", str(id.Accept), "", "")
		set(im, "response", no(), "", "")
		set(m, "request_id", im, "nginx's $request_id: always a new id, not sent to the client", "")
	}
}

func renderRuleSet(setRules, addRules []headerRule, remove []string) *yaml.Node {
	m := mapping()
	kv := func(key string, rules []headerRule) {
		if len(rules) == 0 {
			return
		}
		n := mapping()
		for _, h := range rules {
			set(n, h.name, str(h.value), "", "")
		}
		set(m, key, n, "", "")
	}
	kv("set", setRules)
	kv("add", addRules)
	if len(remove) > 0 {
		set(m, "remove", flowList(remove), "", "")
	}
	return m
}

// plainPrefix reports a starts_with match that sturdy's plain path prefix
// says as well: "/" or a prefix ending in "/" (which matches what is below
// it), unless a rewrite replaces its characters.
// slashPrefix reports whether sturdy redirects the route's path without its
// trailing slash: a prefix (or starts_with) route ending in "/".
func (r *route) slashPrefix() bool {
	p := r.path
	if pm := r.match; pm != nil {
		p = pm.StartsWith
		if p == "" {
			p = pm.Prefix
		}
	}
	return len(p) > 1 && strings.HasSuffix(p, "/")
}

func (r *route) plainPrefix() bool {
	pm := r.match
	return pm.StartsWith != "" && !pm.BeforeRegex && strings.HasSuffix(pm.StartsWith, "/") &&
		(r.rewrite == nil || r.rewrite.Prefix == nil) && r.path == pm.StartsWith
}

func renderBackends(bs []backendPlan) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode}
	for _, b := range bs {
		e := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		set(e, "pool", str(b.pool.name), "", "")
		if c := b.cond; c != nil {
			vm := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
			set(vm, "name", str(c.name), "", "")
			switch {
			case c.match.Present != nil:
				set(vm, "present", no(), "", "")
			case c.match.Regex != "":
				set(vm, "regex", str(c.match.Regex), "", "")
			default:
				set(vm, "exact", str(c.match.Exact), "", "")
			}
			key := "header"
			if c.cookie {
				key = "cookie"
			}
			set(e, key, vm, "", "")
		} else {
			set(e, "weight", num(b.weight), "", "")
		}
		if b.pool.fallback != nil {
			set(e, "fallback", str(b.pool.fallback.name), "", "")
		}
		if b.host != "" {
			set(e, "host_header", str(b.host), "", "")
		}
		if len(b.headers) > 0 {
			rs := renderRuleSet(b.headers, nil, nil)
			rs.Style = yaml.FlowStyle
			for _, n := range rs.Content {
				n.Style |= yaml.FlowStyle
			}
			set(e, "request_headers", rs, "", "")
		}
		n.Content = append(n.Content, e)
	}
	return n
}
