package drill

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is a whole drill run: every target's results, with what is needed
// to reproduce it.
type Report struct {
	Command string    `json:"command,omitempty"`
	Date    time.Time `json:"date"`
	Machine string    `json:"machine"`
	Options struct {
		DurationSeconds float64 `json:"duration_seconds"`
		Rate            float64 `json:"rate"`
		Seed            uint64  `json:"seed"`
	} `json:"options"`
	Targets []TargetReport `json:"targets"`
}

// TargetReport is one target's results, or why it was skipped.
type TargetReport struct {
	Target string `json:"target"`
	// Comparison marks a target drilled for comparison (nginx): its
	// failures are the point, not a failed drill.
	Comparison bool      `json:"comparison,omitempty"`
	Skipped    string    `json:"skipped,omitempty"`
	Results    []*Result `json:"results"`
}

// NewReport starts a report for a run with o.
func NewReport(command string, o Options) *Report {
	o = o.withDefaults()
	r := &Report{Command: command, Date: time.Now().UTC().Truncate(time.Second), Machine: Machine()}
	r.Options.DurationSeconds, r.Options.Rate, r.Options.Seed = o.Duration.Seconds(), o.Rate, o.Seed
	return r
}

// Machine describes this machine: CPU model, cores, OS and Go version.
func Machine() string {
	cpu := ""
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v) + ", "
				break
			}
		}
		f.Close()
	}
	osName := runtime.GOOS
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				osName = strings.Trim(v, `"`)
			}
		}
	}
	return fmt.Sprintf("%s%d cores, %s %s, %s", cpu, runtime.NumCPU(), osName, runtime.GOARCH, runtime.Version())
}

// Failed reports whether any result of a target under test failed.
func (r *Report) Failed() bool {
	for _, t := range r.Targets {
		if t.Comparison {
			continue
		}
		for _, res := range t.Results {
			if res.Verdict == Fail {
				return true
			}
		}
	}
	return false
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// row is one result's table cells.
func row(res *Result) []string {
	bad, stale, empty := "–", "–", fmtSeconds(res.PoolEmptySeconds)
	if res.Bad != nil {
		bad = strconv.Itoa(res.Bad.Requests)
	}
	if res.Stale != nil {
		stale = fmt.Sprintf("%d / %d", res.Stale.Labelled, res.Stale.Unlabelled)
	}
	if res.PoolEmptyEstimated {
		empty = "≈" + empty
	}
	return []string{
		res.Scenario + " (" + res.Incident + ")",
		strconv.Itoa(res.Innocent.Requests),
		res.Innocent.FailuresByStatus(),
		bad,
		strconv.Itoa(res.Ejections),
		empty,
		stale,
		strconv.Itoa(res.LogLines),
		string(res.Verdict),
	}
}

// tableHeader names the columns (issue 6's table).
func tableHeader() []string {
	return []string{"scenario", "innocent requests", "innocent failures (by status)", "bad-client requests", "ejections", "pool-empty time", "stale answers (labelled / unlabelled)", "log lines", "verdict"}
}

func fmtSeconds(s float64) string {
	if s == 0 {
		return "0s"
	}
	return strconv.FormatFloat(s, 'f', 1, 64) + "s"
}

func (r *Report) settings() string {
	return fmt.Sprintf("seed %d, %gs per scenario, %g requests/s per innocent client", r.Options.Seed, r.Options.DurationSeconds, r.Options.Rate)
}

// WriteText writes one table per target, each followed by the verdicts in
// words, then the verdicts side by side when there are several targets.
func (r *Report) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	for _, t := range r.Targets {
		fmt.Fprintf(bw, "%s — %s\n\n", t.Target, r.settings())
		if t.Skipped != "" {
			fmt.Fprintf(bw, "  skipped: %s\n\n", t.Skipped)
			continue
		}
		tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SCENARIO\tINNOCENT\tINNOCENT FAILURES\tBAD CLIENT\tEJECTIONS\tPOOL EMPTY\tSTALE (LABELLED/NOT)\tLOG LINES\tVERDICT")
		for _, res := range t.Results {
			fmt.Fprintln(tw, strings.Join(row(res), "\t"))
		}
		tw.Flush()
		fmt.Fprintln(bw)
		for _, res := range t.Results {
			fmt.Fprintf(bw, "%s: %s: %s\n", res.Scenario, strings.ToUpper(string(res.Verdict)), res.Why)
			for _, f := range res.Facts {
				fmt.Fprintf(bw, "    %s\n", f)
			}
		}
		fmt.Fprintln(bw)
	}
	if len(r.Targets) > 1 {
		tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
		cols := []string{"SCENARIO"}
		for _, t := range r.Targets {
			cols = append(cols, strings.ToUpper(t.Target))
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
		for _, line := range r.sideBySide() {
			fmt.Fprintln(tw, strings.Join(line, "\t"))
		}
		tw.Flush()
		fmt.Fprintln(bw)
	}
	return bw.Flush()
}

// sideBySide lines up each scenario's verdict and innocent failures per
// target.
func (r *Report) sideBySide() [][]string {
	var order []string
	cells := map[string][]string{}
	for i, t := range r.Targets {
		for _, res := range t.Results {
			if _, ok := cells[res.Scenario]; !ok {
				order = append(order, res.Scenario)
				cells[res.Scenario] = make([]string, len(r.Targets))
			}
			cells[res.Scenario][i] = fmt.Sprintf("%s — %s", res.Verdict, res.Headline)
		}
	}
	var out [][]string
	for _, sc := range order {
		line := []string{sc}
		for _, c := range cells[sc] {
			if c == "" {
				c = "–"
			}
			line = append(line, c)
		}
		out = append(out, line)
	}
	return out
}

// WriteMarkdown writes the same as WriteText as Markdown tables, for README.
func (r *Report) WriteMarkdown(w io.Writer) error {
	bw := bufio.NewWriter(w)
	if r.Command != "" {
		fmt.Fprintf(bw, "`%s` on %s, %s (%s).\n\n", r.Command, r.Date.Format("2006-01-02"), r.Machine, r.settings())
	}
	if len(r.Targets) > 1 {
		fmt.Fprint(bw, "| scenario |")
		for _, t := range r.Targets {
			fmt.Fprintf(bw, " %s |", t.Target)
		}
		fmt.Fprint(bw, "\n|---|")
		for range r.Targets {
			fmt.Fprint(bw, "---|")
		}
		fmt.Fprintln(bw)
		for _, line := range r.sideBySide() {
			fmt.Fprintf(bw, "| %s |\n", strings.Join(line, " | "))
		}
		fmt.Fprintln(bw)
	}
	for _, t := range r.Targets {
		fmt.Fprintf(bw, "**%s**\n\n", t.Target)
		if t.Skipped != "" {
			fmt.Fprintf(bw, "Skipped: %s\n\n", t.Skipped)
			continue
		}
		cols := tableHeader()
		fmt.Fprintf(bw, "| %s |\n|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
		for _, res := range t.Results {
			cells := row(res)
			cells[len(cells)-1] = "**" + cells[len(cells)-1] + "**: " + escapeCell(res.Why)
			fmt.Fprintf(bw, "| %s |\n", strings.Join(cells, " | "))
		}
		fmt.Fprintln(bw)
	}
	return bw.Flush()
}

func escapeCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
