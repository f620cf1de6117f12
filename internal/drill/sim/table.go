package sim

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// Tally sums many runs' reports: precision and recall per owner class,
// and, per fault kind, how often and how fast sturdy named it.
type Tally struct {
	Runs    int
	Classes map[Class]*ClassTally
	Kinds   map[Kind]*KindTally
	// Innocent errors over all runs.
	InnocentRequests, InnocentErrors, InnocentBlamed int
	// BlamedOneHost: of InnocentBlamed, those tried on one host only.
	BlamedOneHost int
	// Lost is the sum of the runs' capacity lost to wrong ejections
	// (divide by Runs for the mean).
	Lost float64
	// Violations counts broken invariants by name: all, and those no
	// known issue explains.
	Violations, Unexpected map[string]int
}

// ClassTally is one owner class's conclusions and faults.
type ClassTally struct {
	Conclusions, Right int // distinct conclusions naming the class, and the right ones
	Faults, Named      int // faults due to be named, and those named within the bound
}

// Precision is Right / Conclusions (1 without conclusions).
func (c *ClassTally) Precision() float64 { return ratio(c.Right, c.Conclusions) }

// Recall is Named / Faults (1 without faults).
func (c *ClassTally) Recall() float64 { return ratio(c.Named, c.Faults) }

// KindTally is one kind of fault over the runs that had it.
type KindTally struct {
	Runs   int // runs with at least one fault of the kind
	Faults int // faults due
	Named  int // named within the bound
	// Times to the right conclusion, of the faults named.
	Times []time.Duration
	// Wrong counts the wrong conclusions in runs with the kind, by
	// class (a scanner's run whose hosts were ejected counts host 1).
	Wrong map[Class]int
	// Solo counts the runs where it was the only fault, and SoloWrong
	// their wrong conclusions: what the kind misattributes by itself.
	Solo      int
	SoloWrong map[Class]int
	// Ejected counts faults of the kind whose right answer was to keep
	// the host, which was ejected anyway (shedding, closing).
	Ejected int
	// Innocent errors in runs with the kind.
	InnocentRequests, InnocentErrors int
	Lost                             float64
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 1
	}
	return float64(a) / float64(b)
}

// NewTally returns an empty tally.
func NewTally() *Tally {
	t := &Tally{Classes: map[Class]*ClassTally{}, Kinds: map[Kind]*KindTally{}, Violations: map[string]int{}, Unexpected: map[string]int{}}
	for _, c := range Classes {
		t.Classes[c] = &ClassTally{}
	}
	for _, k := range Kinds {
		t.Kinds[k] = &KindTally{Wrong: map[Class]int{}, SoloWrong: map[Class]int{}}
	}
	return t
}

// Add counts one report.
func (t *Tally) Add(r *Report) {
	t.Runs++
	t.InnocentRequests += r.InnocentRequests
	t.InnocentErrors += r.InnocentErrors
	t.InnocentBlamed += r.InnocentBlamed
	t.BlamedOneHost += r.BlamedOneHost
	t.Lost += r.LostCapacity
	wrong := map[Class]int{}
	for _, c := range r.Distinct() {
		ct := t.Classes[c.Class]
		ct.Conclusions++
		if c.Right() {
			ct.Right++
		} else {
			wrong[c.Class]++
		}
	}
	seen := map[Kind]bool{}
	for _, o := range r.Outcomes {
		kt := t.Kinds[o.Kind]
		if !seen[o.Kind] {
			seen[o.Kind] = true
			kt.Runs++
			kt.InnocentRequests += r.InnocentRequests
			kt.InnocentErrors += r.InnocentErrors
			kt.Lost += r.LostCapacity
			for c, n := range wrong {
				kt.Wrong[c] += n
			}
			if len(r.Outcomes) == 1 {
				kt.Solo++
				for c, n := range wrong {
					kt.SoloWrong[c] += n
				}
			}
		}
		if o.Ejected {
			kt.Ejected++
		}
		if !o.Due {
			continue
		}
		ct := t.Classes[o.Kind.Owner()]
		kt.Faults++
		ct.Faults++
		bound := NameBound
		if o.Kind.Owner() == ClassHost {
			bound = ActBound
		}
		if o.Named && o.After <= bound {
			kt.Named++
			ct.Named++
		}
		if o.Named {
			kt.Times = append(kt.Times, o.After)
		}
	}
	broken, news := map[string]bool{}, map[string]bool{}
	for _, v := range r.Violations {
		broken[v.Invariant] = true
		news[v.Invariant] = news[v.Invariant] || v.Known == ""
	}
	for inv := range broken {
		t.Violations[inv]++
		if news[inv] {
			t.Unexpected[inv]++
		}
	}
}

// quantile is the q-quantile of ds (0 without any).
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(int(q*float64(len(s))), len(s)-1)]
}

func pct(a, b int) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(a)/float64(b))
}

func frac(a, b int) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f (%d/%d)", float64(a)/float64(b), a, b)
}

// Markdown writes the tally as docs/health.md shows it: per owner class,
// then per fault kind, then the invariants.
func (t *Tally) Markdown(w io.Writer) {
	fmt.Fprintf(w, "%d runs; innocent clients' error rate %s (%d of their %d requests failed, %d of those answered as the request's own fault, %d of which had reached one host only); capacity lost to wrong ejections %.2f%% of host time on average.\n\n",
		t.Runs, pct(t.InnocentErrors, t.InnocentRequests), t.InnocentErrors, t.InnocentRequests, t.InnocentBlamed, t.BlamedOneHost, 100*t.Lost/float64(max(t.Runs, 1)))
	fmt.Fprintln(w, "| owner | conclusions | precision | faults due | recall (named in bound) |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	for _, c := range Classes {
		ct := t.Classes[c]
		fmt.Fprintf(w, "| %s | %d | %s | %d | %s |\n", c, ct.Conclusions, frac(ct.Right, ct.Conclusions), ct.Faults, frac(ct.Named, ct.Faults))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| fault | runs | named in bound | time to right conclusion (median / p90) | wrong conclusions when alone (runs) | wrong conclusions in all its runs | kept host ejected | innocents' errors | capacity lost |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---|---|---:|---:|---:|")
	for _, k := range Kinds {
		kt := t.Kinds[k]
		if kt.Runs == 0 {
			continue
		}
		wrong, solo := wrongList(kt.Wrong), fmt.Sprintf("%s (%d)", wrongList(kt.SoloWrong), kt.Solo)
		named := frac(kt.Named, kt.Faults)
		times := fmt.Sprintf("%.1f s / %.1f s", quantile(kt.Times, 0.5).Seconds(), quantile(kt.Times, 0.9).Seconds())
		ejected := "–"
		if !k.acted() {
			ejected, named, times = fmt.Sprintf("%d of %d", kt.Ejected, kt.Runs), "–", "–"
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s | %.2f%% |\n", k, kt.Runs, named, times, solo, wrong, ejected, pct(kt.InnocentErrors, kt.InnocentRequests), 100*kt.Lost/float64(kt.Runs))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| invariant | runs broken | of which no known issue explains |")
	fmt.Fprintln(w, "|---|---:|---:|")
	for _, inv := range []string{InvInnocents, InvWrongEjection, InvHostActed, InvNamed} {
		fmt.Fprintf(w, "| %s | %d | %d |\n", inv, t.Violations[inv], t.Unexpected[inv])
	}
}

// wrongList is "host 2, request 40", or "none".
func wrongList(m map[Class]int) string {
	var s string
	for _, c := range Classes {
		if n := m[c]; n > 0 {
			s += fmt.Sprintf("%s %d, ", c, n)
		}
	}
	if s == "" {
		return "none"
	}
	return s[:len(s)-2]
}
