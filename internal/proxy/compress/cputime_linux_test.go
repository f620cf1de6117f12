package compress

import (
	"syscall"
	"time"
)

// threadCPU is the CPU time the calling OS thread has used, so that a
// benchmark locked to its thread reports its own work and not the time
// other processes on a shared machine took from it.
func threadCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
