// Package testutil holds the small helpers several packages' tests share.
// Nothing outside tests imports it.
package testutil

import (
	"strings"
	"sync"
)

// SyncBuffer is an io.Writer safe for concurrent writers (a log sink that
// goroutines write to while the test reads it).
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
