package drill

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/fake"
)

// Incident 004: a CDN honoured stale-if-error=86400 and served cached 200s
// to the uptime monitor for over two hours while 40% of origin requests
// failed. sturdy must bound stale serving, label every stale answer (Age
// and Cache-Status), never cache health endpoints, and count origin errors
// even while stale answers hide them.

const (
	// originCacheControl is the incident's header (max-age=120 there),
	// with a max-age short enough for copies to go stale within a drill.
	originCacheControl = "max-age=1, stale-if-error=86400"
	originMaxAge       = time.Second
	// staleTolerance absorbs transit and scheduling: an answer is stale
	// once it is older than max-age plus this. (A cache that counts age in
	// whole seconds, as nginx does, serves copies up to a second past
	// max-age as fresh; to its clients they are stale all the same.)
	staleTolerance = 250 * time.Millisecond
	// drillStaleCap is the stale-if-error bound of the built-in config and
	// the bound targets without one of their own are judged by: sturdy's
	// default of 15 minutes, scaled down to show within a drill.
	drillStaleCap = time.Second
	// warmupShare of the outage variant runs with a healthy origin, so
	// that the cache holds something.
	warmupShare = 0.25
)

func staleSturdy(v vars) string {
	return `
admin: { listen: "off" }
listeners: [ { name: web, listen: "` + v.Listen + `" } ]
routes:
  - name: cached
    default: true
    pool: origin
    # The cap is 15m by default; 1s here so that the bound shows in a drill.
    cache: { enabled: true, stale_if_error_max: ` + drillStaleCap.String() + ` }
pools:
  - name: origin
    hosts: ` + yamlHosts(v.Pools["main"]) + `
`
}

// staleNginx is a caching nginx as the postmortem describes its origin
// proxy and CDN: proxy_cache_use_stale on errors, and the origin's own
// stale-if-error honoured (nginx does since 1.11.10); passive checks with
// nginx's defaults, which never count a 502 answer against a host.
func staleNginx(v vars) string {
	return `
proxy_cache_path ` + v.Dir + `/cache levels=1:2 keys_zone=edge:4m max_size=64m inactive=1d use_temp_path=off;
upstream origin {
` + nginxServers(v.Pools["main"], "max_fails=1 fail_timeout=10s") + `}
server {
    listen ` + v.Listen + ` default_server;
    server_name _;
    location / {
        proxy_pass http://origin;
        proxy_set_header Host $host;
        proxy_cache edge;
        proxy_cache_use_stale error timeout updating http_500 http_502 http_503 http_504;
    }
}
`
}

func staleMask(outage bool) func(context.Context, *env) (*Result, error) {
	return func(ctx context.Context, e *env) (*Result, error) {
		st := &stage{
			hosts:    map[string]int{"main": 3},
			routes:   []routeNeed{{role: "cached", pool: "main", host: "shop.drill.test", path: "/", cached: true}},
			sturdy:   staleSturdy,
			nginx:    staleNginx,
			staleCap: drillStaleCap,
		}
		if skip, err := e.prepare(st); err != nil || skip != "" {
			return notApplicable(skip), err
		}
		var origins []*fake.Origin
		st.pools = map[string][]string{}
		for i := range e.hosts("main") {
			o, err := fake.NewOrigin(fmt.Sprintf("app%d", i+1), e.net.host(octetMain, i), originCacheControl)
			if err != nil {
				return nil, err
			}
			e.onCleanup(o.Close)
			origins = append(origins, o)
			st.pools["main"] = append(st.pools["main"], o.Addr)
		}
		px, err := e.start(ctx, st)
		if err != nil {
			return nil, err
		}
		ep, _ := px.endpoint("cached")
		exp := px.expect("cached")
		health := ""
		if ep.Path == "/" {
			health = "/healthz"
			if exp.bypass != "" {
				health = exp.bypass
			}
		}
		fail := func() {
			if !outage && len(origins) == 1 {
				origins[0].Fail(502, 3) // a third of the answers, as one bad instance of three
				return
			}
			if !outage {
				origins[e.pick(len(origins))].Fail(502, 0)
				return
			}
			for _, o := range origins {
				o.Fail(502, 0)
			}
		}
		warmup := time.Duration(0)
		if outage {
			warmup = time.Duration(warmupShare * float64(e.o.Duration))
		} else {
			fail()
		}
		monitor, users := e.net.client(0), []string{e.net.client(1), e.net.client(2), e.net.client(3), e.net.client(4)}
		px.arm()
		if outage {
			t := time.AfterFunc(warmup, fail)
			e.onCleanup(func() { t.Stop() })
		}
		run := runLoad(ctx, e.o.Duration,
			stream{group: "monitor", clients: []string{monitor}, rate: e.o.Rate, timeout: clientTimeout,
				next: func(_, i int) request {
					if health != "" && i%2 == 1 {
						return request{ep: ep, target: health}
					}
					return request{ep: ep, target: ep.path("")}
				}},
			stream{group: "user", clients: users, rate: e.o.Rate, offsets: e.offsets(len(users)), timeout: clientTimeout,
				next: func(c, i int) request {
					if i%2 == 0 {
						return request{ep: ep, target: ep.path("")}
					}
					return request{ep: ep, target: ep.path(fmt.Sprintf("products/%d", (c+i)%5))}
				}},
		)
		obs := px.observe()
		var produced int
		for _, o := range origins {
			produced += int(o.Errors())
		}
		cp := exp.staleCap
		if !exp.hasStaleCap {
			cp = st.staleCap
		}
		return judgeStale(run, obs, health, produced, cp, outage, warmup), nil
	}
}

// staleLabel reports whether a Cache-Status field says the answer is a
// stale stored copy, and whether any Cache-Status was present. RFC 9211
// says so with a detail naming stale serving (stale-if-error,
// stale-while-revalidate), or with fwd=stale when what the client got is not
// what the origin sent: no fwd-status (the origin was not reached) or a
// fwd-status other than the answer's own status. An origin's 502 passed on
// with "fwd=stale; fwd-status=502" is the truth, not a copy.
func staleLabel(cs string, status int) (stale, present bool) {
	if cs == "" {
		return false, false
	}
	for _, member := range strings.Split(cs, ",") {
		fwdStale, fwdStatus := false, 0
		for _, param := range strings.Split(member, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(param), "=")
			v = strings.Trim(v, `"`)
			switch k {
			case "fwd":
				fwdStale = v == "stale"
			case "fwd-status":
				fwdStatus, _ = strconv.Atoi(v)
			case "detail":
				if strings.Contains(v, "stale") {
					return true, true
				}
			}
		}
		if fwdStale && fwdStatus != status && fwdStatus != http.StatusNotModified {
			return true, true
		}
	}
	return false, true
}

// judgeStale decides incident 004 from what the monitor and users saw.
func judgeStale(run *loadRun, obs observation, health string, produced int, staleCap time.Duration, outage bool, warmup time.Duration) *Result {
	r := newResult(obs)
	all := append(run.of("monitor"), run.of("user")...)
	r.Innocent = summarize("monitor + 4 users", all)
	bound := originMaxAge + staleCap + staleTolerance
	s := &Stale{BoundSeconds: bound.Seconds(), OriginErrors: produced, Counted: -1}
	r.Stale = s

	seen := map[string]bool{}
	var anyLabel, anyCopy bool
	var homeAnswers, homeStale, tooOld int
	var maxAge time.Duration
	for _, a := range run.answers { // arrival order: a serial's first sighting comes first
		if a.group != "monitor" && a.group != "user" {
			continue
		}
		serial := a.header.Get(fake.OriginSerialHeader)
		repeated := serial != "" && seen[serial]
		seen[serial] = true
		anyCopy = anyCopy || repeated
		var age time.Duration
		if born, err := strconv.ParseInt(a.header.Get(fake.OriginBornHeader), 10, 64); err == nil {
			age = run.begin.Add(a.at + a.latency).Sub(time.Unix(0, born))
		}
		labelled, present := staleLabel(a.header.Get("Cache-Status"), a.status)
		anyLabel = anyLabel || present
		// Only a cache keeps an answer longer than its max-age.
		provably := age > originMaxAge+staleTolerance
		isStale := labelled || provably
		if health != "" && a.group == "monitor" && a.target == health {
			if repeated || provably || labelled || strings.Contains(a.header.Get("Cache-Status"), "hit") {
				s.HealthCached++
			}
			continue
		}
		if a.group == "monitor" {
			homeAnswers++
			if isStale {
				homeStale++
			}
		}
		if !isStale {
			continue
		}
		if labelled && a.header.Get("Age") != "" {
			s.Labelled++
		} else {
			s.Unlabelled++
		}
		maxAge = max(maxAge, age)
		if age > bound {
			tooOld++
		}
	}
	if homeAnswers > 0 {
		s.MonitorFraction = math.Round(float64(homeStale)/float64(homeAnswers)*1000) / 1000
	}
	s.MaxAgeSeconds = maxAge.Round(10 * time.Millisecond).Seconds()
	stale := s.Labelled + s.Unlabelled
	r.Facts = append(r.Facts, fmt.Sprintf("the monitor got %.0f%% stale home-page answers (%d of %d)", 100*s.MonitorFraction, homeStale, homeAnswers))
	if outage {
		r.Facts = append(r.Facts, fmt.Sprintf("every origin failed from %.1fs on", warmup.Seconds()))
	}
	if c := obs.counters; c != nil {
		s.Counted = c.upstream5xx
		r.Facts = append(r.Facts, fmt.Sprintf("the origin answered %d errors; the proxy counted %d failed attempts and %d failed cache fetches (%d hidden by stale copies)", produced, c.upstream5xx, c.originErrors, c.hidden))
	} else {
		r.Facts = append(r.Facts, fmt.Sprintf("the origin answered %d errors; %s", produced, obs.noCounters))
	}

	r.Headline = fmt.Sprintf("stale answers labelled: %d of %d; monitor %.0f%% stale", s.Labelled, stale, 100*s.MonitorFraction)
	if !anyLabel && !anyCopy && stale == 0 {
		r.Verdict, r.Missing = NotSupported, "route cache"
		r.Why = "cache not wired: no answer carried Cache-Status and none came from a cache"
		return r
	}
	var why []string
	if s.Unlabelled > 0 {
		why = append(why, fmt.Sprintf("%d of %d stale answers were not labelled (Cache-Status and Age)", s.Unlabelled, stale))
	}
	if tooOld > 0 {
		why = append(why, fmt.Sprintf("stale copies up to %.1fs old were served, past the %s bound (max-age + a %s stale-if-error cap)", maxAge.Seconds(), bound, staleCap))
	}
	if s.HealthCached > 0 {
		why = append(why, fmt.Sprintf("%s was answered from the cache %d times", health, s.HealthCached))
	}
	switch c := obs.counters; {
	case c == nil && !obs.countersPending:
		if produced > 0 {
			why = append(why, fmt.Sprintf("the origin's %d errors reached no counter", produced))
		}
	case c != nil && c.upstream5xx < produced:
		why = append(why, fmt.Sprintf("only %d of the origin's %d errors reached the counters", c.upstream5xx, produced))
	}
	if len(why) > 0 {
		r.Verdict, r.Why = Fail, strings.Join(why, "; ")
		return r
	}
	verified := fmt.Sprintf("%s, all labelled, none older than %.1fs (bound %s)", plural(stale, "stale answer"), maxAge.Seconds(), bound)
	if stale == 0 {
		verified = "no stale answers"
	}
	if health != "" {
		verified += "; " + health + " never cached"
	}
	if obs.counters == nil {
		r.Verdict, r.Missing = NotSupported, "origin error counters"
		r.Why = "origin error counters not exposed (" + obs.noCounters + "); verified: " + verified
		return r
	}
	r.Verdict = Pass
	r.Why = fmt.Sprintf("%s; all %d origin errors were counted", verified, produced)
	return r
}
