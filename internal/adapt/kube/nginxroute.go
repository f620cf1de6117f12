package kube

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// apply writes the route-level annotations into a route.
func (n *nginx) apply(r *config.Route, zone string) {
	if n.maxBody > 0 {
		r.MaxBodyBytes = n.maxBody
	}
	if n.connect > 0 {
		r.Timeouts.Connect = n.connect
	}
	if n.read > 0 {
		r.Timeouts.ResponseHeader = n.read
	}
	if n.rps > 0 || n.rpm > 0 {
		// ingress-nginx's burst is the rate times limit-burst-multiplier
		// (5), passed at once; refused requests get 503, as there.
		burst := 5 * n.rps
		if n.rps == 0 {
			burst = 5 * n.rpm
		}
		r.RateLimit = []config.RateLimit{{Zone: zone, Burst: int(min(burst, 1_000_000)), NoDelay: true, Status: 503}}
	}
	if len(n.allow) > 0 {
		for _, a := range n.allow {
			r.Access = append(r.Access, config.AccessRule{Allow: a})
		}
		r.Access = append(r.Access, config.AccessRule{Deny: "all"})
	}
	if n.authURL != "" {
		r.ForwardAuth = &config.ForwardAuth{URL: n.authURL, CopyHeaders: n.authHeaders}
	}
	if n.upstreamVhost != "" {
		// nginx's proxy_set_header Host: its variables are sturdy's too.
		r.HostHeader = n.upstreamVhost
	}
	if n.forwardPrefix != "" {
		r.RequestHeaders = &config.HeaderRules{Set: map[string]string{"X-Forwarded-Prefix": literal(n.forwardPrefix)}}
	}
}

// zone is the rate-limit zone of an Ingress with limit-rps or limit-rpm.
func (n *nginx) zone(name string) *config.RateLimitZone {
	switch {
	case n.rps > 0:
		return &config.RateLimitZone{Name: name, Key: config.KeyClientIP, Rate: config.Rate{N: n.rps, Per: time.Second}}
	case n.rpm > 0:
		return &config.RateLimitZone{Name: name, Key: config.KeyClientIP, Rate: config.Rate{N: n.rpm, Per: time.Minute}}
	}
	return nil
}

// pool adjusts a Service port's pool for the pool-level annotations; the
// variant suffix keeps differently-set pools of one Service apart.
func (n *nginx) pool(p config.Pool) config.Pool {
	if n.upstreamTLS {
		// ingress-nginx does not verify backends' certificates unless told
		// to (proxy-ssl-verify), and pods' certificates rarely name the
		// address sturdy dials.
		p.TLS = &config.UpstreamTLS{InsecureSkipVerify: true}
		p.Name += "+https"
	}
	if n.upstreamProto != "" {
		// gRPC is HTTP/2: h2c for GRPC, h2 over the TLS above for GRPCS.
		p.Protocol = n.upstreamProto
		p.Name += "+" + n.upstreamProto
	}
	if n.hashCookie != "" {
		p.Balance, p.HashKey = config.BalanceHash, "cookie:"+n.hashCookie
		p.Name += "+cookie"
	}
	return p
}

// nginxSize reads nginx's sizes: 1024, 8k, 8m, 1g; 0 lifts the limit.
func nginxSize(s string) (config.Size, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "k"), strings.HasSuffix(s, "K"):
		mult = 1 << 10
	case strings.HasSuffix(s, "m"), strings.HasSuffix(s, "M"):
		mult = 1 << 20
	case strings.HasSuffix(s, "g"), strings.HasSuffix(s, "G"):
		mult = 1 << 30
	}
	if mult > 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > (1<<40)/mult {
		return 0, fmt.Errorf("bad size")
	}
	if n == 0 {
		return 1 << 50, nil // nginx's 0: no limit
	}
	return config.Size(n * mult), nil
}

// nginxSeconds reads ingress-nginx's timeouts: seconds, with or without s.
func nginxSeconds(s string) (config.Duration, error) {
	n, err := strconv.Atoi(strings.TrimSuffix(s, "s"))
	if err != nil || n < 1 || n > 86400 {
		return 0, fmt.Errorf("bad timeout")
	}
	return config.Duration(time.Duration(n) * time.Second), nil
}
