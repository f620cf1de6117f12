package doctor

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
)

// Checks of nginx's passive health (max_fails / fail_timeout): the
// mechanism through which incidents 000, 002 and 003 spread from one
// client, one route or one request to every user.

const sturdyAttribution = "sturdy attributes every failure before acting on it: a failure that follows one client across backends is the client's, one that follows a route is the route's, one that repeats for the same request on a second backend is the request's. None of those count against a backend, so they cannot empty the pool."

// checkPassive5xx: proxy_next_upstream with http_5xx in front of passive
// ejection (incident 000).
func checkPassive5xx(u *usage) []Finding {
	var out []Finding
	for _, up := range u.site.Upstreams {
		on, desc := passive(up)
		if !on {
			continue
		}
		var dirs []*nginx.Directive
		var codes []string
		for _, l := range u.locs[up] {
			args, d := nextUpstream(l)
			var c []string
			for _, a := range args {
				if strings.HasPrefix(a, "http_5") || a == "http_429" {
					c = append(c, a)
				}
			}
			if len(c) > 0 && d != nil && !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
				for _, x := range c {
					if !slices.Contains(codes, x) {
						codes = append(codes, x)
					}
				}
			}
		}
		if len(dirs) == 0 {
			continue
		}
		f := Finding{
			ID:       "passive-5xx",
			Severity: High,
			Title:    fmt.Sprintf("proxy_next_upstream counts %s answers against upstream %s's servers (%s): one client that gets 5xx can eject them all", strings.Join(codes, "/"), up.Name, desc),
			File:     dirs[0].File, Line: dirs[0].Line,
			Incident: Inc000,
			Why:      "nginx counts every status listed in proxy_next_upstream as a failure of the server that answered, and ejects a server after max_fails of them within fail_timeout. A tier that answers 5xx for one client (a WAF blocking a scanner, an auth proxy refusing one token) makes each server reach max_fails in seconds; then everyone gets \"no live upstreams\" 502s. In incident 000 one banned scanner IP produced 168,341 such 502s in 20 minutes.",
			NginxFix: "Remove the http_5xx conditions from proxy_next_upstream (keep \"error timeout\"), or set max_fails=0 on these servers so that answers never eject them; make a WAF in the path answer 403 to blocked clients, not 502.",
			Sturdy:   sturdyAttribution,
			Score:    300,
		}
		for _, d := range dirs {
			f.Evidence = append(f.Evidence, ev(d))
		}
		f.Evidence = append(f.Evidence, serverEvidence(up)...)
		out = append(out, f)
	}
	return out
}

// checkSlowRoute: timeouts always count as failures, so one slow location
// can eject the upstream for every location (incident 002).
func checkSlowRoute(u *usage) []Finding {
	var out []Finding
	for _, up := range u.site.Upstreams {
		on, desc := passive(up)
		locs := u.locs[up]
		if !on || len(locs) == 0 {
			continue
		}
		var slow []*nginx.Location
		var slowDirs []*nginx.Directive
		for _, l := range locs {
			// Longer than nginx's 60s default: written for an endpoint known to be slow.
			if t, d := readTimeout(l); d != nil && t > 60*time.Second && !slices.Contains(slowDirs, d) {
				slow = append(slow, l)
				slowDirs = append(slowDirs, d)
			}
		}
		if len(locs) < 2 || len(slow) == len(locs) {
			continue // no other location shares the upstream
		}
		f := Finding{
			ID:       "passive-timeout-slow-route",
			Incident: Inc002,
			Why:      "nginx always counts a timeout as a failure of the server, whatever proxy_next_upstream says. A single slow endpoint (a report, an export, a query that scans a table) that runs past proxy_read_timeout on every server ejects them all, and every other endpoint on the same upstream gets 502 for fail_timeout — in incident 002, in 10-second waves.",
			NginxFix: "Give slow endpoints their own upstream block (same servers, max_fails=0) and their own proxy_read_timeout, or raise max_fails on this upstream; fix or bound the slow query itself.",
			Sturdy:   "sturdy keeps timeouts and an in-flight limit per route. Timeouts that concentrate on one route across backends are that route's: the route is degraded and sheds with 503, while the backends stay in rotation for every other route.",
		}
		mf := minMaxFails(up)
		if len(slow) > 0 {
			d := slowDirs[0]
			f.File, f.Line = d.File, d.Line
			paths := make([]string, len(slow))
			for i, l := range slow {
				t, _ := readTimeout(l)
				paths[i] = fmt.Sprintf("%s (%s)", l.Path, fmtDur(t))
			}
			noun, verb := "location", "shares"
			if len(slow) > 1 {
				noun, verb = "locations", "share"
			}
			f.Title = fmt.Sprintf("long-running %s %s %s upstream %s (%s) with %s: their timeouts eject the servers for all of them", noun, list(paths, 3), verb, up.Name, desc, plural(len(locs)-len(slow), "other location", "other locations"))
			f.Severity, f.Score = Medium, 150
			if mf <= 3 {
				f.Severity, f.Score = High, 250
			}
			for _, d := range slowDirs {
				f.Evidence = append(f.Evidence, ev(d))
			}
		} else {
			l := locs[0]
			f.File, f.Line = l.Dir.File, l.Dir.Line
			f.Title = fmt.Sprintf("upstream %s (%s) serves %s with the same timeouts: any endpoint slower than proxy_read_timeout (%s) ejects the servers for all", up.Name, desc, plural(len(locs), "location", "locations"), fmtDur(mustRead(l)))
			f.Severity, f.Score = Medium, 120
		}
		for _, l := range locs {
			f.Evidence = append(f.Evidence, ev(l.Dir))
		}
		f.Evidence = append(f.Evidence, serverEvidence(up)...)
		out = append(out, f)
	}
	return out
}

func mustRead(l *nginx.Location) time.Duration {
	t, _ := readTimeout(l)
	return t
}

// checkRequestEjection: with passive checks on, a request that makes the
// backend close the connection counts as the server's failure (incident
// 003). Reported once, listing every such upstream.
func checkRequestEjection(u *usage) []Finding {
	var ups []*nginx.Upstream
	for _, up := range u.site.Upstreams {
		if on, _ := passive(up); on && len(u.locs[up]) > 0 {
			ups = append(ups, up)
		}
	}
	if len(ups) == 0 {
		return nil
	}
	_, desc := passive(ups[0])
	f := Finding{
		ID:       "passive-request-ejection",
		Severity: Medium,
		File:     ups[0].Dir.File, Line: ups[0].Dir.Line,
		Incident: Inc003,
		Why:      "nginx counts \"error\" (the backend closed or reset the connection without answering) as the server's failure even when the request caused it. A request the backend cannot parse (raw non-ASCII bytes in the URL made Node.js drop the socket in incident 003) is retried on the next server, fails the same way, and ejects them one after another: unrelated requests then get 502.",
		NginxFix: "Reject or re-encode malformed requests at nginx (e.g. `if ($request_uri ~ \"[\\x80-\\xff]\") { return 400; }`), make the backend answer 400 instead of closing, and raise max_fails (or max_fails=0 with an active health check) so that one request cannot eject a server.",
		Sturdy:   "sturdy rejects malformed requests with 400 at the edge, and a request that fails the same way on a second backend is counted as the request's failure, never the backends'.",
		Score:    100,
	}
	if len(ups) == 1 {
		f.Title = fmt.Sprintf("upstream %s ejects a server after %s: a request that makes the backend drop the connection counts against the server", ups[0].Name, desc)
	} else {
		f.Title = fmt.Sprintf("%d upstreams eject servers on connection errors that a single request can cause (%s for %s)", len(ups), desc, ups[0].Name)
	}
	for _, up := range ups {
		_, d := passive(up)
		f.Evidence = append(f.Evidence, fmt.Sprintf("%s: upstream %s: %s, %d servers", up.Dir.Pos(), up.Name, d, len(primaries(up))))
	}
	return []Finding{f}
}

// checkNonIdempotent: proxy_next_upstream non_idempotent replays POSTs.
func checkNonIdempotent(u *usage) []Finding {
	var out []Finding
	seen := map[*nginx.Directive]bool{}
	for _, up := range u.site.Upstreams {
		for _, l := range u.locs[up] {
			args, d := nextUpstream(l)
			if d == nil || seen[d] || !slices.Contains(args, "non_idempotent") {
				continue
			}
			seen[d] = true
			out = append(out, Finding{
				ID:       "retry-non-idempotent",
				Severity: Medium,
				Title:    fmt.Sprintf("proxy_next_upstream non_idempotent replays POST, PATCH and LOCK requests on another server of %s", up.Name),
				File:     d.File, Line: d.Line,
				Incident: Inc000,
				Why:      "A POST that reached a backend and then failed or timed out may already have had its effect; replaying it sends a second SMS, places a second order. It also doubles the load a misbehaving client puts on the pool, and each replay that fails counts against another server.",
				NginxFix: "Remove non_idempotent from proxy_next_upstream; make retry-safe endpoints idempotent explicitly (idempotency keys) if they must be retried.",
				Sturdy:   "sturdy retries on another host only when the request never reached a backend or the method is idempotent and the body replayable, and caps retries with a retry budget.",
				Evidence: []string{ev(d), ev(l.Dir)},
				Score:    90,
			})
		}
	}
	return out
}

// checkNoZone: without a zone each worker keeps its own failure counters.
func checkNoZone(u *usage) []Finding {
	workers := u.site.WorkerProcesses()
	if workers == 1 {
		return nil
	}
	var ups []*nginx.Upstream
	for _, up := range u.site.Upstreams {
		if on, _ := passive(up); on && up.Zone == nil && len(u.locs[up]) > 0 {
			ups = append(ups, up)
		}
	}
	if len(ups) == 0 {
		return nil
	}
	wdesc := fmt.Sprintf("%d worker processes", workers)
	if workers == 0 {
		wdesc = "worker_processes auto (one per CPU)"
	}
	names := make([]string, len(ups))
	f := Finding{
		ID:       "passive-no-zone",
		Severity: Low,
		File:     ups[0].Dir.File, Line: ups[0].Dir.Line,
		Incident: IncPassive,
		Why:      "Without a shared-memory zone every worker process counts failures and ejects servers on its own. Each worker sees only its share of the traffic, so ejections happen at different times in different workers: operators see intermittent 502s that no single view explains, and the drill shows the failure rate doubling when the same traffic meets fewer workers.",
		NginxFix: "Add `zone NAME 64k;` to each upstream block so that all workers share one view of the servers' health.",
		Sturdy:   "sturdy keeps one state per host shared by all connections (atomic counters), so an ejection is one event, logged once.",
		Score:    50,
	}
	for i, up := range ups {
		names[i] = up.Name
		f.Evidence = append(f.Evidence, fmt.Sprintf("%s: upstream %s has no zone", up.Dir.Pos(), up.Name))
	}
	f.Title = fmt.Sprintf("upstream %s has passive health checks but no zone: with %s each worker ejects servers on its own", list(names, 3), wdesc)
	return []Finding{f}
}

// checkIPHash: ip_hash with few servers (incident 002 ran ip_hash on two).
func checkIPHash(u *usage) []Finding {
	var out []Finding
	for _, up := range u.site.Upstreams {
		b := up.Balance
		if b == nil || len(u.locs[up]) == 0 {
			continue
		}
		clientHash := b.Name == "ip_hash" || (b.Name == "hash" && b.Arg(0) == "$remote_addr")
		n := len(primaries(up))
		if !clientHash || n > 3 || n == 0 {
			continue
		}
		out = append(out, Finding{
			ID:       "ip-hash-few-servers",
			Severity: Medium,
			Title:    fmt.Sprintf("upstream %s pins clients to servers with %s over %s: an ejection moves all of a server's clients at once", up.Name, b.Name, plural(n, "server", "servers")),
			File:     b.File, Line: b.Line,
			Incident: Inc002,
			Why:      fmt.Sprintf("With client hashing every client is bound to one server. When passive checks eject it, all of its clients (1/%d of your users) move to the remaining servers together, adding their load at the worst moment, and they keep getting errors until fail_timeout if the others are out too — incident 002 ran ip_hash on two Tomcats and every endpoint returned 502 in 10-second waves.", n),
			NginxFix: "Use least_conn or round robin if the application keeps sessions elsewhere; if affinity is needed, use `hash $cookie_SESSION consistent;` and run more than three servers.",
			Sturdy:   "sturdy's hash policy is consistent (an ejected host's clients spread over all others) and a host is ejected only on failures attributed to it.",
			Evidence: append([]string{ev(b)}, serverEvidence(up)...),
			Score:    80,
		})
	}
	return out
}
