package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/ops/admin"
)

// startAdmin serves the operators' endpoints on their own address, so that
// a flood on the client listeners cannot hide the proxy's state.
func (s *Server) startAdmin(a config.Admin) error {
	ln, err := s.listen(a.Listen)
	if err != nil {
		return fmt.Errorf("admin: cannot listen on %s: %w", a.Listen, err)
	}
	host, _, _ := net.SplitHostPort(a.Listen)
	h := admin.New(adminBackend{s}, admin.Options{Token: a.Token, Loopback: config.IsLoopback(host), Log: s.log, Demo: s.demo})
	s.admin = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 60 * time.Second}
	s.adminAddr = ln.Addr().String()
	srv := s.admin
	s.group.Go("admin listener", func(context.Context) error {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("admin listener stopped", "err", err)
		}
		return nil
	})
	return nil
}

func statusURL(adminAddr string) string {
	if adminAddr == "" {
		return ""
	}
	return "http://" + adminAddr + "/status"
}
