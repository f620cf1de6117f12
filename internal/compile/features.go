package compile

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/access"
	"github.com/sturdyproxy/sturdy/internal/access/forwardauth"
	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/proxy"
	"github.com/sturdyproxy/sturdy/internal/proxy/compress"
	"github.com/sturdyproxy/sturdy/internal/proxy/static"
)

// routeFeatures compiles what route i does beside proxying: files,
// compression. Access control is compiled for all routes at once (zones
// are shared), in access.
func (c *compiler) routeFeatures(i int, r *proxy.Route) {
	h, warns, err := static.Compile(c.cfg, i)
	c.rt.Warnings = append(c.rt.Warnings, warns...)
	c.addErr(err)
	r.Static = h
	p, err := compress.Compile(c.cfg.Routes[i].Compress)
	if err != nil {
		c.addErr(fmt.Errorf("routes[%d].%w", i, err)) // its message starts with compress.KEY
	}
	r.Compress = p
}

// access compiles every route's access controls (allow/deny lists and
// htpasswd files are read here), carrying buckets, counts and caches over
// from the previous runtime.
func (c *compiler) access() {
	var prev *access.Compiled
	if c.prev != nil {
		prev = c.prev.Access
	}
	acc, err := access.Compile(c.cfg, access.Options{
		ForwardAuthUpstream: c.forwardAuthUpstream,
		OnShared:            c.env.OnShared,
		Read:                c.read,
	}, prev)
	if err != nil {
		c.addErr(err)
		return
	}
	c.rt.Access = acc
	for i, r := range c.rt.Routes {
		r.Access = acc.Route(i)
	}
}

// forwardAuthUpstream is how route i's forward-auth sub-requests travel:
// through a pool's health model when forward_auth.pool names one, else
// straight to the URL's host.
func (c *compiler) forwardAuthUpstream(_ int, fa *config.ForwardAuth) (forwardauth.Upstream, error) {
	if fa.Pool != "" {
		p := c.rt.poolBy[fa.Pool]
		if p == nil {
			return nil, errors.New("no pool named " + strconv.Quote(fa.Pool))
		}
		pi := c.poolIndex(fa.Pool)
		rc := config.Route{Timeouts: config.Timeouts{Connect: config.Duration(min(fa.Timeout.D(), config.DefaultConnectTimeout)), ResponseHeader: fa.Timeout}}
		return &proxy.PoolTransport{Pool: p, Upstream: c.upstream(rc, c.cfg.Pools[pi])}, nil
	}
	if c.rt.authTransport == nil {
		if c.prev != nil && c.prev.authTransport != nil {
			c.rt.authTransport = c.prev.authTransport
		} else {
			c.rt.authTransport = &http.Transport{
				Proxy: nil, MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second,
				DisableCompression: true, ResponseHeaderTimeout: time.Minute,
			}
		}
	}
	return c.rt.authTransport, nil
}

// addErr records err: a config.ErrorList as it is, a config.Error, or
// errors that start with a key path ("routes[2].access[0]: ...", the form
// the feature packages use), positioned at that key's line.
func (c *compiler) addErr(err error) {
	if err == nil {
		return
	}
	var list config.ErrorList
	var one config.Error
	switch {
	case errors.As(err, &list):
		c.errs = append(c.errs, list...)
	case errors.As(err, &one):
		c.errs = append(c.errs, one)
	default:
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				c.addErr(e)
			}
			return
		}
		path, msg, ok := strings.Cut(err.Error(), ": ")
		if !ok || strings.ContainsAny(path, " \t") {
			path, msg = "", err.Error()
		}
		c.errs = append(c.errs, c.cfg.Errorf(path, "%s", msg))
	}
}
