//go:build unix

package exhaust

import "syscall"

// FileLimit returns the process's soft and hard file-descriptor limits.
func FileLimit() (soft, hard uint64, err error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, 0, err
	}
	return uint64(l.Cur), uint64(l.Max), nil
}

// RaiseFileLimit raises the soft file-descriptor limit to the hard one.
// Go's runtime does so itself on Linux and macOS since Go 1.19; this is
// for a process whose limit was lowered after it started, and it reports
// the limits in force afterwards and whether it raised them.
func RaiseFileLimit() (soft, hard uint64, raised bool, err error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, 0, false, err
	}
	if l.Cur >= l.Max {
		return uint64(l.Cur), uint64(l.Max), false, nil
	}
	want := l
	want.Cur = l.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		return uint64(l.Cur), uint64(l.Max), false, err
	}
	return uint64(want.Cur), uint64(want.Max), true, nil
}
