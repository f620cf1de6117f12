package config

import "strings"

// didYouMean names the choice closest to s, as `did you mean "x"? `, or
// returns "" when no choice is close enough to be a likely misspelling: a
// different case, or one edit (a transposition counts as one), or two for
// names of ten letters or more. Two edits in a short word make another
// word ("host_dead" is not "host_ready").
func didYouMean(s string, choices []string) string {
	best, bestD := "", 3
	for _, c := range choices {
		if c == s {
			return ""
		}
		d := editDistance(strings.ToLower(s), strings.ToLower(c))
		if d < bestD {
			best, bestD = c, d
		}
	}
	limit := 1
	if len(s) >= 10 {
		limit = 2
	}
	if best == "" || bestD > limit {
		return ""
	}
	return `did you mean "` + best + `"? `
}

// editDistance is the optimal string alignment distance: insertions,
// deletions, substitutions and transpositions of neighbours, each one edit.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64 // keys are short; anything this long is no misspelling
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

func (v *validator) poolNames() []string {
	names := make([]string, len(v.c.Pools))
	for i, p := range v.c.Pools {
		names[i] = p.Name
	}
	return names
}

func (v *validator) listenerNames() []string {
	names := make([]string, len(v.c.Listeners))
	for i, l := range v.c.Listeners {
		names[i] = l.Name
	}
	return names
}

func (v *validator) routeNames() []string {
	names := make([]string, len(v.c.Routes))
	for i, r := range v.c.Routes {
		names[i] = r.Name
	}
	return names
}
