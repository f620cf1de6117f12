package access

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/sturdyproxy/sturdy/internal/access/acl"
	"github.com/sturdyproxy/sturdy/internal/access/basicauth"
	"github.com/sturdyproxy/sturdy/internal/access/connlimit"
	"github.com/sturdyproxy/sturdy/internal/access/forwardauth"
	"github.com/sturdyproxy/sturdy/internal/access/ratelimit"
	"github.com/sturdyproxy/sturdy/internal/config"
)

// Compiled is the access state of one config: every route's Policy, the
// zones they share, and the shared store. Build it with Compile in the
// compile step; it reads the allow/deny and htpasswd files.
type Compiled struct {
	policies []*Policy // by route index; nil entries for routes without controls
	names    []string
	Rate     *ratelimit.Zones
	Conn     *connlimit.Zones
	// Shared is the Redis store of shared zones (nil when none). Its Run
	// must be running for the zones to come back to Redis after a failure.
	Shared    *ratelimit.Shared
	sharedCfg config.SharedLimits
}

// Options are what the compile step supplies.
type Options struct {
	// ForwardAuthUpstream returns what sends route i's forward-auth
	// sub-requests: for forward_auth.pool, the pool's health-checked
	// round tripper; otherwise a transport. Required when a route uses
	// forward_auth.
	ForwardAuthUpstream func(route int, cfg *config.ForwardAuth) (forwardauth.Upstream, error)
	// OnShared receives the shared store's reachability changes (for the
	// event log and webhooks). It must not block. May be nil.
	OnShared func(ratelimit.SharedEvent)
	// Read reads the allow/deny and htpasswd files: the compile's own
	// reads, so that the bytes compiled are the bytes it hashes.
	// os.ReadFile when nil.
	Read func(name string) ([]byte, error)
}

// Compile builds the access state of cfg, reading every file it names.
// prev, the running config's state (or nil), hands over rate buckets,
// in-flight counts, credential caches, counters and the shared store
// connection wherever their config is unchanged. The error lists every
// problem, each naming its key path (and file and line for file contents).
func Compile(cfg *config.Config, opts Options, prev *Compiled) (*Compiled, error) {
	c := &Compiled{policies: make([]*Policy, len(cfg.Routes)), names: make([]string, len(cfg.Routes))}
	var errs []error
	read := opts.Read
	if read == nil {
		read = os.ReadFile
	}
	if s := cfg.SharedLimits; s != nil {
		if prev != nil && prev.Shared != nil && prev.sharedCfg == *s {
			c.Shared = prev.Shared
		} else {
			c.Shared = ratelimit.NewShared(s, opts.OnShared)
		}
		c.sharedCfg = *s
	}
	var err error
	if c.Rate, err = ratelimit.CompileZones(cfg.RateLimitZones, c.Shared, prev.rate()); err != nil {
		return nil, err
	}
	if c.Conn, err = connlimit.CompileZones(cfg.ConnLimitZones, prev.conn()); err != nil {
		return nil, err
	}
	for i := range cfg.Routes {
		r := &cfg.Routes[i]
		path := fmt.Sprintf("routes[%d]", i)
		c.names[i] = r.Name
		p := &Policy{route: r.Name}
		var err error
		if p.acl, err = acl.Compile(path+".access", r.Access, read); err != nil {
			errs = append(errs, err)
		}
		if p.methods, err = CompileMethods(path+".methods", r.Methods); err != nil {
			errs = append(errs, err)
		}
		p.methodsStatus = r.MethodsStatus
		if p.rate, err = c.Rate.Route(path, r.Name, r.RateLimit); err != nil {
			errs = append(errs, err)
		}
		if p.conn, err = c.Conn.Route(path, r.Name, r.ConnLimit); err != nil {
			errs = append(errs, err)
		}
		prevPolicy := prev.policy(r.Name)
		if p.basic, err = basicauth.Compile(path+".basic_auth", r.BasicAuth, prevPolicy.basicAuth(), read); err != nil {
			errs = append(errs, err)
		}
		if r.ForwardAuth != nil {
			if opts.ForwardAuthUpstream == nil {
				errs = append(errs, fmt.Errorf("%s.forward_auth: no upstream for the auth service (Options.ForwardAuthUpstream)", path))
			} else if up, err := opts.ForwardAuthUpstream(i, r.ForwardAuth); err != nil {
				errs = append(errs, fmt.Errorf("%s.forward_auth: %v", path, err))
			} else if p.forward, err = forwardauth.Compile(path+".forward_auth", r.Name, r.ForwardAuth, up, prevPolicy.forwardAuth()); err != nil {
				errs = append(errs, err)
			}
		}
		if p.acl != nil || p.methods != nil || p.rate != nil || p.conn != nil || p.basic != nil || p.forward != nil {
			c.policies[i] = p
		}
	}
	if len(errs) > 0 {
		if c.Shared != nil && (prev == nil || c.Shared != prev.Shared) {
			c.Shared.Close()
		}
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// Route returns route i's Policy, nil when it has no access controls.
func (c *Compiled) Route(i int) *Policy {
	if c == nil || i < 0 || i >= len(c.policies) {
		return nil
	}
	return c.policies[i]
}

// Run keeps the shared store's probe going until ctx ends, then closes the
// store (without a shared store it only waits for ctx). Run it under the
// server's errgroup. A reload whose Compiled has the same Shared as before
// keeps the running Run; one with a new Shared starts the new Compiled's
// Run and ends the old one's.
func (c *Compiled) Run(ctx context.Context) error {
	if c == nil || c.Shared == nil {
		<-ctx.Done()
		return nil
	}
	return c.Shared.Run(ctx)
}

func (c *Compiled) rate() *ratelimit.Zones {
	if c == nil {
		return nil
	}
	return c.Rate
}

func (c *Compiled) conn() *connlimit.Zones {
	if c == nil {
		return nil
	}
	return c.Conn
}

func (c *Compiled) policy(route string) *Policy {
	if c == nil {
		return nil
	}
	for i, n := range c.names {
		if n == route {
			return c.policies[i]
		}
	}
	return nil
}

func (p *Policy) basicAuth() *basicauth.Auth {
	if p == nil {
		return nil
	}
	return p.basic
}

func (p *Policy) forwardAuth() *forwardauth.Auth {
	if p == nil {
		return nil
	}
	return p.forward
}

// BasicAuth is the route's basic auth (for its counters), or nil.
func (p *Policy) BasicAuth() *basicauth.Auth { return p.basicAuth() }

// ForwardAuth is the route's forward auth (for its counters), or nil.
func (p *Policy) ForwardAuth() *forwardauth.Auth { return p.forwardAuth() }
