package drill

import (
	"bytes"
	"context"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

// short is the test mode: every scenario runs for a couple of seconds.
func short() Options { return Options{Duration: 1500 * time.Millisecond, Rate: 20, Seed: 1} }

// TestScenariosAgainstSturdy runs every scenario against sturdy with its
// built-in config and asserts what design.md promises. A scenario whose
// feature is not live yet is skipped with the reason, never passed.
func TestScenariosAgainstSturdy(t *testing.T) {
	if testing.Short() {
		t.Skip("the full drill takes about 15s; -short skips it (internal/server has the incident tests)")
	}
	for i, sc := range Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			opts := short()
			if sc.Base() == "empty-default" {
				// Active checks find the blackholed pool empty after about
				// a second; the sorry page needs requests after that.
				opts.Duration = 3 * time.Second
			}
			r, err := RunOne(context.Background(), Builtin(), sc, opts, i)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s", r.Verdict, r.Why)
			for _, f := range r.Facts {
				t.Logf("  %s", f)
			}
			checkScenario(t, r)
			noLeaks(t, before)
		})
	}
}

func checkScenario(t *testing.T, r *Result) {
	t.Helper()
	base, _, _ := strings.Cut(r.Scenario, "/")
	switch base {
	case "waf-scanner", "slow-route", "malformed-url":
		if r.Innocent.Failures != 0 {
			t.Errorf("innocent clients saw %s", r.Innocent.FailuresByStatus())
		}
		if r.Ejections != 0 {
			t.Errorf("%d ejections", r.Ejections)
		}
		if r.Bad == nil || r.Bad.Requests == 0 {
			t.Errorf("the bad client sent nothing: %+v", r.Bad)
		}
	case "empty-default":
		if r.Missing != "" {
			t.Skipf("%s is not live yet: %s", r.Missing, r.Why)
		}
		if r.LogLines > maxEpisodeLogLines {
			t.Errorf("%d log lines for one episode", r.LogLines)
		}
	case "stale-mask":
		if r.Missing == "route cache" {
			t.Skipf("the cache is not live yet: %s", r.Why)
		}
		s := r.Stale
		if s.Unlabelled != 0 {
			t.Errorf("%d stale answers were not labelled", s.Unlabelled)
		}
		if s.MaxAgeSeconds > s.BoundSeconds {
			t.Errorf("a stale answer was %.2fs old, bound %.2fs", s.MaxAgeSeconds, s.BoundSeconds)
		}
		if s.HealthCached != 0 {
			t.Errorf("/healthz came from the cache %d times", s.HealthCached)
		}
		if r.Missing != "" {
			t.Skipf("%s not live yet: %s", r.Missing, r.Why)
		}
	default:
		t.Fatalf("no checks for scenario %q", r.Scenario)
	}
	if r.Verdict != Pass {
		t.Errorf("verdict %s: %s", r.Verdict, r.Why)
	}
}

// noLeaks waits for the goroutines a scenario started to end: every
// scenario must stop what it starts.
func noLeaks(t *testing.T, before int) {
	t.Helper()
	if !testutil.Eventually(5*time.Second, func() bool { return runtime.NumGoroutine() <= before }) {
		var b bytes.Buffer
		pprof.Lookup("goroutine").WriteTo(&b, 1)
		t.Fatalf("%d goroutines before the scenario, %d after:\n%s", before, runtime.NumGoroutine(), b.String())
	}
}
