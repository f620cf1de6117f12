package cli

import (
	"os"
	"runtime"
)

// gcFloorBytes is a block of heap that sturdy run holds for its whole life
// and never touches, so that the garbage collector does not run every few
// hundred requests. Go starts a collection when the heap has grown by
// GOGC % of what was live after the last one, and at 4 MiB at least; a
// proxy keeps little live (about 2 MiB, half of it Kubernetes mode's
// libraries), so it collected about every 500 requests and marked all of
// it each time: a sixth of its user-space instructions per proxied 1 KiB
// request (callgrind under ab -k: 113,531 without the block, 95,795 with
// it; resident memory under 64 connections 46.5 → 50.3 MiB; see
// docs/performance.md). The block holds no pointers, so collections do not
// scan it, and it is never written, so it costs resident memory only
// through the garbage allowed to gather between collections, about its
// size. Heaps far above it (large caches) are collected as before.
const gcFloorBytes = 4 << 20

// holdGCFloor allocates the block unless the operator tunes the collector
// (GOGC or GOMEMLIMIT set); the caller keeps the result alive.
func holdGCFloor() []byte {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return nil
	}
	return make([]byte, gcFloorBytes)
}

// releaseGCFloor marks the end of the block's life; it exists so that the
// block stays reachable until then.
func releaseGCFloor(b []byte) { runtime.KeepAlive(b) }
