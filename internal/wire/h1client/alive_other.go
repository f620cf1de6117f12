//go:build !linux

package h1client

// peek is the liveness check where no non-blocking peek is wired up: it
// trusts the connection. Stale connections then fail the request that
// takes them (reported, never retried).
func (pc *conn) peek(fd uintptr) bool {
	pc.peekRes = peekEmpty
	return true
}

// canSplice: only Linux splices, and only there does SpliceTo need to
// tell the sides apart.
const canSplice = false

func (pc *conn) broken() bool { return true }

// unacked cannot tell without Linux's TCP_INFO: nothing is proven.
func (pc *conn) unacked(out int64) bool { return false }
