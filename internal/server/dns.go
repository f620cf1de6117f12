package server

import (
	"github.com/sturdyproxy/sturdy/internal/compile"
	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/health/resolve"
)

// hostAddrs lists every pool host address and SRV name of cfg.
func hostAddrs(cfg *config.Config) (addrs, services []string) {
	for _, pc := range cfg.Pools {
		for _, h := range pc.Hosts {
			switch {
			case h.SRV != "":
				services = append(services, h.SRV)
			case !resolve.IsUnix(h.Addr):
				addrs = append(addrs, h.Addr)
			}
		}
	}
	return addrs, services
}

// resolveNames hands the pools' host and SRV names to the background
// resolver; a name that never resolved is a warning at load.
func (s *Server) resolveNames(cfg *config.Config) {
	for _, name := range s.dns.Set(hostAddrs(cfg)) {
		s.log.Warn("a pool host name does not resolve; its host fails with dns_error until it does", "name", name)
	}
}

// followDNS recompiles the serving config when the addresses of a name
// changed, so that its hosts follow: addresses that stay keep their state,
// new ones join, and connections to those gone are no longer reused. It
// runs on the resolver's goroutine.
func (s *Server) followDNS() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining.Load() {
		return
	}
	old := s.cur.Load()
	rt, err := compile.Compile(old.Config, old, s.env())
	if err != nil {
		// A file the config names changed meanwhile and no longer
		// compiles: the hosts stay as they are until a reload fixes it.
		s.log.Warn("the addresses of a pool host name changed, but the config no longer compiles; hosts stay as they were until a reload", "err", err)
		return
	}
	s.cur.Store(rt)
	s.monitor.Wake()
	if s.running {
		// The recompile keeps the shared rate-limit store when its
		// settings stay; when it is a new one, it must run.
		s.runSharedLocked(rt)
	}
	old.Retire(rt)
}
