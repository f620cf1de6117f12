package server

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/sturdyproxy/sturdy/internal/health"
)

// savedState is what one sturdy process hands the next across a binary
// upgrade: every host's state, as HAProxy's server-state-file does.
type savedState struct {
	Saved time.Time          `json:"saved"`
	Hosts []health.SavedHost `json:"hosts"`
}

// SaveState writes every host's state to path (mode 0600).
func (s *Server) SaveState(path string) error {
	st := savedState{Saved: time.Now()}
	for _, p := range s.cur.Load().Pools {
		st.Hosts = append(st.Hosts, p.Save()...)
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// RestoreState applies the host states saved at path by the previous
// process, before this one serves.
func (s *Server) RestoreState(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var st savedState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("host state %s: %w", path, err)
	}
	n, now := 0, time.Now()
	for _, p := range s.cur.Load().Pools {
		n += p.Restore(st.Hosts, now)
	}
	s.log.Info("host state taken over from the previous process", "hosts_out", n, "saved", st.Saved)
	return nil
}
