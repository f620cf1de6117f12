package server

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/ops/admin"
	"github.com/sturdyproxy/sturdy/internal/ops/exhaust"
	"github.com/sturdyproxy/sturdy/internal/ops/telemetry"
)

// startAdmin serves the operators' endpoints on their own address, so that
// a flood on the client listeners cannot hide the proxy's state.
func (s *Server) startAdmin(a config.Admin) error {
	ln, err := s.listen(a.Listen)
	if err != nil {
		return fmt.Errorf("admin: cannot listen on %s: %w", a.Listen, err)
	}
	host, _, _ := net.SplitHostPort(a.Listen)
	ao := admin.Options{Token: a.Token, Loopback: config.IsLoopback(host), Log: s.log, Demo: s.demo}
	if len(s.opts.collectors) > 0 {
		reg := telemetry.NewRegistry(s.Status)
		for _, c := range s.opts.collectors {
			if err := reg.Register(c); err != nil {
				return fmt.Errorf("admin: metrics: %w", err)
			}
		}
		ao.Gatherer = reg
	}
	h := admin.New(adminBackend{s}, ao)
	// Probes and metrics must answer when sturdy is out of descriptors,
	// which is when operators need them: a few spares are held for the
	// admin listener's connections, and its accept errors are counted as
	// sturdy's own exhaustion, not written one line each.
	s.adminReserve = exhaust.NewReserve(exhaust.DefaultReserve)
	res := s.adminReserve
	ln = res.Listener(ln, s.local)
	s.admin = &http.Server{
		Handler:           exhaust.CloseReserved(h),
		ConnContext:       exhaust.ConnContext,
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       60 * time.Second,
		ErrorLog:          log.New(adminErrors{s}, "", 0),
	}
	s.adminAddr = ln.Addr().String()
	srv := s.admin
	s.group.Go("admin listener", func(context.Context) error {
		defer res.Close()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("admin listener stopped", "err", err)
		}
		return nil
	})
	return nil
}

// adminErrors is the admin server's ErrorLog: each line at debug level
// and counted in one aggregated warning per interval, never a line per
// error on standard error.
type adminErrors struct{ s *Server }

func (e adminErrors) Write(p []byte) (int, error) {
	e.s.agg.Add("errors in the admin listener's HTTP server (each at debug level)")
	e.s.log.Debug(strings.TrimSpace(string(p)), "listener", "admin")
	return len(p), nil
}

func statusURL(adminAddr string) string {
	if adminAddr == "" {
		return ""
	}
	return "http://" + adminAddr + "/status"
}
