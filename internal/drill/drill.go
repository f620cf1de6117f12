package drill

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"strings"
	"time"
)

// Options tune a drill run. The zero value runs the defaults.
type Options struct {
	// Duration is each scenario's load phase. Default 5s, which keeps a
	// full run against sturdy under a minute.
	Duration time.Duration
	// Rate is requests per second per innocent client. Default 20. Bad
	// clients send at a multiple of it where the incident says so (the
	// scanner of 000 sends 5× as fast).
	Rate float64
	// Seed makes runs repeatable: which address is the bad client, the
	// order of requests, the clients' phases. Default 1.
	Seed uint64
	// Progress, when set, gets a line as each scenario starts.
	Progress io.Writer
}

// Defaults.
const (
	DefaultDuration = 5 * time.Second
	DefaultRate     = 20
	DefaultSeed     = 1
)

func (o Options) withDefaults() Options {
	if o.Duration <= 0 {
		o.Duration = DefaultDuration
	}
	if o.Rate <= 0 {
		o.Rate = DefaultRate
	}
	if o.Seed == 0 {
		o.Seed = DefaultSeed
	}
	return o
}

// Scenario is one incident re-enacted (or a variant of it).
type Scenario struct {
	// Name is "base" or "base/variant", e.g. "waf-scanner/reset".
	Name string
	// Incident is the postmortem's number, e.g. "000".
	Incident string
	// Summary says what is re-enacted, in one line.
	Summary string

	run func(ctx context.Context, e *env) (*Result, error)
}

// Base is the scenario name without its variant.
func (s Scenario) Base() string {
	base, _, _ := strings.Cut(s.Name, "/")
	return base
}

// Scenarios lists every scenario in the order a run takes them.
func Scenarios() []Scenario {
	return []Scenario{
		{Name: "waf-scanner", Incident: "000", Summary: "a WAF between proxy and backends answers 502 to every request of one scanning client", run: wafScanner(false)},
		{Name: "waf-scanner/reset", Incident: "000", Summary: "the same, but the WAF resets the scanner's connections instead of answering", run: wafScanner(true)},
		{Name: "empty-default", Incident: "001", Summary: "the pool behind the default route loses every host (connections refused) while a second route stays healthy", run: emptyDefault(false)},
		{Name: "empty-default/blackhole", Incident: "001", Summary: "the same, but the dead hosts accept connections and never answer", run: emptyDefault(true)},
		{Name: "slow-route", Incident: "002", Summary: "one report route is slower than its timeout on every backend of a hash-balanced pool", run: slowRoute},
		{Name: "malformed-url", Incident: "003", Summary: "one client sends raw non-ASCII bytes in URLs; Node-like backends hang up on them without answering", run: malformedURL},
		{Name: "stale-mask", Incident: "004", Summary: "a monitor polls a cached page (max-age=1, stale-if-error=86400) while one of three backends answers 502", run: staleMask(false)},
		{Name: "stale-mask/outage", Incident: "004", Summary: "the same, but every backend fails after a warm-up: how long does the cache hide the outage?", run: staleMask(true)},
	}
}

// Select picks scenarios by name: a base name ("waf-scanner") selects it
// and its variants, a full name ("waf-scanner/reset") only that one. No
// names selects all.
func Select(names []string) ([]Scenario, error) {
	all := Scenarios()
	if len(names) == 0 {
		return all, nil
	}
	want := map[string]bool{}
	for _, n := range names {
		found := false
		for _, s := range all {
			if s.Name == n || s.Base() == n {
				want[s.Name], found = true, true
			}
		}
		if !found {
			var known []string
			for _, s := range all {
				known = append(known, s.Name)
			}
			return nil, fmt.Errorf("unknown scenario %q; known: %s", n, strings.Join(known, ", "))
		}
	}
	var out []Scenario
	for _, s := range all {
		if want[s.Name] {
			out = append(out, s)
		}
	}
	return out, nil
}

// Run runs scenarios one after another against t and returns a Result for
// each. It stops early, with the results so far, when ctx ends or a
// scenario cannot be set up.
func Run(ctx context.Context, t Target, scenarios []Scenario, o Options) ([]*Result, error) {
	o = o.withDefaults()
	var out []*Result
	for i, sc := range scenarios {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "drill: %s against %s (%s)...\n", sc.Name, t.Name(), o.Duration)
		}
		r, err := RunOne(ctx, t, sc, o, i)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// RunOne runs one scenario; run numbers the runs of one process so that
// each gets its own loopback addresses.
func RunOne(ctx context.Context, t Target, sc Scenario, o Options, run int) (*Result, error) {
	o = o.withDefaults()
	h := fnv.New64a()
	h.Write([]byte(sc.Name))
	e := &env{
		o:      o,
		target: t,
		net:    newAddrs(run),
		rng:    rand.New(rand.NewPCG(o.Seed, h.Sum64())),
	}
	start := time.Now()
	r, err := func() (*Result, error) {
		// Whatever happens, stop what the scenario started (an nginx
		// process must not outlive the drill).
		defer e.cleanup()
		return sc.run(ctx, e)
	}()
	if err == nil && ctx.Err() != nil {
		// The load was cut short: its figures would judge nothing.
		err = ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sc.Name, err)
	}
	r.Scenario, r.Incident, r.Target = sc.Name, sc.Incident, t.Name()
	r.Seconds = time.Since(start).Round(time.Millisecond).Seconds()
	r.Facts = append(e.lay.notes, r.Facts...)
	return r, nil
}

// env is what a scenario run works with: options, the target, its address
// plan, its seeded randomness, and what it started.
type env struct {
	o      Options
	target Target
	net    addrs
	rng    *rand.Rand
	lay    layout

	closers []func() // stopped in reverse order by cleanup
}

// onCleanup registers f to run when the scenario ends.
func (e *env) onCleanup(f func()) { e.closers = append(e.closers, f) }

func (e *env) cleanup() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
	e.closers = nil
}

// prepare asks the target for its layout. A non-empty string means the
// scenario does not apply; the caller returns notApplicable with it.
func (e *env) prepare(st *stage) (string, error) {
	st.net = e.net
	lay, err := e.target.layout(st)
	if err != nil {
		return "", err
	}
	e.lay = lay
	return lay.skip, nil
}

// hosts is how many fake hosts a pool role gets.
func (e *env) hosts(role string) int { return e.lay.hosts[role] }

// start starts the proxy; it is closed at cleanup, before the fakes
// started earlier.
func (e *env) start(ctx context.Context, st *stage) (proxy, error) {
	px, err := e.target.start(ctx, st)
	if err != nil {
		return nil, err
	}
	e.onCleanup(px.close)
	return px, nil
}

// pick returns a seeded choice in [0, n).
func (e *env) pick(n int) int { return e.rng.IntN(n) }

// offsets spreads n clients' first requests over one interval.
func (e *env) offsets(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = e.rng.Float64()
	}
	return out
}

// innocents returns n innocent client addresses.
func (e *env) innocents(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = e.net.client(i)
	}
	return out
}

// badClient returns the bad client's address, chosen by the seed among ten.
func (e *env) badClient() string { return e.net.bad(e.pick(10)) }

func notApplicable(why string) *Result { return &Result{Verdict: NotApplicable, Why: why} }
