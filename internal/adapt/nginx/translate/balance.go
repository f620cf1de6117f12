package translate

import (
	"fmt"
	"strings"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx"
	"github.com/sturdyproxy/sturdy/internal/config"
)

func (t *translator) balance(p *pool, u *nginx.Upstream) {
	b := u.Balance
	if b == nil {
		return
	}
	t.use(b)
	switch b.Name {
	case "least_conn":
		p.balance = config.BalanceLeastConn
	case "ip_hash":
		p.balance, p.hashKey = config.BalanceHash, "client_ip"
		p.comments = append(p.comments, "ip_hash pinned each client to a server; sturdy's hash is consistent, so ejecting a host moves only its clients, spread over all the others")
	case "hash":
		key := hashKey(b.Arg(0))
		if key == "" {
			t.skip(b, fmt.Sprintf("hash on %q: sturdy hashes on client_ip, header:NAME or cookie:NAME; round robin is used", b.Arg(0)))
			return
		}
		p.balance, p.hashKey = config.BalanceHash, key
		if len(b.Args) < 2 || b.Args[1] != "consistent" {
			p.comments = append(p.comments, "sturdy's hash balancing is always consistent (nginx's was not unless `consistent` was given)")
		}
	case "random":
		p.balance = config.BalanceRandomTwo
		if len(b.Args) == 0 {
			p.comments = append(p.comments, "nginx picked uniformly at random; sturdy's random_two picks the less loaded of two random hosts")
		}
	case "least_time":
		p.balance = config.BalanceLeastConn
		p.comments = append(p.comments, "least_time (NGINX Plus) became least_conn")
	default:
		t.skip(b, b.Name+" has no sturdy equivalent; round robin is used")
	}
}

// hashKey maps an nginx hash key to sturdy's, "" when it cannot.
func hashKey(v string) string {
	switch {
	case v == "$remote_addr" || v == "$binary_remote_addr":
		return "client_ip"
	case strings.HasPrefix(v, "$http_") && !strings.ContainsAny(v[6:], "$ "):
		return "header:" + headerName(v[6:])
	case strings.HasPrefix(v, "$cookie_") && !strings.ContainsAny(v[8:], "$ "):
		return "cookie:" + v[8:]
	}
	return ""
}

// headerName turns nginx's $http_x_user_id spelling back into X-User-Id.
func headerName(v string) string {
	parts := strings.Split(v, "_")
	for i, p := range parts {
		if p != "" {
			parts[i] = strings.ToUpper(p[:1]) + p[1:]
		}
	}
	return strings.Join(parts, "-")
}

func (t *translator) keepalive(p *pool, u *nginx.Upstream) {
	if d := last(u.Dir.All("keepalive_timeout")); d != nil {
		if v, err := nginx.ParseTime(d.Arg(0)); err == nil && v > 0 {
			p.idle = v
		}
	}
	if u.Keepalive <= 0 {
		return
	}
	per := (u.Keepalive + len(p.hosts) - 1) / len(p.hosts)
	if per <= config.DefaultMaxIdleConnsPerHost {
		p.maxIdle = per
		p.comments = append(p.comments, fmt.Sprintf("keepalive %d (per nginx worker, all servers) became %d idle connections per host", u.Keepalive, per))
		return
	}
	p.comments = append(p.comments, fmt.Sprintf("keepalive %d (per nginx worker) is far above what %d hosts need; sturdy keeps its default of %d idle connections per host (incident 001 ran 10240 and saw no latency change at 256)", u.Keepalive, len(p.hosts), config.DefaultMaxIdleConnsPerHost))
}
