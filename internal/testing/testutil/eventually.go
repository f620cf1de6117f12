package testutil

import "time"

// Eventually polls cond every 10ms until it holds or within has passed,
// and reports whether it held. Tests that wait on real sockets use it
// instead of a loop of their own; logic that only waits on time uses
// testing/synctest instead.
func Eventually(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}
