package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
)

// profileEnv names a file that sturdy run writes a CPU profile of its
// whole life to, for profiling under a benchmark from start to stop
// without the admin token (the admin listener's /debug/pprof/profile
// takes a profile of a running sturdy). mutexProfileEnv names a file for
// a profile of lock contention over the whole run: where goroutines
// waited on each other's mutexes, the question on more than one core.
const (
	profileEnv      = "STURDY_CPUPROFILE"
	mutexProfileEnv = "STURDY_MUTEXPROFILE"
)

// startProfile starts the profiles that profileEnv and mutexProfileEnv
// ask for and returns the function that ends them and writes them; it is
// a no-op without the variables.
func startProfile(log *slog.Logger) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	if path := os.Getenv(profileEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", profileEnv, err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", profileEnv, err)
		}
		log.Info("writing a CPU profile until sturdy stops", "file", path)
		stops = append(stops, func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				log.Warn("could not finish the CPU profile", "file", path, "err", err)
			}
		})
	}
	if path := os.Getenv(mutexProfileEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			stop()
			return nil, fmt.Errorf("%s: %w", mutexProfileEnv, err)
		}
		runtime.SetMutexProfileFraction(1) // every contended lock: the cost only a profiling run pays
		log.Info("writing a lock-contention profile when sturdy stops", "file", path)
		stops = append(stops, func() {
			err := pprof.Lookup("mutex").WriteTo(f, 0)
			runtime.SetMutexProfileFraction(0)
			if err = errors.Join(err, f.Close()); err != nil {
				log.Warn("could not write the lock-contention profile", "file", path, "err", err)
			}
		})
	}
	return stop, nil
}
