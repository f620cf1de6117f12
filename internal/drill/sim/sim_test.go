package sim

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
)

var (
	seedCount = flag.Int("seeds", 0, "worlds to run in memory (default 40, 10 with -short); with -v the table is printed")
	firstSeed = flag.Uint64("seed", 1, "first seed of the worlds run")
	loopSeeds = flag.Int("loopback", 0, "worlds to run on loopback on each front end, from -seed, 4 at a time in real time (default: 4 chosen runs, 1 with -short)")
)

// runMemory plays seed's world in a synctest bubble of its own.
func runMemory(t *testing.T, seed uint64) *Report {
	t.Helper()
	var r *Report
	synctest.Test(t, func(t *testing.T) {
		var err error
		if r, err = Run(Draw(seed, Shape{}), Variant{Frontend: "net/http"}); err != nil {
			t.Fatal(err)
		}
	})
	return r
}

// assertInvariants fails the test for every invariant the report breaks
// in a way no known issue explains, and logs the known ones.
func assertInvariants(t *testing.T, r *Report) {
	t.Helper()
	if bad := r.Unexpected(); len(bad) > 0 {
		t.Errorf("invariants broken:\n%s", r)
		return
	}
	if len(r.Violations) > 0 && testing.Verbose() {
		t.Logf("broken as known issues say:\n%s", r)
	}
}

// Faults with a known owner, drawn from seeds, played against the real
// proxy on net/http's front end in memory with fake time: sturdy names
// the owner, acts against hosts only for their own faults, and keeps
// innocents served. -seeds N -v runs N worlds and prints the table
// docs/health.md shows.
func TestSimulatedFaultsAreAttributedToTheirOwners(t *testing.T) {
	n := *seedCount
	if n == 0 {
		n = 40
		if testing.Short() {
			n = 10
		}
	}
	tally := NewTally()
	for seed := *firstSeed; seed < *firstSeed+uint64(n); seed++ {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			r := runMemory(t, seed)
			tally.Add(r)
			assertInvariants(t, r)
		})
	}
	if testing.Verbose() {
		var b strings.Builder
		tally.Markdown(&b)
		t.Logf("seeds %d to %d, memory net/http:\n%s", *firstSeed, *firstSeed+uint64(n)-1, b.String())
	}
}

// regression is a seed that once broke an invariant.
type regression struct {
	seed uint64
	note string
}

func regressions(t *testing.T) []regression {
	f, err := os.Open("testdata/regressions.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []regression
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		seed, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			t.Fatalf("testdata/regressions.txt: %q: %v", sc.Text(), err)
		}
		out = append(out, regression{seed, sc.Text()})
	}
	return out
}

// The seeds that once broke an invariant (testdata/regressions.txt) hold
// it now, or break it only as a known issue says.
func TestSimulatedFaultsRegressionSeeds(t *testing.T) {
	for _, reg := range regressions(t) {
		t.Run(strconv.FormatUint(reg.seed, 10), func(t *testing.T) {
			r := runMemory(t, reg.seed)
			if bad := r.Unexpected(); len(bad) > 0 {
				t.Errorf("regression seed (%s) breaks again:\n%s", reg.note, r)
			}
		})
	}
}

// The same worlds on the kernel's loopback in real time, on both front
// ends (the native one serves real sockets only): slower, so a few.
func TestSimulatedFaultsOnLoopback(t *testing.T) {
	type run struct {
		seed     uint64
		frontend string
	}
	// Worlds that mix host, client, request and sturdy faults.
	runs := []run{{41, "native"}, {31, "native"}, {56, "net/http"}, {46, "net/http"}}
	if testing.Short() {
		runs = runs[:1]
	}
	if *loopSeeds > 0 {
		runs = nil
		for seed := *firstSeed; seed < *firstSeed+uint64(*loopSeeds); seed++ {
			runs = append(runs, run{seed, "native"}, run{seed, "net/http"})
		}
	}
	// Four at a time, whatever -parallel says: a run is mostly waiting.
	reports := make([]*Report, len(runs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i, x := range runs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			r, err := Run(Draw(x.seed, Shape{}), Variant{Loopback: true, Frontend: x.frontend})
			if err != nil {
				t.Errorf("seed %d on %s: %v", x.seed, x.frontend, err)
				return
			}
			reports[i] = r
		})
	}
	wg.Wait()
	tallies := map[string]*Tally{"native": NewTally(), "net/http": NewTally()}
	for i, r := range reports {
		if r == nil {
			continue
		}
		tallies[runs[i].frontend].Add(r)
		t.Run(fmt.Sprintf("%d-%s", runs[i].seed, strings.ReplaceAll(runs[i].frontend, "/", "")), func(t *testing.T) {
			assertInvariants(t, r)
		})
	}
	if testing.Verbose() {
		for _, fe := range []string{"native", "net/http"} {
			var b strings.Builder
			tallies[fe].Markdown(&b)
			t.Logf("loopback, %s front end:\n%s", fe, b.String())
		}
	}
}
