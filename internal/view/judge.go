package view

import (
	"fmt"
	"math"
)

// The thresholds of the verdicts, documented in docs/observability.md
// ("When is a route a problem?"). A route is judged by its last minute of
// answers; a host by its host-attributed failures next to its peers'.
const (
	// RouteCriticalRatio is the share of 5xx answers at which a route is
	// failing its clients: critical.
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

	// HostWarningRatio, HostWarningMin and HostPeerFactor: a host in
	// rotation with at least 5% of its passive window's requests failed
	// and attributed to it, at least 5 of them, and at least twice the
	// share of its pool's other hosts together stands out: a warning.
	// (Failures attributed to a client, a request or a route are not the
	// host's; they show on the route.)
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

var levelRank = map[string]int{LevelOK: 0, LevelWarning: 1, LevelCritical: 2}
var levels = []string{LevelOK, LevelWarning, LevelCritical}

// JudgeRoute sets r.Recent.ErrorRatio (what clients got: every 5xx
// counts) and r.Verdict. 5xx answers to attributed clients (a scanner a
// WAF refuses) may lower the level by one step, never more: attribution
// can be wrong, and a route failing everyone must not look fine because
// every client was taken for the cause of its own failures.
func JudgeRoute(r *Route) {
	rec := &r.Recent
	answers, errs := answered(rec.Requests)
	rec.ErrorRatio = ratio(errs, answers)
	r.Verdict = Verdict{Level: LevelOK}
	if errs == 0 {
		return
	}
	client := min(rec.ClientErrors, errs)
	allAnswers, allErrs := answered(r.Requests)
	normalOf := func(answers, errs, client, allClient uint64) float64 {
		a, e := allAnswers-min(allAnswers, answers), allErrs-min(allErrs, errs)
		c := allClient - min(allClient, client)
		a, e = a-min(a, c), e-min(e, c)
		if a < NormalMinAnswers {
			return 0
		}
		return ratio(e, a)
	}
	all := routeLevel(rec.ErrorRatio, errs, normalOf(answers, errs, 0, 0))
	own := routeLevel(ratio(errs-client, answers-client), errs-client, normalOf(answers, errs, client, r.ClientErrors))
	level := levels[max(levelRank[own], levelRank[all]-1)]
	if level == LevelOK {
		return
	}
	what := fmt.Sprintf("%s of answers were 5xx in the last %s (%d of %d)", Percent(rec.ErrorRatio), seconds(rec.Seconds), errs, answers)
	if client > 0 {
		what += fmt.Sprintf("; %d of them to attributed clients, whose failures are taken as their own", client)
	}
	if normal := normalOf(answers, errs, client, r.ClientErrors); normal > 0 {
		what += "; normally " + Percent(normal)
	}
	if rec.ErrorRatio < RouteCriticalRatio {
		what += ", clearly above normal"
	}
	r.Verdict = Verdict{Level: level, Reason: what}
}

// routeLevel applies the route thresholds to one share of 5xx answers.
func routeLevel(share float64, errs uint64, normal float64) string {
	switch {
	case share >= RouteCriticalRatio && errs >= RouteCriticalMin:
		return LevelCritical
	case share >= RouteCriticalRatio:
		return LevelWarning
	case share >= RouteWarningRatio && share >= AboveNormal*normal:
		return LevelWarning
	}
	return LevelOK
}

// JudgePool sets each host's Recent.FailureRatio and Verdict. The verdict
// reads the passive window (host-attributed failures), so it agrees with
// the health model on whose failures they were.
func JudgePool(p *Pool) {
	var requests, failures uint64
	for i := range p.Hosts {
		h := &p.Hosts[i]
		h.Recent.FailureRatio = ratio(h.Recent.Failures, h.Recent.Attempts)
		requests += h.WindowRequests
		failures += h.WindowFailures
	}
	for i := range p.Hosts {
		h := &p.Hosts[i]
		h.Verdict = Verdict{Level: LevelOK}
		share := ratio(h.WindowFailures, h.WindowRequests)
		if h.WindowFailures < HostWarningMin || share < HostWarningRatio {
			continue
		}
		what := fmt.Sprintf("%s of its recent requests failed and were attributed to it (%d of %d)", Percent(share), h.WindowFailures, h.WindowRequests)
		if len(p.Hosts) > 1 {
			peers := ratio(failures-h.WindowFailures, requests-h.WindowRequests)
			if share < HostPeerFactor*peers {
				continue // its peers fail as much: not this host's doing
			}
			what += "; the other hosts " + Percent(peers)
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

// Percent writes a ratio as operators read it: two decimals below 1 %,
// so that a small error rate is not shown as 0.0 %.
func Percent(r float64) string {
	p := 100 * r
	if p > 0 && p < 1 {
		return fmt.Sprintf("%.2f%%", p)
	}
	return fmt.Sprintf("%.1f%%", p)
}

func seconds(s float64) string {
	if s < 10 {
		return fmt.Sprintf("%.1fs", s)
	}
	return fmt.Sprintf("%.0fs", math.Round(s))
}
