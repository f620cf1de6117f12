package drill

import (
	"context"
	"strings"
	"time"
)

// Target is the proxy under test. It builds one proxy per scenario run and
// says how to reach each route the scenario asked for.
type Target interface {
	// Name says what is drilled, e.g. "sturdy (built-in configs)".
	Name() string
	// layout says how many fake hosts each pool role gets, or why the
	// scenario cannot be re-enacted against this target.
	layout(st *stage) (layout, error)
	// start runs a proxy in front of st.pools. It must not return before
	// the proxy accepts connections.
	start(ctx context.Context, st *stage) (proxy, error)
}

// layout is a target's answer to a stage before any fake is started.
type layout struct {
	// hosts is the number of fake hosts per pool role.
	hosts map[string]int
	// skip, when set, says why this scenario does not apply to the target
	// (an operator config with no cached route cannot re-enact incident 004).
	skip string
	// notes are facts about how the scenario was mapped onto the target.
	notes []string
}

// stage is what a scenario asks of a target: pools of fake hosts (by role,
// "main" is the incident's pool), routes on them (by role), and the
// configs to use when the target has none of its own.
type stage struct {
	scenario string
	// hosts is the default host count per pool role.
	hosts map[string]int
	// routes the scenario sends requests to.
	routes []routeNeed
	// sturdy returns the built-in sturdy config (YAML).
	sturdy func(v vars) string
	// nginx returns what goes inside nginx's http {} block.
	nginx func(v vars) string
	// net is the scenario's address plan.
	net addrs
	// staleCap is the stale-if-error bound the scenario judges a target
	// by when the target has no bound of its own (the built-in config
	// uses the same value).
	staleCap time.Duration

	// pools holds the fake hosts' addresses by pool role, filled by the
	// scenario after layout.
	pools map[string][]string
}

// routeNeed is one route a scenario sends requests to. Built-in configs
// name their routes after the role and use host and path as given;
// operator configs are searched for a route that fits.
type routeNeed struct {
	role string
	pool string // pool role
	host string // Host header ("" is unused)
	path string // path prefix, "/..."
	// unmatched: requests carry a Host no route names, so the default
	// route answers them (incident 001).
	unmatched bool
	// cached: the route must be cache-enabled (incident 004).
	cached bool
	// slow: the route whose responses will be slower than its timeout
	// (incident 002); fast is its healthy neighbour on the same pool.
	slow, fast bool
}

// vars are what configs are rendered with.
type vars struct {
	// Listen is the proxy's listen address: "IP:0" for sturdy, "IP:PORT"
	// for nginx.
	Listen string
	// Pools holds host addresses by pool role.
	Pools map[string][]string
	// Dir is nginx's prefix directory ("" for sturdy).
	Dir string
}

// proxy is one running proxy for one scenario run.
type proxy interface {
	// endpoint says where requests for a route role go; ok is false when
	// the target has no such route.
	endpoint(role string) (endpoint, bool)
	// expect says what the proxy was configured to do on a route role.
	expect(role string) expectation
	// arm marks the start of the episode: log lines and events are
	// counted from here.
	arm()
	// observe reports what the proxy did since arm. Call once, after the
	// load ended and before close.
	observe() observation
	// close stops the proxy and everything the target started for it.
	close()
}

// endpoint is how a client reaches one route.
type endpoint struct {
	Addr string // host:port to connect to
	Host string // Host header
	Path string // path prefix
}

// path returns the request target for rel under the prefix.
func (e endpoint) path(rel string) string {
	return strings.TrimSuffix(e.Path, "/") + "/" + strings.TrimPrefix(rel, "/")
}

// expectation is what a proxy was configured to do on a route.
type expectation struct {
	// sorry is the configured sorry page; nil when there is none.
	sorry *sorryPage
	// responseTimeout bounds the wait for response headers (0: unknown).
	responseTimeout time.Duration
	// tries is the most attempts per request (0: unknown).
	tries int
	// staleCap bounds stale-if-error answers when hasStaleCap is set (0
	// then means stale is off). Without a bound of its own (nginx honours
	// whatever the origin asks), the scenario's bound is used to judge.
	staleCap    time.Duration
	hasStaleCap bool
	// bypass is a path the proxy never caches (health checks), "" if none.
	bypass string
}

// sorryPage is a route's configured last answer.
type sorryPage struct {
	status int
	body   string
}

// observation is what a proxy did during the episode, from its own
// reports (events, counters, log).
type observation struct {
	// ejections counts hosts taken out of rotation (passively or by
	// active checks).
	ejections int
	// poolEmpty is how long a pool had no host in rotation; estimated
	// means it was inferred (nginx: seconds with "no live upstreams").
	poolEmpty time.Duration
	estimated bool
	// emptyAt is when the first pool went empty (zero: never, or unknown).
	emptyAt time.Time
	// logLines counts the proxy's log lines; lines holds the first ones.
	logLines int
	lines    []string
	// clientsAttributed and routesDegraded count those events.
	clientsAttributed int
	routesDegraded    int
	// counters are the proxy's own upstream error counts; nil when it
	// exposes none, and then noCounters says why. countersPending marks a
	// gap a later build may fill (sturdy), rather than a missing feature
	// (nginx).
	counters        *counters
	noCounters      string
	countersPending bool
}

// counters are a proxy's counts of origin failures, read from the proxy.
type counters struct {
	// upstream5xx counts upstream attempts answered with a failing status
	// on the pool, retried or not.
	upstream5xx int
	// originErrors counts failed origin fetches the cache saw, including
	// those hidden by stale answers.
	originErrors int
	// hidden counts origin errors clients did not see because a stale copy
	// answered.
	hidden int
}
