package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/drill"
)

// Bounds on drill flags: long enough to re-enact, short enough to stay a
// drill.
const (
	minDrillDuration = 500 * time.Millisecond
	maxDrillDuration = 5 * time.Minute
	maxDrillRate     = 1000
)

func (p *program) cmdDrill(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := p.newFlags("drill", stderr)
	file := fs.String("c", "", "drill your own config `FILE`: its pool under test gets the drill's fake backends, every other setting is kept")
	poolName := fs.String("pool", "", "with -c: the `POOL` that gets the fake backends (default: the first pool)")
	against := fs.String("against", "", "also drill `PROXY` with configs in the style of each incident; the only one is nginx")
	duration := fs.Duration("duration", drill.DefaultDuration, "load phase of each scenario")
	rate := fs.Float64("rate", drill.DefaultRate, "requests per second per innocent client")
	seed := fs.Uint64("seed", drill.DefaultSeed, "seed for the bad client's address, the request order and the clients' phases")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	markdown := fs.Bool("markdown", false, "print the tables as Markdown")
	verbose := fs.Bool("v", false, "print each scenario's proxy log lines on stderr")
	list := fs.Bool("list", false, "list the scenarios and exit")

	names, code, ok := parseWithArgs(fs, args)
	if !ok {
		return code
	}
	if *list {
		for _, s := range drill.Scenarios() {
			fmt.Fprintf(stdout, "%-25s %s  %s\n", s.Name, s.Incident, s.Summary)
		}
		return exitOK
	}
	switch {
	case *poolName != "" && *file == "":
		return usageError(fs, "--pool needs -c FILE")
	case *against != "" && *against != "nginx":
		return usageError(fs, fmt.Sprintf("--against %q: the only proxy to compare with is nginx", *against))
	case *duration < minDrillDuration || *duration > maxDrillDuration:
		return usageError(fs, fmt.Sprintf("--duration %s: expected %s to %s", *duration, minDrillDuration, maxDrillDuration))
	case *rate <= 0 || *rate > maxDrillRate:
		return usageError(fs, fmt.Sprintf("--rate %g: expected more than 0 and at most %d", *rate, maxDrillRate))
	case *asJSON && *markdown:
		return usageError(fs, "--json and --markdown exclude each other")
	}
	scenarios, err := drill.Select(names)
	if err != nil {
		return usageError(fs, err.Error())
	}

	var sturdy drill.Target = drill.Builtin()
	if *file != "" {
		if sturdy, err = drill.FromConfig(*file, *poolName); err != nil {
			printConfigError(stderr, err)
			return exitFail
		}
	}
	targets := []drill.Target{sturdy}
	opts := drill.Options{Duration: *duration, Rate: *rate, Seed: *seed, Progress: stderr}
	report := drill.NewReport(strings.TrimSpace("sturdy drill "+strings.Join(args, " ")), opts)
	if *against == "nginx" {
		nx, err := drill.Nginx(ctx, true, stderr)
		switch {
		case errors.Is(err, drill.ErrNoNginx):
			fmt.Fprintf(stderr, "sturdy drill: the nginx comparison is skipped: %v\n", err)
			report.Targets = append(report.Targets, drill.TargetReport{Target: "nginx", Comparison: true, Skipped: err.Error()})
		case err != nil:
			fmt.Fprintf(stderr, "sturdy drill: %v\n", err)
			return exitFail
		default:
			targets = append(targets, nx)
		}
	}

	var runs []drill.TargetReport
	var runErr error
	for _, t := range targets {
		results, err := drill.Run(ctx, t, scenarios, opts)
		runs = append(runs, drill.TargetReport{Target: t.Name(), Comparison: t != sturdy, Results: results})
		if *verbose {
			printLogs(stderr, t.Name(), results)
		}
		if err != nil {
			// Interrupted or broken: still show what was measured.
			runErr = err
			break
		}
	}
	// Skipped targets go last, after those that ran.
	report.Targets = append(runs, report.Targets...)

	switch {
	case *asJSON:
		err = report.WriteJSON(stdout)
	case *markdown:
		err = report.WriteMarkdown(stdout)
	default:
		err = report.WriteText(stdout)
		if err == nil && *file != "" {
			err = writeSurvival(stdout, *file, runs[0].Results)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "sturdy drill: %v\n", err)
		return exitFail
	}
	if runErr != nil {
		fmt.Fprintf(stderr, "sturdy drill: %v\n", runErr)
		return exitFail
	}
	if report.Failed() {
		return exitFail
	}
	return exitOK
}

// parseWithArgs parses flags that may come before, between or after the
// scenario names ("sturdy drill waf-scanner --json").
func parseWithArgs(fs *flag.FlagSet, args []string) (names []string, code int, ok bool) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, exitOK, false
			}
			return nil, exitUsage, false
		}
		if fs.NArg() == 0 {
			return names, 0, true
		}
		names = append(names, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func usageError(fs *flag.FlagSet, msg string) int {
	fmt.Fprintf(fs.Output(), "sturdy drill: %s\n", msg)
	return exitUsage
}

// drillScenarioList lists the scenarios for the drill command's help.
func drillScenarioList() string {
	var b strings.Builder
	b.WriteString("scenarios:\n")
	for _, s := range drill.Scenarios() {
		fmt.Fprintf(&b, "  %-25s %s: %s\n", s.Name, s.Incident, s.Summary)
	}
	return b.String()
}

// printLogs writes each scenario's proxy log lines.
func printLogs(w io.Writer, target string, results []*drill.Result) {
	for _, r := range results {
		fmt.Fprintf(w, "--- %s, %s: %d log lines\n", target, r.Scenario, r.LogLines)
		for _, l := range r.Log {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
}

// writeSurvival says which incidents an operator's config survives.
func writeSurvival(w io.Writer, file string, results []*drill.Result) error {
	by := map[drill.Verdict][]string{}
	for _, r := range results {
		by[r.Verdict] = append(by[r.Verdict], r.Scenario)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s survives: %s\n", file, listOrNone(by[drill.Pass]))
	if f := by[drill.Fail]; len(f) > 0 {
		fmt.Fprintf(&b, "%s does not survive: %s\n", file, strings.Join(f, ", "))
	}
	if n := append(by[drill.NotSupported], by[drill.NotApplicable]...); len(n) > 0 {
		fmt.Fprintf(&b, "not judged: %s (see above)\n", strings.Join(n, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
