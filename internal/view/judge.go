package view

import (
	"fmt"
	"math"
)

// The thresholds of the verdicts, documented in docs/observability.md
// ("When is a route a problem?"). A route is judged by its last minute of
// answers, a host by its last minute of attempts next to its peers'.
const (
	// RouteCriticalRatio is the share of 5xx answers at which a route is
	// failing its clients: critical. 5xx answers to clients whose
	// failures are their own (attributed clients) are left out.
	RouteCriticalRatio = 0.05
	// RouteCriticalMin is how many 5xx answers it takes, besides the
	// ratio, to be critical; fewer make a warning (one 503 in ten answers
	// of a quiet route deserves a look, not a page).
	RouteCriticalMin = 5
	// RouteWarningRatio and AboveNormal: a share of at least 1% that is
	// at least three times the route's share before this minute is
	// clearly above normal: a warning.
	RouteWarningRatio = 0.01
	AboveNormal       = 3
	// NormalMinAnswers is how many answers before this minute it takes
	// to know a route's normal share; with fewer, normal is taken as 0.
	NormalMinAnswers = 100

	// HostWarningRatio, HostWarningMin and HostPeerFactor: a host with at
	// least 5% failed attempts, at least 5 of them, and at least twice the
	// failure share of its pool's other hosts together has failures of
	// its own: a warning. Failures every host shares point at a client, a
	// request or a route, and show on the route.
	HostWarningRatio = 0.05
	HostWarningMin   = 5
	HostPeerFactor   = 2
)

// Judge fills the verdicts of every route and host of st, and the ratios
// they are based on.
func Judge(st *Status) {
	for i := range st.Routes {
		JudgeRoute(&st.Routes[i])
	}
	for i := range st.Pools {
		JudgePool(&st.Pools[i])
	}
}

// JudgeRoute sets r.Recent.ErrorRatio and r.Verdict.
func JudgeRoute(r *Route) {
	rec := &r.Recent
	answers, errs := answered(rec.Requests)
	answers -= min(rec.ClientErrors, answers)
	errs -= min(rec.ClientErrors, errs)
	rec.ErrorRatio = ratio(errs, answers)
	r.Verdict = Verdict{Level: LevelOK}
	if errs == 0 {
		return
	}
	allAnswers, allErrs := answered(r.Requests)
	allAnswers -= min(r.ClientErrors, allAnswers)
	allErrs -= min(r.ClientErrors, allErrs)
	before, beforeErrs := allAnswers-min(allAnswers, answers), allErrs-min(allErrs, errs)
	normal := 0.0
	if before >= NormalMinAnswers {
		normal = ratio(beforeErrs, before)
	}
	what := fmt.Sprintf("%s of answers were 5xx in the last %s (%d of %d)", percent(rec.ErrorRatio), seconds(rec.Seconds), errs, answers)
	if normal > 0 {
		what += "; normally " + percent(normal)
	}
	switch {
	case rec.ErrorRatio >= RouteCriticalRatio && errs >= RouteCriticalMin:
		r.Verdict = Verdict{Level: LevelCritical, Reason: what}
	case rec.ErrorRatio >= RouteCriticalRatio:
		r.Verdict = Verdict{Level: LevelWarning, Reason: what}
	case rec.ErrorRatio >= RouteWarningRatio && rec.ErrorRatio >= AboveNormal*normal:
		r.Verdict = Verdict{Level: LevelWarning, Reason: what + ", clearly above normal"}
	}
}

// JudgePool sets each host's Recent.FailureRatio and Verdict.
func JudgePool(p *Pool) {
	var attempts, failures uint64
	for i := range p.Hosts {
		h := &p.Hosts[i].Recent
		h.FailureRatio = ratio(h.Failures, h.Attempts)
		attempts += h.Attempts
		failures += h.Failures
	}
	for i := range p.Hosts {
		h := &p.Hosts[i]
		rec := h.Recent
		h.Verdict = Verdict{Level: LevelOK}
		if rec.Failures < HostWarningMin || rec.FailureRatio < HostWarningRatio {
			continue
		}
		peers := ratio(failures-rec.Failures, attempts-rec.Attempts)
		what := fmt.Sprintf("%s of attempts failed in the last %s (%d of %d)", percent(rec.FailureRatio), seconds(rec.Seconds), rec.Failures, rec.Attempts)
		if len(p.Hosts) > 1 {
			if rec.FailureRatio < HostPeerFactor*peers {
				continue // its peers fail as much: not this host's doing
			}
			what += "; the other hosts " + percent(peers)
		}
		h.Verdict = Verdict{Level: LevelWarning, Reason: what}
	}
}

// answered sums the answers by status class (499 is no answer: the client
// left) and the 5xx among them.
func answered(byClass map[string]uint64) (answers, errs uint64) {
	for class, n := range byClass {
		if class != "499" {
			answers += n
		}
	}
	return answers, byClass["5xx"]
}

func ratio(part, whole uint64) float64 {
	if whole == 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

func percent(r float64) string {
	p := 100 * r
	if p > 0 && p < 1 {
		return fmt.Sprintf("%.2f%%", p)
	}
	return fmt.Sprintf("%.1f%%", p)
}

func seconds(s float64) string { return fmt.Sprintf("%.0fs", math.Round(s)) }
