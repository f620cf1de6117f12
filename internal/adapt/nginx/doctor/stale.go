package doctor

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/adapt/nginx/accesslog"
	"github.com/sturdyproxy/sturdy/internal/adapt/nginx/errlog"
)

// staleFindings: the cache answered while the origin failed (incident 004),
// from the config and error log, the access log, or both.
func staleFindings(site *nginx.Site, el *errlog.Result, al *accesslog.Result) []Finding {
	type target struct {
		up    *nginx.Upstream
		stale *nginx.Directive
	}
	var targets []target
	if site != nil {
		seen := map[*nginx.Upstream]bool{}
		for _, srv := range site.Servers {
			for _, l := range srv.Proxied() {
				sd, _ := staleAt(l)
				if sd == nil || cacheAt(l) == nil || l.Target.Upstream == nil || seen[l.Target.Upstream] {
					continue
				}
				seen[l.Target.Upstream] = true
				targets = append(targets, target{l.Target.Upstream, sd})
			}
		}
	}
	accessStale := al != nil && al.Stale >= 10
	var out []Finding
	for _, t := range targets {
		var bs []errlog.BackendStat
		errs := 0
		var from, to time.Time
		if el != nil {
			for _, b := range el.Backends {
				if b.Upstream != t.up.Name {
					continue
				}
				bs = append(bs, b)
				errs += b.Errors
				if from.IsZero() || b.First.Before(from) {
					from = b.First
				}
				if b.Last.After(to) {
					to = b.Last
				}
			}
		}
		sustained := errs >= 10 && to.Sub(from) >= 5*time.Minute
		if !sustained && !accessStale {
			continue
		}
		f := staleFinding(t.stale.File, t.stale.Line, al)
		f.Evidence = append([]string{ev(t.stale)}, f.Evidence...)
		if sustained {
			sort.Slice(bs, func(i, j int) bool { return bs[i].Errors > bs[j].Errors })
			f.Title = fmt.Sprintf("the cache kept answering for upstream %s while it failed: %d upstream errors from %s to %s (%s), %d%% of them on %s", t.up.Name, errs, from.Format("15:04"), to.Format("15:04"), fmtSpan(to.Sub(from)), pct(bs[0].Errors, errs), bs[0].Addr)
			if accessStale {
				f.Title += fmt.Sprintf("; %d answers were served STALE", al.Stale)
			}
			f.Evidence = append(f.Evidence, bs[0].Examples...)
		}
		out = append(out, f)
		accessStale = false // reported with this upstream
	}
	if accessStale {
		f := staleFinding(al.Files[0], 0, al)
		out = append(out, f)
	}
	return out
}

func staleFinding(file string, line int, al *accesslog.Result) Finding {
	f := Finding{
		ID:       "stale-hid-outage",
		Severity: High,
		File:     file, Line: line,
		Incident: Inc004,
		Why:      "Stale answers hid the failure from users and from the monitors: checks that go through the cache see 200 while the origin fails, so nobody is alerted (incident 004: over two hours, found by support tickets, with 40% of origin requests failing).",
		NginxFix: "Bound stale serving (`Cache-Control: stale-if-error=900` from the origin; drop error/http_5xx from proxy_cache_use_stale), log $upstream_cache_status and alert on STALE answers and on the origin's 5xx rate, and point monitors at an uncached readiness endpoint.",
		Sturdy:   "sturdy caps stale serving (default 15 minutes), labels it with Age and Cache-Status, counts origin errors whether or not a stale answer hid them, and raises \"serving stale because the origin fails\" as an event, a metric and an alert.",
		Score:    scoreStale,
	}
	if al != nil && al.Stale > 0 {
		f.Title = fmt.Sprintf("%d answers were served STALE from the cache between %s and %s while the origin failed", al.Stale, al.StaleFirst.Format("15:04"), al.StaleLast.Format("15:04"))
		f.Evidence = append(f.Evidence, fmt.Sprintf("access log: %d STALE answers from %s to %s; most on %s", al.Stale, al.StaleFirst.Format("2006/01/02 15:04"), al.StaleLast.Format("15:04"), accessCounts(al.StaleRoutes)))
		if al.MonitorCached > 0 {
			f.Evidence = append(f.Evidence, fmt.Sprintf("access log: %d answers to monitors or health paths came from the cache, e.g. %s", al.MonitorCached, al.MonitorExample))
		}
	}
	return f
}

func accessCounts(cs []accesslog.Count) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%s %d", c.Key, c.N)
	}
	return strings.Join(parts, ", ")
}
