package doctor

import (
	"fmt"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/adapt/nginx/accesslog"
)

// Checks of what incident 004 taught: stale answers must be bounded and
// health checks must never be answered from the cache.

// cacheAt returns the proxy_cache directive in effect at l, nil when the
// location does not cache.
func cacheAt(l *nginx.Location) *nginx.Directive {
	d := l.Get1("proxy_cache")
	if d == nil || d.Arg(0) == "off" {
		return nil
	}
	return d
}

// staleAt returns proxy_cache_use_stale in effect at l when it serves stale
// answers on origin errors, and the conditions that do.
func staleAt(l *nginx.Location) (*nginx.Directive, []string) {
	d := l.Get1("proxy_cache_use_stale")
	if d == nil {
		return nil, nil
	}
	var conds []string
	for _, a := range d.Args {
		if a == "error" || a == "timeout" || a == "updating" || a == "invalid_header" || strings.HasPrefix(a, "http_5") {
			conds = append(conds, a)
		}
	}
	if len(conds) == 0 {
		return nil, nil
	}
	return d, conds
}

// cachePath finds the proxy_cache_path that defines keys_zone=name.
func cachePath(site *nginx.Site, name string) *nginx.Directive {
	if site.HTTP == nil {
		return nil
	}
	for _, d := range site.HTTP.Local("proxy_cache_path") {
		for _, a := range d.Args {
			if z, ok := strings.CutPrefix(a, "keys_zone="); ok && strings.SplitN(z, ":", 2)[0] == name {
				return d
			}
		}
	}
	return nil
}

func checkCache(u *usage) []Finding {
	var out []Finding
	staleSeen := map[*nginx.Directive]*Finding{}
	var order []*nginx.Directive
	for _, srv := range u.site.Servers {
		for _, l := range srv.Proxied() {
			c := cacheAt(l)
			if c == nil {
				continue
			}
			sd, conds := staleAt(l)
			if accesslog.IsHealthPath(l.Path) {
				f := Finding{
					ID:       "health-path-cached",
					Severity: High,
					Title:    fmt.Sprintf("health endpoint %s of %s is answered through proxy_cache %s: checks can get cached answers while the backends fail", l.Path, srv.Label(), c.Arg(0)),
					File:     l.Dir.File, Line: l.Dir.Line,
					Incident: Inc004,
					Why:      "A health or uptime check that the cache can answer proves only that the cache has a copy. In incident 004 the monitor saw 200 for over two hours while 40% of origin requests failed, because the checked URL was served from the cache.",
					NginxFix: fmt.Sprintf("In `location %s` set `proxy_cache off;` and `add_header Cache-Control \"no-store\" always;`, and point monitors at an endpoint that checks real readiness (database, queues), bypassing any CDN.", l.Path),
					Sturdy:   "sturdy never caches health endpoints, and counts origin errors (and alerts on them) even while a stale answer hides them from clients.",
					Evidence: []string{ev(l.Dir), ev(c)},
					Score:    260,
				}
				if sd != nil {
					f.Evidence = append(f.Evidence, ev(sd))
				}
				out = append(out, f)
			}
			if sd == nil {
				continue
			}
			if f, ok := staleSeen[sd]; ok {
				f.Evidence = append(f.Evidence, ev(l.Dir))
				continue
			}
			f := &Finding{
				ID:       "stale-unbounded",
				Severity: Medium,
				Title:    fmt.Sprintf("proxy_cache_use_stale %s serves stale answers for as long as the origin keeps failing: nginx puts no bound on their age", strings.Join(conds, " ")),
				File:     sd.File, Line: sd.Line,
				Incident: Inc004,
				Why:      "Stale answers on error are good for a blip, but nginx serves them with no age limit (the cache's inactive= evicts only entries nobody asks for, so a page a monitor polls every minute never expires) and without telling anyone: users and monitors see 200 while the origin fails for hours, as in incident 004 (stale-if-error=86400, over two hours unnoticed).",
				NginxFix: "Keep proxy_cache_use_stale for short outages but bound it: send `Cache-Control: stale-if-error=900` from the origin (nginx honours it) and drop error/http_5xx from proxy_cache_use_stale, add `$upstream_cache_status` to the access log and alert on STALE answers and on origin 5xx rates.",
				Sturdy:   "sturdy caps stale-if-error and stale-while-revalidate (default 15 minutes), labels every cached answer with Age and Cache-Status, and makes \"serving stale because the origin fails\" an event, a metric and an alert.",
				Evidence: []string{ev(sd), ev(c)},
				Score:    150,
			}
			if p := cachePath(u.site, c.Arg(0)); p != nil {
				f.Evidence = append(f.Evidence, ev(p))
			}
			f.Evidence = append(f.Evidence, ev(l.Dir))
			staleSeen[sd] = f
			order = append(order, sd)
		}
	}
	for _, d := range order {
		out = append(out, *staleSeen[d])
	}
	return out
}
