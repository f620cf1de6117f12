//go:build !linux

package compress

import "time"

func threadCPU() (time.Duration, bool) { return 0, false }
