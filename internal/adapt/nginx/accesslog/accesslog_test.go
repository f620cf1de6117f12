package accesslog

import (
	"bytes"
	"compress/gzip"
	"context"
	"strings"
	"testing"
	"time"
)

func TestParseLine(t *testing.T) {
	tests := []struct {
		name, line string
		want       Entry
	}{
		{
			name: "combined with cache status",
			line: `203.0.113.50 - - [30/Aug/2024:19:06:00 +0300] "GET /?utm=1 HTTP/1.1" 200 4685 "-" "Uptime-Kuma/1.23.0" STALE 502`,
			want: Entry{Time: time.Date(2024, 8, 30, 19, 6, 0, 0, time.UTC), Client: "203.0.113.50", Method: "GET", Path: "/", Status: 200, Agent: "Uptime-Kuma/1.23.0", Cache: "STALE"},
		},
		{
			name: "plain combined",
			line: `10.0.0.1 - bob [05/Mar/2024:08:11:02 +0000] "POST /api/x HTTP/2.0" 502 157 "https://r/" "curl/8.0"`,
			want: Entry{Time: time.Date(2024, 3, 5, 8, 11, 2, 0, time.UTC), Client: "10.0.0.1", Method: "POST", Path: "/api/x", Status: 502, Agent: "curl/8.0"},
		},
		{
			name: "escaped raw bytes",
			line: `1.2.3.4 - - [02/Apr/2019:15:20:00 +0800] "GET /api/hotel?n=\xE4\xB8\x83 HTTP/1.1" 502 0 "-" "-"`,
			want: Entry{Time: time.Date(2019, 4, 2, 15, 20, 0, 0, time.UTC), Client: "1.2.3.4", Method: "GET", Path: "/api/hotel", Status: 502, Agent: "-", NonASCII: true},
		},
		{
			name: "json",
			line: `{"time_iso8601": "2024-03-05T08:11:02+00:00", "remote_addr": "1.1.1.1", "request": "GET /healthz HTTP/1.1", "status": 200, "upstream_cache_status": "hit"}`,
			want: Entry{Time: time.Date(2024, 3, 5, 8, 11, 2, 0, time.UTC), Client: "1.1.1.1", Method: "GET", Path: "/healthz", Status: 200, Cache: "HIT"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseLine(tt.line)
			if !ok || got != tt.want {
				t.Errorf("ParseLine = %+v, %v\nwant %+v", got, ok, tt.want)
			}
		})
	}
	for _, bad := range []string{"", "garbage", `1.1.1.1 - - [bad time] "GET / HTTP/1.1" 200 1`, `{"status": "x"}`} {
		if _, ok := ParseLine(bad); ok {
			t.Errorf("ParseLine(%q) accepted", bad)
		}
	}
}

func TestAnalyzer(t *testing.T) {
	log := strings.Join([]string{
		`203.0.113.50 - - [30/Aug/2024:19:06:00 +0300] "GET / HTTP/1.1" 200 4685 "-" "Uptime-Kuma/1.23.0" STALE 502`,
		`95.1.1.1 - - [30/Aug/2024:19:06:05 +0300] "GET /catalog/ HTTP/1.1" 200 10 "-" "Mozilla/5.0" STALE 502`,
		`95.1.1.2 - - [30/Aug/2024:19:07:05 +0300] "POST /pay/checkout HTTP/1.1" 502 10 "-" "Mozilla/5.0" - 502`,
		`95.1.1.3 - - [30/Aug/2024:19:08:05 +0300] "GET /healthz HTTP/1.1" 200 10 "-" "kube-probe/1.29" HIT -`,
		`not a log line`,
	}, "\n") + "\n"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(log))
	zw.Close()
	for name, data := range map[string][]byte{"plain": []byte(log), "gzip": gz.Bytes()} {
		t.Run(name, func(t *testing.T) {
			a := New(0)
			if err := a.Read(context.Background(), bytes.NewReader(data), "access.log"); err != nil {
				t.Fatal(err)
			}
			r := a.Result()
			if r.Lines != 5 || r.Parsed != 4 || r.Status5xx != 1 || r.Stale != 2 || r.MonitorCached != 2 {
				t.Errorf("result = %+v", r)
			}
			if r.StaleFirst.Format("15:04:05") != "19:06:00" || r.StaleLast.Format("15:04:05") != "19:06:05" {
				t.Errorf("stale from %v to %v", r.StaleFirst, r.StaleLast)
			}
			if len(r.Routes5xx) != 1 || r.Routes5xx[0] != (Count{"POST /pay/checkout", 1}) {
				t.Errorf("5xx routes = %v", r.Routes5xx)
			}
			if !strings.Contains(r.MonitorExample, "STALE") {
				t.Errorf("monitor example %q should be the stale one", r.MonitorExample)
			}
		})
	}
}

func TestIsHealthPath(t *testing.T) {
	for path, want := range map[string]bool{"/healthz": true, "/health/ready": true, "/status": true, "/nginx-health": true, "/healthcare": false, "/": false, "/api/status": false} {
		if got := IsHealthPath(path); got != want {
			t.Errorf("IsHealthPath(%q) = %v, want %v", path, got, want)
		}
	}
}
