package drill

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Verdict is a scenario's outcome.
type Verdict string

// Verdicts.
const (
	// Pass: clients saw what design.md promises.
	Pass Verdict = "pass"
	// Fail: they did not; Why says what they saw instead.
	Fail Verdict = "fail"
	// NotSupported: the target lacks a feature the scenario needs to judge
	// (e.g. the cache is not wired); Why names it. Never a pass.
	NotSupported Verdict = "not supported"
	// NotApplicable: an operator config has nothing the incident needs
	// (no cached route for incident 004); Why says what is missing.
	NotApplicable Verdict = "n/a"
)

// Result is one scenario run against one target.
type Result struct {
	Scenario string  `json:"scenario"` // e.g. "waf-scanner/reset"
	Incident string  `json:"incident"` // e.g. "000"
	Target   string  `json:"target"`
	Verdict  Verdict `json:"verdict"`
	// Why explains the verdict in one line, in operator words.
	Why string `json:"why"`
	// Headline is the scenario's key figure in a few words, for
	// side-by-side tables (e.g. "innocent clients: 502×498").
	Headline string `json:"headline"`
	// Missing names the feature whose absence decided the verdict, when the
	// target showed no sign of having it (tests skip on it).
	Missing string `json:"missing_feature,omitempty"`

	// Innocent are the clients the incident hurt without cause.
	Innocent Group `json:"innocent"`
	// Bad is the incident's cause: the blocked scanner, traffic for the
	// dead default pool, callers of the slow route, the sender of malformed
	// URLs. Nil when the incident has none (004).
	Bad *Group `json:"bad,omitempty"`

	// Ejections counts hosts taken out of rotation.
	Ejections int `json:"ejections"`
	// PoolEmptySeconds is how long a pool had no host in rotation;
	// PoolEmptyEstimated marks an estimate (nginx: seconds with
	// "no live upstreams" in its error log).
	PoolEmptySeconds   float64 `json:"pool_empty_seconds"`
	PoolEmptyEstimated bool    `json:"pool_empty_estimated,omitempty"`
	// Stale is set by the stale-mask scenarios.
	Stale *Stale `json:"stale,omitempty"`
	// LogLines counts the proxy's log lines during the episode (nginx: its
	// error log at the default level, error).
	LogLines int `json:"log_lines"`
	// Facts are further measurements, in words.
	Facts []string `json:"facts,omitempty"`
	// Seconds is the scenario's wall time, setup and teardown included.
	Seconds float64 `json:"seconds"`

	// Log holds the first of the proxy's log lines (for -v).
	Log []string `json:"-"`
}

// Group is what one group of clients sent and got.
type Group struct {
	// Who describes the clients, e.g. "5 clients" or "scanner 127.10.103.1".
	Who      string `json:"who"`
	Requests int    `json:"requests"`
	// Answers counts answers by status ("200", "502") or, when there was no
	// HTTP answer, by what happened ("timeout", "reset", "closed",
	// "refused", "error").
	Answers map[string]int `json:"answers"`
	// Failures counts answers that are 5xx or no answer at all.
	Failures int     `json:"failures"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
	MaxMs    float64 `json:"max_ms"`
}

// FailuresByStatus formats the failing answers, e.g. "502×120 timeout×3",
// or "0".
func (g Group) FailuresByStatus() string {
	var parts []string
	for _, k := range sortedKeys(g.Answers) {
		if isFailure(k) {
			parts = append(parts, fmt.Sprintf("%s×%d", k, g.Answers[k]))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, " ")
}

// AnswersByStatus formats every answer, e.g. "200×40 502×3".
func (g Group) AnswersByStatus() string {
	var parts []string
	for _, k := range sortedKeys(g.Answers) {
		parts = append(parts, fmt.Sprintf("%s×%d", k, g.Answers[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// Stale is what a monitor behind a cache saw (incident 004).
type Stale struct {
	// Labelled and Unlabelled split the stale answers: labelled ones said
	// so in Cache-Status and carried Age.
	Labelled   int `json:"labelled"`
	Unlabelled int `json:"unlabelled"`
	// MonitorFraction is the share of the monitor's home-page answers that
	// were stale.
	MonitorFraction float64 `json:"monitor_fraction"`
	// MaxAgeSeconds is the oldest stale answer's true age (by the origin's
	// clock); BoundSeconds is the most the scenario allows.
	MaxAgeSeconds float64 `json:"max_age_seconds"`
	BoundSeconds  float64 `json:"bound_seconds"`
	// HealthCached counts health-check answers that came from a cache.
	HealthCached int `json:"health_cached"`
	// OriginErrors counts error answers the origin gave; Counted is how
	// many of them the proxy's own counters show (-1: it has none).
	OriginErrors int `json:"origin_errors"`
	Counted      int `json:"origin_errors_counted"`
}

// isFailure reports whether an answer key is a failure: a 5xx status or no
// HTTP answer at all.
func isFailure(k string) bool {
	n, err := strconv.Atoi(k)
	return err != nil || n >= 500
}

// sortedKeys orders statuses numerically, then transport failures by name.
func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, errA := strconv.Atoi(keys[i])
		b, errB := strconv.Atoi(keys[j])
		switch {
		case errA == nil && errB == nil:
			return a < b
		case errA == nil:
			return true
		case errB == nil:
			return false
		}
		return keys[i] < keys[j]
	})
	return keys
}

// newResult starts a Result with what the proxy reported about itself.
func newResult(o observation) *Result {
	return &Result{
		Ejections:          o.ejections,
		PoolEmptySeconds:   o.poolEmpty.Round(time.Millisecond).Seconds(),
		PoolEmptyEstimated: o.estimated,
		LogLines:           o.logLines,
		Log:                o.lines,
	}
}

// plural writes "1 answer" or "3 answers".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// errorsOrNone formats a group's failures, or "0 errors".
func errorsOrNone(g Group) string {
	if g.Failures == 0 {
		return "0 errors"
	}
	return g.FailuresByStatus()
}
