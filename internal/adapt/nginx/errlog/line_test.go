package errlog

import (
	"testing"
	"time"
)

var lineTests = []struct {
	name       string
	line       string
	kind       Kind
	level      string
	conn       int64
	client     string
	request    string
	upstream   string
	host       string
	connecting bool
}{
	{
		name: "prematurely closed",
		line: `2024/03/05 08:11:02 [error] 1234#1234: *5678 upstream prematurely closed connection while reading response header from upstream, client: 1.2.3.4, server: example.com, request: "GET /x HTTP/1.1", upstream: "http://10.0.0.1:8080/x", host: "example.com"`,
		kind: PrematureClose, level: "error", conn: 5678, client: "1.2.3.4", request: "GET /x HTTP/1.1", upstream: "http://10.0.0.1:8080/x", host: "example.com",
	},
	{
		name: "no live upstreams",
		line: `2024/11/27 08:11:03 [error] 98946#0: *70041627 no live upstreams while connecting to upstream, client: 123.45.67.5, server: xxx.example.com, request: "POST /cb-api/captcha/send/mobile/unblock HTTP/1.1", upstream: "http://WEB/cb-api/captcha/send/mobile/unblock", host: "x.example.com"`,
		kind: NoLive, level: "error", conn: 70041627, client: "123.45.67.5", request: "POST /cb-api/captcha/send/mobile/unblock HTTP/1.1", upstream: "http://WEB/cb-api/captcha/send/mobile/unblock", host: "x.example.com", connecting: true,
	},
	{
		name: "timed out reading header",
		line: `2023/06/14 09:30:05 [error] 2231#0: *1 upstream timed out (110: Connection timed out) while reading response header from upstream, client: 172.16.3.4, server: bi.example.com, request: "POST /mdata/getdistinct HTTP/1.1", upstream: "http://10.1.1.21:8080/mdata/getdistinct", host: "bi.example.com"`,
		kind: TimedOut, level: "error", conn: 1, client: "172.16.3.4", request: "POST /mdata/getdistinct HTTP/1.1", upstream: "http://10.1.1.21:8080/mdata/getdistinct", host: "bi.example.com",
	},
	{
		name: "connect refused",
		line: `2024/03/05 06:44:03 [error] 31#0: *9 connect() failed (111: Connection refused) while connecting to upstream, client: 10.9.8.7, server: _, request: "GET / HTTP/1.1", upstream: "http://10.0.0.12:31820/", host: "m.example.com"`,
		kind: ConnectFailed, level: "error", conn: 9, client: "10.9.8.7", request: "GET / HTTP/1.1", upstream: "http://10.0.0.12:31820/", host: "m.example.com", connecting: true,
	},
	{
		name: "worker connections",
		line: `2024/03/05 07:35:15 [alert] 31#31: 1024 worker_connections are not enough`,
		kind: WorkerConns, level: "alert",
	},
	{
		name: "temporarily disabled",
		line: `2024/11/27 08:11:02 [warn] 98946#0: *70041162 upstream server temporarily disabled while reading response header from upstream, client: 123.45.67.5, server: portal.example.com, request: "GET /.env HTTP/1.1", upstream: "http://10.20.0.11:80/.env", host: "portal.example.com"`,
		kind: Disabled, level: "warn", conn: 70041162, client: "123.45.67.5", request: "GET /.env HTTP/1.1", upstream: "http://10.20.0.11:80/.env", host: "portal.example.com",
	},
	{
		name: "reset by peer",
		line: `2024/01/02 03:04:05 [error] 7#7: *8 recv() failed (104: Connection reset by peer) while reading response header from upstream, client: 1.1.1.1, server: s, request: "GET / HTTP/1.1", upstream: "http://[::1]:8080/", host: "s"`,
		kind: Reset, level: "error", conn: 8, client: "1.1.1.1", request: "GET / HTTP/1.1", upstream: "http://[::1]:8080/", host: "s",
	},
	{
		name: "resolver",
		line: `2024/03/05 08:00:01 [error] 31#31: *77 some-app.ns.svc.cluster.local could not be resolved (110: Operation timed out), client: 1.2.3.4, server: app, request: "GET / HTTP/1.1", host: "app"`,
		kind: Resolve, level: "error", conn: 77, client: "1.2.3.4", request: "GET / HTTP/1.1", host: "app",
	},
	{
		name: "quote inside the request",
		line: `2024/01/02 03:04:05 [error] 7#7: *8 upstream timed out (110: Connection timed out) while reading response header from upstream, client: 1.1.1.1, server: s, request: "GET /a"b HTTP/1.1", upstream: "http://h:1/a"b", host: "s"`,
		kind: TimedOut, level: "error", conn: 8, client: "1.1.1.1", request: `GET /a"b HTTP/1.1`, upstream: `http://h:1/a"b`, host: "s",
	},
	{
		name: "other notice",
		line: `2024/11/27 08:11:00 [notice] 98943#0: signal process started`,
		kind: Other, level: "notice",
	},
}

func TestParseLine(t *testing.T) {
	for _, tt := range lineTests {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := ParseLine([]byte(tt.line))
			if !ok {
				t.Fatal("not parsed")
			}
			if e.Kind != tt.kind || string(e.Level) != tt.level || e.Conn != tt.conn || string(e.Client) != tt.client ||
				string(e.Request) != tt.request || string(e.Upstream) != tt.upstream || string(e.Host) != tt.host || e.Connecting != tt.connecting {
				t.Errorf("got kind=%v level=%s conn=%d client=%s request=%q upstream=%s host=%s connecting=%v",
					e.Kind, e.Level, e.Conn, e.Client, e.Request, e.Upstream, e.Host, e.Connecting)
			}
			if e.Time.IsZero() || e.Time.Location() != time.UTC {
				t.Errorf("time = %v", e.Time)
			}
		})
	}
}

func TestParseLineRejects(t *testing.T) {
	for _, s := range []string{"", "hello", "2024/13/05 08:11:02 [error] x", "2024-03-05 08:11:02 [error] x", "\tat java.lang.Thread.run"} {
		if _, ok := ParseLine([]byte(s)); ok {
			t.Errorf("ParseLine(%q) accepted", s)
		}
	}
}

func TestHelpers(t *testing.T) {
	tests := []struct{ in, host, route string }{
		{"http://10.0.0.1:8080/x?y=1", "10.0.0.1:8080", ""},
		{"http://WEB/cb-api/x", "WEB", ""},
		{"https://[::1]:8443", "[::1]:8443", ""},
	}
	for _, tt := range tests {
		if got := string(UpstreamHost([]byte(tt.in))); got != tt.host {
			t.Errorf("UpstreamHost(%q) = %q, want %q", tt.in, got, tt.host)
		}
	}
	routes := map[string]string{
		"GET /x?y=1 HTTP/1.1":              "GET /x",
		"POST /mdata/getdistinct HTTP/1.1": "POST /mdata/getdistinct",
		"GET /a b HTTP/1.0":                "GET /a b",
		"garbage":                          "garbage",
	}
	for in, want := range routes {
		if got := string(RequestRoute([]byte(in))); got != want {
			t.Errorf("RequestRoute(%q) = %q, want %q", in, got, want)
		}
	}
	ascii := map[string]bool{
		"GET /x HTTP/1.1":                false,
		"GET /h?n=\xe4\xb8\x83 HTTP/1.1": true,
		`GET /h?n=\xE4\xB8 HTTP/1.1`:     true,
		`GET /h?n=\x41 HTTP/1.1`:         false,
		"GET /a\x01b HTTP/1.1":           true,
	}
	for in, want := range ascii {
		if got := NonASCII([]byte(in)); got != want {
			t.Errorf("NonASCII(%q) = %v, want %v", in, got, want)
		}
	}
}

func FuzzParseLine(f *testing.F) {
	for _, tt := range lineTests {
		f.Add([]byte(tt.line))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, ok := ParseLine(b)
		if ok {
			_ = RequestRoute(e.Request)
			_ = UpstreamHost(e.Upstream)
			_ = NonASCII(e.Request)
		}
		a := New(Options{MaxKeys: 4, MaxMinutes: 4, MaxEpisodes: 2})
		a.Line(b, len(b))
		a.Line(b, len(b))
		_ = a.Result()
	})
}
