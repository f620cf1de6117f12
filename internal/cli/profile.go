package cli

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
)

// profileEnv names a file that sturdy run writes a CPU profile of its
// whole life to, for profiling under a benchmark from start to stop
// without the admin token (the admin listener's /debug/pprof/profile
// takes a profile of a running sturdy).
const profileEnv = "STURDY_CPUPROFILE"

// startProfile starts the CPU profile that profileEnv asks for and
// returns the function that ends it; it is a no-op without the variable.
func startProfile(log *slog.Logger) (stop func(), err error) {
	path := os.Getenv(profileEnv)
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", profileEnv, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", profileEnv, err)
	}
	log.Info("writing a CPU profile until sturdy stops", "file", path)
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			log.Warn("could not finish the CPU profile", "file", path, "err", err)
		}
	}, nil
}
