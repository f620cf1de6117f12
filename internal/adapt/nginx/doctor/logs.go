package doctor

import (
	"fmt"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/adapt/nginx/accesslog"
	"github.com/sturdyproxy/sturdy/internal/adapt/nginx/errlog"
)

// Scores of log findings: evidence from the logs outranks config risks,
// and a named cause outranks its symptom (the empty pool).
const (
	scoreRequest      = 900
	scoreClientRoute  = 800
	scoreStale        = 850
	scoreDefaultEmpty = 700
	scoreWorkerConns  = 650
	scorePoolEmpty    = 500
	scoreVolume       = 400
	scoreDNS          = 300
)

// cause is who an episode's upstream errors belong to.
type cause struct {
	kind string // request, client, route, host-down, one-host, none, few, mixed
	key  string
	n    int // errors carrying key
}

const minAttributed = 5 // upstream errors needed before blaming anyone

func attribute(ep errlog.Episode) cause {
	switch {
	case ep.Errors == 0:
		return cause{kind: "none"}
	case ep.Errors < minAttributed:
		return cause{kind: "few"}
	case pct(ep.NonASCII, ep.Errors) >= 50:
		return cause{kind: "request", key: "non-ASCII URL", n: ep.NonASCII}
	}
	best := cause{}
	if len(ep.Clients) > 0 && pct(ep.Clients[0].N, ep.Errors) >= 50 && ep.DistinctBackends >= 2 {
		best = cause{kind: "client", key: ep.Clients[0].Key, n: ep.Clients[0].N}
	}
	if len(ep.Routes) > 0 && pct(ep.Routes[0].N, ep.Errors) >= 50 && ep.DistinctBackends >= 2 && ep.DistinctClients >= 3 && ep.Routes[0].N > best.n {
		best = cause{kind: "route", key: ep.Routes[0].Key, n: ep.Routes[0].N}
	}
	switch {
	case best.kind != "":
		return best
	case pct(ep.Connecting, ep.Errors) >= 50:
		return cause{kind: "host-down", n: ep.Connecting}
	case len(ep.Backends) > 0 && pct(ep.Backends[0].N, ep.Errors) >= 70:
		return cause{kind: "one-host", key: ep.Backends[0].Key, n: ep.Backends[0].N}
	}
	return cause{kind: "mixed"}
}

func logFindings(site *nginx.Site, el *errlog.Result, al *accesslog.Result) []Finding {
	var out []Finding
	if el != nil {
		out = append(out, episodeFindings(site, el)...)
		out = append(out, workerConnFinding(el)...)
		out = append(out, resolveFinding(el)...)
		out = append(out, volumeFinding(el)...)
	}
	out = append(out, staleFindings(site, el, al)...)
	return out
}

// group is the episodes of one upstream that share a cause.
type group struct {
	upstream string
	cause    cause
	eps      []errlog.Episode
}

func episodeFindings(site *nginx.Site, el *errlog.Result) []Finding {
	byUp := map[string][]errlog.Episode{}
	var ups []string
	var groups []*group
	idx := map[string]*group{}
	for _, ep := range el.Episodes {
		if _, ok := byUp[ep.Upstream]; !ok {
			ups = append(ups, ep.Upstream)
		}
		byUp[ep.Upstream] = append(byUp[ep.Upstream], ep)
		c := attribute(ep)
		if c.kind != "request" && c.kind != "client" && c.kind != "route" {
			continue
		}
		k := ep.Upstream + "\x00" + c.kind + "\x00" + c.key
		g, ok := idx[k]
		if !ok {
			g = &group{upstream: ep.Upstream, cause: c}
			idx[k] = g
			groups = append(groups, g)
		} else {
			g.cause.n += c.n
		}
		g.eps = append(g.eps, ep)
	}
	var out []Finding
	for _, g := range groups {
		out = append(out, attributionFinding(site, el, g))
	}
	for _, up := range ups {
		out = append(out, poolEmptyFinding(site, el, up, byUp[up]))
	}
	return out
}

// when describes a group's episodes: "the 08:11 episode" or "3 episodes (first at 08:11)".
func when(eps []errlog.Episode) string {
	if len(eps) == 1 {
		return "the " + eps[0].Start.Format("15:04") + " episode"
	}
	return fmt.Sprintf("%d episodes (first at %s)", len(eps), eps[0].Start.Format("15:04"))
}

func attributionFinding(site *nginx.Site, el *errlog.Result, g *group) Finding {
	errs, backends, victims, ejections := 0, 0, 0, 0
	for _, ep := range g.eps {
		errs += ep.Errors
		backends = max(backends, ep.DistinctBackends)
		victims = max(victims, ep.Victims)
		ejections += ep.Ejections
	}
	p := pct(g.cause.n, errs)
	ep0 := g.eps[0]
	f := Finding{Severity: High, Evidence: []string{ep0.FirstLine}}
	file, line := configPos(site, g.upstream, el)
	f.File, f.Line = file, line
	kinds := kindSummary(ep0.ByKind)
	switch g.cause.kind {
	case "request":
		f.ID, f.Incident, f.Score = "log-request-ejection", Inc003, scoreRequest+p
		f.Title = fmt.Sprintf("%d%% of the upstream errors (%s) before %s of upstream %s came from requests whose URL carries raw non-ASCII bytes: the requests failed, not the servers", p, kinds, when(g.eps), g.upstream)
		f.Why = fmt.Sprintf("The backend dropped the connection on these malformed requests; nginx retried them on the next server, which dropped them too, and counted each drop against a server (%d servers hit) until none was left. %d clients then got \"no live upstreams\" for requests that had nothing wrong with them (incident 003).", backends, victims)
		f.NginxFix = "Reject URLs with raw bytes at nginx (`if ($request_uri ~ \"[\\x80-\\xff]\") { return 400; }`), fix the client that sends them unencoded, make the backend answer 400 (Node.js: handle clientError), and raise max_fails so that one request cannot eject a server."
		f.Sturdy = "sturdy answers malformed requests with 400 at the edge; a request that fails the same way on a second backend is the request's failure, counted against no backend."
		if ep0.NonASCIIExample != "" {
			f.Evidence = append(f.Evidence, ep0.NonASCIIExample)
		}
	case "client":
		f.ID, f.Incident, f.Score = "log-client-ejection", Inc000, scoreClientRoute+p
		f.Title = fmt.Sprintf("%d%% of the upstream errors (%s) before %s of upstream %s came from client %s: one client took the pool down", p, kinds, when(g.eps), g.upstream, g.cause.key)
		f.Why = fmt.Sprintf("nginx counted this client's failures against the servers (%d servers, %d ejections logged) until none was left; then %d clients got \"no live upstreams\" 502s although the servers were healthy for them. Something between nginx and the application reacts to this one client (incident 000: a WAF blocking a scanner answered 502).", backends, ejections, victims)
		f.NginxFix = fmt.Sprintf("Find out why %s's requests fail (WAF or ACL block, scanner, broken client) and `deny` it at nginx or make the middle tier answer 403; remove http_5xx from proxy_next_upstream and raise max_fails so that one client's errors cannot eject servers.", g.cause.key)
		f.Sturdy = "sturdy sees the failures follow one client across backends while other clients succeed, attributes them to the client, counts nothing against the backends and can shed that client: innocent clients see no errors."
	case "route":
		f.ID, f.Incident, f.Score = "log-route-ejection", Inc002, scoreClientRoute+p
		if p == 100 {
			f.Title = fmt.Sprintf("all %d upstream errors (%s) before %s of upstream %s were on %s: one slow route took the pool down", errs, kinds, when(g.eps), g.upstream, g.cause.key)
		} else {
			f.Title = fmt.Sprintf("%d%% of the upstream errors (%s) before %s of upstream %s were on %s: one route took the pool down", p, kinds, when(g.eps), g.upstream, g.cause.key)
		}
		f.Why = fmt.Sprintf("That route failed on every server it reached (%d servers) for many clients; nginx counted each failure against the server, so one route ejected the whole upstream and %d clients got 502 on unrelated routes (incident 002: one slow report query, 502s in 10-second waves).", backends, victims)
		f.NginxFix = fmt.Sprintf("Give %s its own location and upstream block (same servers, max_fails=0) with a proxy_read_timeout that fits it, and fix or bound the slow work behind it.", g.cause.key)
		f.Sturdy = "sturdy attributes failures that concentrate on one route across backends to the route: that route degrades and sheds with 503 within its own timeouts and in-flight limit, and the backends stay in rotation for every other route."
		if l := locationFor(site, g.upstream, g.cause.key); l != nil {
			f.File, f.Line = l.Dir.File, l.Dir.Line
			f.Evidence = append(f.Evidence, ev(l.Dir))
		}
	}
	f.Evidence = append(f.Evidence, ep0.Examples...)
	f.Evidence = append(f.Evidence, "clients: "+counts(ep0.Clients, ep0.DistinctClients), "routes: "+counts(ep0.Routes, ep0.DistinctRoutes), "backends: "+counts(ep0.Backends, ep0.DistinctBackends))
	return f
}

func poolEmptyFinding(site *nginx.Site, el *errlog.Result, up string, eps []errlog.Episode) Finding {
	var total time.Duration
	noLive, victims := 0, 0
	for _, ep := range eps {
		total += ep.Duration()
		noLive += ep.NoLive
		victims = max(victims, ep.Victims)
	}
	first, last := eps[0], eps[len(eps)-1]
	span := fmt.Sprintf("%s to %s", first.Start.Format("15:04:05"), last.End.Format("15:04:05"))
	if len(eps) > 1 {
		span = fmt.Sprintf("in %d episodes from %s", len(eps), span)
	}
	f := Finding{
		ID:       "log-pool-empty",
		Severity: High,
		Incident: Inc001Pool,
		Score:    scorePoolEmpty,
		NginxFix: "Give the upstream a `backup` server or an `error_page 502 503 504` sorry page with Retry-After so that an empty pool still answers, alert on any \"no live upstreams\" line, and fix what ejected the servers (see the other findings).",
		Sturdy:   "An empty pool in sturdy still answers (panic routing when only passive evidence ejected the hosts, fallback pool, bounded stale cache, 503 sorry page with Retry-After), and the pool-empty event is logged once, counted and alerted.",
		Evidence: []string{first.FirstLine},
	}
	f.File, f.Line = configPos(site, up, el)
	f.Title = fmt.Sprintf("upstream %s had no live server for %s (%s): %d requests from %d clients got \"no live upstreams\" 502s", up, fmtSpan(total), span, noLive, victims)
	if srv, l := defaultServerOf(site, up); srv != nil {
		f.ID, f.Score, f.Incident = "log-default-pool-empty", scoreDefaultEmpty, Inc001
		f.File, f.Line = l.ProxyPass.File, l.ProxyPass.Line
		f.Title = fmt.Sprintf("upstream %s, behind the default server for %s, had no live server for %s (%s): every request for a host without its own server block got 502 (%d logged, %d clients)", up, strings.Join(srv.DefaultFor, ", "), fmtSpan(total), span, noLive, victims)
		f.Evidence = append(f.Evidence, ev(l.ProxyPass))
	}
	c := attribute(first)
	switch c.kind {
	case "none":
		f.Why = "No upstream error was logged before it: an active health check (or `down`, or another worker's ejections) emptied the pool, and nginx answered a bare 502 to every request for as long as it lasted."
	case "host-down":
		f.Why = fmt.Sprintf("The %d upstream errors before it were mostly failures to connect (%s) on %s from %d clients: the backends really were down. The outage was real; answering it with hours of bare 502s was not the only option.", first.Errors, kindSummary(first.ByKind), plural(first.DistinctBackends, "server", "servers"), first.DistinctClients)
	case "request", "client", "route":
		f.Why = "The servers were ejected by errors that belong to one " + c.kind + " (see that finding); every other request then got a bare 502 while the pool stayed empty."
	default:
		f.Why = fmt.Sprintf("%d upstream errors (%s) on %s preceded it; nginx answered a bare 502 to every request while the pool stayed empty.", first.Errors, kindSummary(first.ByKind), plural(first.DistinctBackends, "server", "servers"))
	}
	if len(eps) > 1 {
		for _, ep := range eps[1:min(len(eps), 4)] {
			f.Evidence = append(f.Evidence, ep.FirstLine)
		}
	}
	if first.Bytes > 0 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("error log during the first episode: %s in %s (%s/h)", fmtBytes(float64(first.Bytes)), fmtSpan(first.Duration()), fmtBytes(perHour(first.Bytes, first.Duration()))))
	}
	return f
}

func perHour(b int64, d time.Duration) float64 {
	return float64(b) / max(d, time.Minute).Hours()
}

func workerConnFinding(el *errlog.Result) []Finding {
	kt := kindTotal(el, errlog.WorkerConns)
	if kt == nil {
		return nil
	}
	return []Finding{{
		ID:       "log-worker-connections",
		Severity: High,
		Title:    fmt.Sprintf("nginx ran out of worker connections %s (\"worker_connections are not enough\")", plural(kt.Total, "time", "times")),
		File:     fileOf(kt.Example),
		Incident: Inc001Conn,
		Why:      "While a worker is out of connections it drops new client connections and cannot open upstream ones; every upstream suffers, not only the one that is slow. In incident 001 retries against a dead default pool ate the connection budget, so healthy upstreams timed out too.",
		NginxFix: "Make requests to a dead pool end fast (a backup server or error_page, proxy_next_upstream_tries 2, proxy_next_upstream_timeout), keep upstream keepalive small, and size worker_connections and worker_rlimit_nofile for the peak.",
		Sturdy:   "sturdy gives each route its own in-flight limit and a retry budget, so one dead pool sheds its own requests (503 with Retry-After) and cannot starve the others.",
		Evidence: []string{kt.Example},
		Score:    scoreWorkerConns,
	}}
}

func resolveFinding(el *errlog.Result) []Finding {
	kt := kindTotal(el, errlog.Resolve)
	if kt == nil {
		return nil
	}
	return []Finding{{
		ID:       "log-dns-failures",
		Severity: Medium,
		Title:    fmt.Sprintf("upstream names could not be resolved %s", plural(kt.Total, "time", "times")),
		File:     fileOf(kt.Example),
		Incident: Inc001DNS,
		Why:      "Each failed lookup is a failed request: DNS is on the data path, and it fails exactly when the cluster is under pressure (incident 001: CoreDNS).",
		NginxFix: "Use explicit addresses for critical upstreams, or a resolver close to nginx with valid= long enough to ride out DNS trouble.",
		Sturdy:   "sturdy resolves in the background and keeps the last good answer when a lookup fails.",
		Evidence: []string{kt.Example},
		Score:    scoreDNS,
	}}
}

// volumeThreshold is the error-log rate worth a finding: 100 MiB/h.
const volumeThreshold = 100 << 20

func volumeFinding(el *errlog.Result) []Finding {
	peak := el.PeakMinute
	if peak.Bytes*60 < volumeThreshold {
		return nil
	}
	total := 0
	for _, n := range peak.Kinds {
		total += n
	}
	return []Finding{{
		ID:       "log-volume",
		Severity: Medium,
		Title:    fmt.Sprintf("the error log grew at up to %s/h (%s in the minute %s), %d classified lines in that minute, %d of them \"no live upstreams\"", fmtBytes(float64(peak.Bytes*60)), fmtBytes(float64(peak.Bytes)), peak.Time.Format("2006/01/02 15:04"), total, peak.Kinds[errlog.NoLive.String()]),
		File:     firstFile(el),
		Incident: Inc001Log,
		Why:      "nginx writes one error line per failed request, so an outage fills disks and log pipelines (incident 001: over 1.5 GB/h per instance) and buries the one line that says what changed.",
		NginxFix: "Alert on the rate of \"no live upstreams\" instead of reading the log; rate-limit or sample the error log in the pipeline; fix the empty pool that produces it.",
		Sturdy:   "sturdy logs state changes once with their evidence and aggregates repeats (\"N similar in the last 10 s\"), never one line per request.",
		Evidence: []string{fmt.Sprintf("peak minute %s: %s", peak.Time.Format("2006/01/02 15:04"), fmtBytes(float64(peak.Bytes)))},
		Score:    scoreVolume,
	}}
}

func kindTotal(el *errlog.Result, k errlog.Kind) *errlog.KindTotal {
	for i := range el.Kinds {
		if el.Kinds[i].Kind == k.String() {
			return &el.Kinds[i]
		}
	}
	return nil
}

// fileOf returns the log file name of an evidence line "file:line: text".
func fileOf(evidence string) string {
	if i := strings.Index(evidence, ": "); i > 0 {
		pos := evidence[:i]
		if j := strings.LastIndexByte(pos, ':'); j > 0 {
			return pos[:j]
		}
	}
	return ""
}

func firstFile(el *errlog.Result) string {
	if len(el.Files) > 0 {
		return el.Files[0].Name
	}
	return ""
}

// configPos points at the upstream block named up, or at the log when the
// config does not have it.
func configPos(site *nginx.Site, up string, el *errlog.Result) (string, int) {
	if site != nil {
		if u := site.Upstream(up); u != nil {
			return u.Dir.File, u.Dir.Line
		}
	}
	return firstFile(el), 0
}

// defaultServerOf returns the default server whose "location /" proxies to
// upstream up.
func defaultServerOf(site *nginx.Site, up string) (*nginx.Server, *nginx.Location) {
	if site == nil {
		return nil, nil
	}
	for _, srv := range site.Servers {
		if l, ok := defaultTargets(site)[srv]; ok && explicitDefault(srv) && l.Target.Upstream != nil && l.Target.Upstream.Name == up {
			return srv, l
		}
	}
	return nil, nil
}

// locationFor finds the location proxying to upstream up that nginx would
// pick for route ("METHOD /path"): the longest matching prefix.
func locationFor(site *nginx.Site, up, route string) *nginx.Location {
	if site == nil {
		return nil
	}
	_, path, _ := strings.Cut(route, " ")
	var best *nginx.Location
	for _, srv := range site.Servers {
		for _, l := range srv.Proxied() {
			if l.Target.Upstream == nil || l.Target.Upstream.Name != up || l.Modifier == "~" || l.Modifier == "~*" {
				continue
			}
			if strings.HasPrefix(path, l.Path) && (best == nil || len(l.Path) > len(best.Path)) {
				best = l
			}
		}
	}
	return best
}

func counts(cs []errlog.Count, distinct int) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		k := c.Key
		if k == "" {
			k = "(none)"
		}
		parts[i] = fmt.Sprintf("%s %d", k, c.N)
	}
	s := strings.Join(parts, ", ")
	if distinct > len(cs) {
		s += fmt.Sprintf(" (%d distinct)", distinct)
	}
	return s
}

// kindSummary names the kinds of errors: "upstream timed out" or
// "upstream server temporarily disabled 210, upstream timed out 9".
func kindSummary(cs []errlog.Count) string {
	if len(cs) == 1 {
		return cs[0].Key
	}
	parts := make([]string, 0, len(cs))
	for i, c := range cs {
		if i == 3 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %d", c.Key, c.N))
	}
	return strings.Join(parts, ", ")
}
