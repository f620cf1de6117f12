package nginx

import (
	"slices"
	"testing"
	"time"
)

func site(t *testing.T, src string) *Site {
	t.Helper()
	cfg, err := Parse("m.conf", []byte(src), Options{FS: mapFS{}})
	if err != nil {
		t.Fatal(err)
	}
	return NewSite(cfg)
}

func TestSiteUpstreams(t *testing.T) {
	s := site(t, `http {
  upstream u {
    ip_hash;
    zone u 64k;
    server 10.0.0.1 weight=3 max_fails=5 fail_timeout=30s;
    server backend.internal:8080 backup;
    server [::1]:9000 down max_conns=10 slow_start=10s;
    server unix:/run/app.sock;
    keepalive 32;
    check interval=5000 rise=2 fall=5 timeout=3000 type=http;
  }
}`)
	u := s.Upstream("u")
	if u == nil || len(u.Servers) != 4 || u.Balance.Name != "ip_hash" || u.Keepalive != 32 || u.Zone == nil || u.Check == nil {
		t.Fatalf("upstream = %+v", u)
	}
	a, b, c, d := u.Servers[0], u.Servers[1], u.Servers[2], u.Servers[3]
	if a.Addr != "10.0.0.1:80" || a.Weight != 3 || a.MaxFails != 5 || !a.MaxFailsSet || a.FailTimeout != 30*time.Second || a.IsHostname() {
		t.Errorf("server 1 = %+v", a)
	}
	if b.Addr != "backend.internal:8080" || !b.Backup || !b.IsHostname() || b.MaxFails != DefaultMaxFails || b.FailTimeout != DefaultFailTimeout || b.MaxFailsSet {
		t.Errorf("server 2 = %+v", b)
	}
	if c.Addr != "[::1]:9000" || !c.Down || c.MaxConns != 10 || !slices.Equal(c.Other, []string{"slow_start=10s"}) || c.IsHostname() {
		t.Errorf("server 3 = %+v", c)
	}
	if !d.Unix || d.IsHostname() {
		t.Errorf("server 4 = %+v", d)
	}
}

func TestSiteServers(t *testing.T) {
	s := site(t, `worker_processes 4;
events { worker_connections 2048; }
http {
  proxy_read_timeout 30s;
  error_page 502 /502.html;
  upstream app { server 10.0.0.1:8080; }
  server { server_name first.example; location / { proxy_pass http://app; } }
  server {
    listen 443 ssl http2 default_server;
    listen [::]:443 ssl;
    listen unix:/run/nginx.sock;
    server_name second.example *.second.example;
    proxy_read_timeout 90s;
    location ^~ /api/ {
      proxy_pass http://app/v2/;
      location /api/slow { proxy_read_timeout 300s; proxy_pass http://10.0.0.9; }
    }
    location = /exact { proxy_pass https://$backend; }
    location ~* \.php$ { fastcgi_pass unix:/x; }
    location @fallback { proxy_pass http://app; }
  }
}`)
	if s.WorkerProcesses() != 4 || s.WorkerConnections() != 2048 || len(s.Servers) != 2 {
		t.Fatalf("workers %d, connections %d, servers %d", s.WorkerProcesses(), s.WorkerConnections(), len(s.Servers))
	}
	first, second := s.Servers[0], s.Servers[1]
	if !first.Listens[0].Implicit || first.Listens[0].Addr != "*:80" || !slices.Equal(first.DefaultFor, []string{"*:80"}) {
		t.Errorf("first server listens %+v, default for %v", first.Listens[0], first.DefaultFor)
	}
	if !slices.Equal(second.DefaultFor, []string{"*:443", "[::]:443", "unix:/run/nginx.sock"}) {
		t.Errorf("second server default for %v", second.DefaultFor)
	}
	l := second.Listens[0]
	if l.Addr != "*:443" || !l.SSL || !l.HTTP2 || !l.Default || second.Listens[1].Addr != "[::]:443" || !second.Listens[2].Unix {
		t.Errorf("listens = %+v %+v %+v", l, second.Listens[1], second.Listens[2])
	}
	if len(second.Locations) != 5 {
		t.Fatalf("locations = %d", len(second.Locations))
	}
	api, slow, exact, php, named := second.Locations[0], second.Locations[1], second.Locations[2], second.Locations[3], second.Locations[4]
	if api.Modifier != "^~" || api.Path != "/api/" || api.Target.Upstream == nil || api.Target.URI != "/v2/" {
		t.Errorf("api = %+v target %+v", api, api.Target)
	}
	if got := slow.Get1("proxy_read_timeout").Arg(0); got != "300s" {
		t.Errorf("slow read timeout = %s", got)
	}
	if got := api.Get1("proxy_read_timeout").Arg(0); got != "90s" {
		t.Errorf("api inherits read timeout %s, want the server's 90s", got)
	}
	if got := api.Get("error_page"); len(got) != 1 || got[0].Arg(0) != "502" {
		t.Errorf("error_page not inherited from http: %v", got)
	}
	if slow.Target.Upstream != nil || slow.Target.HostPort() != "10.0.0.9:80" {
		t.Errorf("slow target = %+v", slow.Target)
	}
	if exact.Modifier != "=" || !exact.Target.Variable || exact.Target.Scheme != "https" {
		t.Errorf("exact = %+v target %+v", exact, exact.Target)
	}
	if php.Modifier != "~*" || php.ProxyPass != nil || !named.Named {
		t.Errorf("php %+v named %+v", php, named)
	}
	if first.Label() != "first.example" || len(second.Proxied()) != 4 {
		t.Errorf("label %q, proxied %d", first.Label(), len(second.Proxied()))
	}
}

func TestUnits(t *testing.T) {
	times := map[string]time.Duration{
		"30": 30 * time.Second, "10s": 10 * time.Second, "500ms": 500 * time.Millisecond, "1m": time.Minute,
		"1h 30m": 90 * time.Minute, "1h30m": 90 * time.Minute, "2d": 48 * time.Hour, "1w": 7 * 24 * time.Hour,
	}
	for in, want := range times {
		if got, err := ParseTime(in); err != nil || got != want {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "10q", "-5", "1234567890123s"} {
		if _, err := ParseTime(bad); err == nil {
			t.Errorf("ParseTime(%q) accepted", bad)
		}
	}
	sizes := map[string]int64{"512": 512, "8k": 8 << 10, "10m": 10 << 20, "1G": 1 << 30, "0": 0}
	for in, want := range sizes {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "m", "-1k", "1t"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

// TestRealConfigs parses every config under testdata/cases.
func TestRealConfigs(t *testing.T) {
	tests := []struct {
		dir                       string
		files, servers, upstreams int
	}{
		{"000-waf-scanner", 3, 1, 1},
		{"001-ingress-default-server", 4, 6, 5},
		{"002-slow-route", 1, 1, 1},
		{"003-malformed-url", 1, 1, 1},
		{"004-stale-cache", 1, 1, 1},
		{"debian-default", 7, 3, 1},
		{"k8s-ingress", 6, 13, 13},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			cfg, err := ParseFile("testdata/cases/"+tt.dir+"/nginx.conf", Options{})
			if err != nil {
				t.Fatal(err)
			}
			s := NewSite(cfg)
			if len(cfg.Files) != tt.files || len(s.Servers) != tt.servers || len(s.Upstreams) != tt.upstreams {
				t.Errorf("files %d servers %d upstreams %d; want %d %d %d", len(cfg.Files), len(s.Servers), len(s.Upstreams), tt.files, tt.servers, tt.upstreams)
			}
		})
	}
}
