package drill

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/fake"
)

// Incident 001: the pool behind an ingress's default_server lost every
// host; every request for a host no server block named got 502 for six
// hours, the error log grew by gigabytes, and the dead pool's retries took
// worker time from the healthy upstreams. sturdy must answer unmatched
// hosts with its sorry page (503 + Retry-After), log the episode in a
// handful of lines, and leave the healthy route untouched.

const (
	// maxEpisodeLogLines is the log volume one pool-empty episode may
	// produce: state changes (suspect, down, pool empty), not requests.
	maxEpisodeLogLines = 20
	// baselineShare of the run measures the healthy route alone before
	// traffic for the dead pool starts.
	baselineShare = 0.2
	// p99Slack is added to twice the baseline p99 before calling the
	// healthy route slowed down: loopback latencies are a millisecond, and
	// scheduling noise on two cores is not what incident 001 is about.
	p99Slack = 50 * time.Millisecond
)

const drillSorryBody = "The drill's sorry page: this site has no backend able to answer right now. Please try again in a moment.\n"

func emptySturdy(v vars) string {
	return `
admin: { listen: "off" }
listeners: [ { name: web, listen: "` + v.Listen + `" } ]
routes:
  - { name: named, hosts: [ app.drill.test ], pool: apps }
  - name: default
    default: true
    pool: default-app
    # The ingress gave up after 2s connecting and 8s reading; scaled down
    # so that a blackholed request is over within a drill.
    timeouts: { connect: 1s, response_header: 1s }
    sorry:
      status: 503
      retry_after: 17s
      body: "` + strings.TrimSuffix(drillSorryBody, "\n") + `\n"
pools:
  - name: apps
    hosts: ` + yamlHosts(v.Pools["other"]) + `
  - name: default-app
    hosts: ` + yamlHosts(v.Pools["main"]) + `
    health:
      # The incident's checks (interval=5000 rise=2 fall=5 timeout=3000),
      # scaled down by ten to fit a drill.
      active: { path: /healthz, interval: 500ms, fast_interval: 200ms, timeout: 300ms, rise: 2, fall: 2 }
`
}

// emptyNginx is the ingress: a default_server on a pool with the
// incident's passive settings and timeouts, no error_page, and a named
// server on a healthy pool. (Its active checks came from a third-party
// module; nginx's own passive checks empty the pool just as well.)
func emptyNginx(v vars) string {
	return `
upstream default_app {
` + nginxServers(v.Pools["main"], "max_fails=5 fail_timeout=10s") + `    keepalive 32;
}
upstream apps {
` + nginxServers(v.Pools["other"], "max_fails=3 fail_timeout=30s") + `}
server {
    listen ` + v.Listen + ` default_server;
    server_name _;
    location / {
        proxy_pass http://default_app;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_connect_timeout 2s;
        proxy_send_timeout 8s;
        proxy_read_timeout 8s;
    }
}
server {
    listen ` + v.Listen + `;
    server_name app.drill.test;
    location / {
        proxy_pass http://apps;
        proxy_connect_timeout 2s;
        proxy_read_timeout 8s;
    }
}
`
}

func emptyDefault(blackhole bool) func(context.Context, *env) (*Result, error) {
	return func(ctx context.Context, e *env) (*Result, error) {
		st := &stage{
			hosts: map[string]int{"main": 2, "other": 2},
			routes: []routeNeed{
				{role: "named", pool: "other", host: "app.drill.test", path: "/"},
				{role: "default", pool: "main", path: "/", unmatched: true},
			},
			sturdy: emptySturdy,
			nginx:  emptyNginx,
		}
		if skip, err := e.prepare(st); err != nil || skip != "" {
			return notApplicable(skip), err
		}
		st.pools = map[string][]string{}
		for i := range e.hosts("main") {
			ip := e.net.host(octetMain, i)
			if blackhole {
				b, err := fake.NewBlackhole(ip)
				if err != nil {
					return nil, err
				}
				e.onCleanup(b.Close)
				st.pools["main"] = append(st.pools["main"], b.Addr)
				continue
			}
			addr, err := fake.RefusingAddr(ip)
			if err != nil {
				return nil, err
			}
			st.pools["main"] = append(st.pools["main"], addr)
		}
		for i := range e.hosts("other") {
			b, err := fake.NewBackend(fmt.Sprintf("app%d", i+1), e.net.host(octetOther, i))
			if err != nil {
				return nil, err
			}
			e.onCleanup(b.Close)
			st.pools["other"] = append(st.pools["other"], b.Addr)
		}
		px, err := e.start(ctx, st)
		if err != nil {
			return nil, err
		}
		named, hasNamed := px.endpoint("named")
		dead, _ := px.endpoint("default")
		exp := px.expect("default")
		healthy, unmatched := e.innocents(3), []string{e.net.client(3), e.net.client(4), e.net.client(5)}
		baseline := time.Duration(baselineShare * float64(e.o.Duration))
		streams := []stream{{group: "bad", clients: unmatched, rate: e.o.Rate, start: baseline, offsets: e.offsets(3), timeout: clientTimeout,
			next: func(c, i int) request {
				return request{ep: dead, target: dead.path(fmt.Sprintf("index-%d.html?c=%d", i, c))}
			}}}
		if hasNamed {
			streams = append(streams, stream{group: "innocent", clients: healthy, rate: e.o.Rate, offsets: e.offsets(3), timeout: clientTimeout,
				next: func(c, i int) request { return request{ep: named, target: named.path(fmt.Sprintf("orders/%d", i))} }})
		}
		px.arm()
		run := runLoad(ctx, e.o.Duration, streams...)
		obs := px.observe()
		return judgeEmpty(run, obs, exp, baseline, hasNamed), nil
	}
}

// judgeEmpty decides incident 001 from what clients saw.
func judgeEmpty(run *loadRun, obs observation, exp expectation, baseline time.Duration, hasNamed bool) *Result {
	r := newResult(obs)
	good := run.of("innocent")
	deadAnswers := run.of("bad")
	r.Innocent = summarize("3 clients of app.drill.test", good)
	bad := summarize("3 clients of unmatched hosts", deadAnswers)
	r.Bad = &bad

	// When was the pool known to be empty? The proxy's pool_empty event,
	// or else the first sorry page.
	emptyAt := time.Duration(-1)
	if !obs.emptyAt.IsZero() {
		emptyAt = max(obs.emptyAt.Sub(run.begin), 0)
	}
	var sorry, fallback, bareBefore, bareAfter int
	var bareKinds []answer
	for _, a := range deadAnswers {
		switch {
		case isSorry(a, exp.sorry):
			sorry++
			if emptyAt < 0 {
				emptyAt = a.at
			}
		case a.status >= 200 && a.status < 300:
			fallback++ // a fallback pool or a stale copy answered
		case emptyAt >= 0 && a.at >= emptyAt:
			bareAfter++
			bareKinds = append(bareKinds, a)
		default:
			bareBefore++
		}
	}
	switch {
	case emptyAt < 0:
		r.Facts = append(r.Facts, "the pool was never reported empty")
	case bareBefore > 0:
		r.Facts = append(r.Facts, fmt.Sprintf("the pool was known empty %.1fs into the run; %d requests for unmatched hosts failed before that", emptyAt.Seconds(), bareBefore))
	default:
		r.Facts = append(r.Facts, fmt.Sprintf("the pool was known empty %.1fs into the run", emptyAt.Seconds()))
	}
	if fallback > 0 {
		r.Facts = append(r.Facts, fmt.Sprintf("%d requests for unmatched hosts were answered by a fallback pool or a stale copy", fallback))
	}

	var before, during []time.Duration
	for _, a := range good {
		if a.at < baseline {
			before = append(before, a.latency)
		} else {
			during = append(during, a.latency)
		}
	}
	p99Before, p99During := quantile(before, 0.99), quantile(during, 0.99)
	if hasNamed {
		r.Facts = append(r.Facts, fmt.Sprintf("healthy route p99 %.1fms alone, %.1fms during the episode", ms(p99Before), ms(p99During)))
	} else {
		r.Facts = append(r.Facts, "no healthy route was watched")
	}

	r.Headline = fmt.Sprintf("unmatched hosts: %s", bad.AnswersByStatus())
	if sorry > 0 {
		r.Headline = fmt.Sprintf("unmatched hosts: sorry page×%d", sorry)
		if n := len(deadAnswers) - sorry; n > 0 {
			r.Headline += fmt.Sprintf(", other×%d", n)
		}
	}
	r.Headline += fmt.Sprintf("; %d log lines", obs.logLines)
	after := 0 // requests for unmatched hosts sent once the pool was known empty
	for _, a := range deadAnswers {
		if emptyAt >= 0 && a.at >= emptyAt {
			after++
		}
	}
	var why []string
	switch {
	case sorry == 0 && fallback == 0 && emptyAt >= 0 && after == 0:
		// Nothing was asked of the empty pool: no verdict on its answers.
		why = append(why, fmt.Sprintf("the run ended before any request for an unmatched host came after the pool was known empty (%.1fs in); run longer", emptyAt.Seconds()))
	case sorry == 0 && fallback == 0:
		r.Missing = "sorry page (503 + Retry-After) for an empty pool"
		got := bad.FailuresByStatus()
		if bad.Answers["timeout"] > 0 {
			got += fmt.Sprintf(" (timeout: no answer within %s)", clientTimeout)
		}
		why = append(why, fmt.Sprintf("unmatched hosts got %s and never the sorry page (503 + Retry-After)", got))
	case bareAfter > 0:
		why = append(why, fmt.Sprintf("%d requests for unmatched hosts got a bare %s after the pool was known empty", bareAfter, summarize("", bareKinds).FailuresByStatus()))
	}
	if r.Innocent.Failures > 0 {
		why = append(why, fmt.Sprintf("the healthy route got %s", r.Innocent.FailuresByStatus()))
	}
	if len(before) > 0 && len(during) > 0 && p99During > 2*p99Before+p99Slack {
		why = append(why, fmt.Sprintf("the healthy route's p99 rose from %.1fms to %.1fms", ms(p99Before), ms(p99During)))
	}
	if obs.logLines > maxEpisodeLogLines {
		why = append(why, fmt.Sprintf("%d log lines for one episode (the bound is %d)", obs.logLines, maxEpisodeLogLines))
	}
	if len(why) > 0 {
		r.Verdict, r.Why = Fail, strings.Join(why, "; ")
		return r
	}
	r.Verdict = Pass
	r.Why = fmt.Sprintf("unmatched hosts got the sorry page (503 + Retry-After) %d times once the pool was known empty; the healthy route saw 0 errors; %d log lines", sorry+fallback, obs.logLines)
	return r
}

// isSorry reports whether a is the configured sorry page: its status, a
// Retry-After, and its body.
func isSorry(a answer, p *sorryPage) bool {
	if p == nil || a.status != p.status || a.header.Get("Retry-After") == "" {
		return false
	}
	want := p.body
	if len(want) > bodyKeep {
		want = want[:bodyKeep]
	}
	return a.body == want
}
