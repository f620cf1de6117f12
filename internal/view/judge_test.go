package view

import (
	"strings"
	"testing"
)

func classes(ok, e5 uint64) map[string]uint64 {
	return map[string]uint64{"2xx": ok, "4xx": 0, "5xx": e5, "499": 3}
}

var routeCases = []struct {
	name         string
	total        map[string]uint64 // since start, the last minute included
	recent       map[string]uint64
	clientErrors uint64 // recent 5xx to attributed clients
	clientTotal  uint64 // the same since start
	level        string
	reason       string
}{
	{"no traffic", nil, nil, 0, 0, LevelOK, ""},
	{"all good", classes(10000, 0), classes(600, 0), 0, 0, LevelOK, ""},
	{"half the answers 5xx", classes(10000, 300), classes(300, 300), 0, 0, LevelCritical, "50.0% of answers were 5xx in the last 60s (300 of 600)"},
	{"at the threshold", classes(950, 50), classes(950, 50), 0, 0, LevelCritical, "5.0% of answers"},
	{"over the ratio with few errors", classes(20, 2), classes(20, 2), 0, 0, LevelWarning, "(2 of 22)"},
	{"low but usual", classes(100000, 2000), classes(980, 20), 0, 0, LevelOK, ""},
	{"low and above normal", classes(100000, 120), classes(980, 20), 0, 0, LevelWarning, "normally 0.10%, clearly above normal"},
	{"below the warning floor", classes(100000, 0), classes(1000, 5), 0, 0, LevelOK, ""},
	{"an attributed scanner's 5xx make a warning, not critical", classes(1000, 400), classes(600, 400), 400, 400, LevelWarning, "40.0% of answers were 5xx in the last 60s (400 of 1000); 400 of them to attributed clients"},
	{"scanner and real failures", classes(1000, 450), classes(550, 450), 400, 400, LevelCritical, "45.0% of answers were 5xx in the last 60s (450 of 1000); 400 of them"},
	{"every client attributed: still critical", classes(40, 20), classes(20, 20), 15, 15, LevelCritical, "50.0% of answers were 5xx"},
	{"an old scanner does not raise normal", classes(100000, 5000), classes(980, 20), 0, 4980, LevelWarning, "clearly above normal"},
}

// The route verdict: at least 5% 5xx (and 5 of them) in the last minute is
// critical, whatever came before; a smaller rise clearly above the route's
// normal is a warning; an attributed client's own failures do not count.
func TestJudgeRoute(t *testing.T) {
	for _, tc := range routeCases {
		t.Run(tc.name, func(t *testing.T) {
			r := Route{Requests: tc.total, ClientErrors: tc.clientTotal,
				Recent: RouteRecent{Seconds: 60, Requests: tc.recent, ClientErrors: tc.clientErrors}}
			JudgeRoute(&r)
			if r.Verdict.Level != tc.level || !strings.Contains(r.Verdict.Reason, tc.reason) {
				t.Errorf("verdict %+v, want %s with %q", r.Verdict, tc.level, tc.reason)
			}
		})
	}
}

// Right after start the window is short, and the reason says how short.
func TestJudgeRouteShortWindow(t *testing.T) {
	r := Route{Requests: classes(20, 20), Recent: RouteRecent{Seconds: 0.5, Requests: classes(20, 20)}}
	JudgeRoute(&r)
	if r.Verdict.Level != LevelCritical || !strings.Contains(r.Verdict.Reason, "in the last 0.5s (20 of 40)") {
		t.Errorf("%+v", r.Verdict)
	}
}

// A host stands out when failures attributed to it exceed its peers';
// failures every host shares (a scanner, a bad request) flag no host.
func TestJudgePool(t *testing.T) {
	host := func(addr string, requests, failures uint64) Host {
		return Host{Addr: addr, WindowRequests: requests, WindowFailures: failures,
			Recent: HostRecent{Seconds: 60, Attempts: 2 * requests, Failures: 2 * failures}}
	}
	p := Pool{Hosts: []Host{host("a", 200, 100), host("b", 200, 2), host("c", 200, 0)}}
	JudgePool(&p)
	if v := p.Hosts[0].Verdict; v.Level != LevelWarning || !strings.Contains(v.Reason, "50.0% of its recent requests failed and were attributed to it (100 of 200); the other hosts 0.50%") {
		t.Errorf("failing host: %+v", v)
	}
	if r := p.Hosts[0].Recent.FailureRatio; r != 0.5 {
		t.Errorf("recent failure ratio %v", r)
	}
	for _, h := range p.Hosts[1:] {
		if h.Verdict.Level != LevelOK {
			t.Errorf("host %s: %+v", h.Addr, h.Verdict)
		}
	}
	shared := Pool{Hosts: []Host{host("a", 200, 60), host("b", 200, 50), host("c", 200, 55)}}
	JudgePool(&shared)
	for _, h := range shared.Hosts {
		if h.Verdict.Level != LevelOK {
			t.Errorf("shared failures flag host %s: %+v", h.Addr, h.Verdict)
		}
	}
	alone := Pool{Hosts: []Host{host("a", 20, 10)}}
	JudgePool(&alone)
	if v := alone.Hosts[0].Verdict; v.Level != LevelWarning || strings.Contains(v.Reason, "other hosts") {
		t.Errorf("a host alone: %+v", v)
	}
}
