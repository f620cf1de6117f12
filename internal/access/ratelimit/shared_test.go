package ratelimit

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"

	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

// redisServer starts Debian's redis-server on a free loopback port, without
// persistence, and stops it when the test ends.
type redisServer struct {
	t    *testing.T
	port int
	cmd  *exec.Cmd
}

func startRedis(t *testing.T, port int) *redisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed (apt-get install -y redis-server); skipping the shared-limit test")
	}
	if port == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &redisServer{t: t, port: port, cmd: cmd}
	t.Cleanup(s.stop)
	if !testutil.Eventually(10*time.Second, func() bool {
		c, err := net.Dial("tcp", s.addr())
		if err != nil {
			return false
		}
		defer c.Close()
		c.Write([]byte("PING\r\n"))
		buf := make([]byte, 7)
		c.SetReadDeadline(time.Now().Add(time.Second))
		n, _ := c.Read(buf)
		return string(buf[:n]) == "+PONG\r\n"
	}) {
		t.Fatalf("redis-server on %s did not answer PING within 10s", s.addr())
	}
	return s
}

func (s *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

func (s *redisServer) stop() {
	if s.cmd.Process != nil && s.cmd.ProcessState == nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
}

// instance is one sturdy's view of a shared zone.
type instance struct {
	shared *Shared
	limits *Limits
	events chan SharedEvent
}

func newInstance(t *testing.T, addr string, burst int) *instance {
	t.Helper()
	in := &instance{events: make(chan SharedEvent, 8)}
	in.shared = NewShared(&config.SharedLimits{Redis: addr, Timeout: config.Duration(time.Second), Probe: config.Duration(50 * time.Millisecond)},
		func(e SharedEvent) { in.events <- e })
	zs, err := CompileZones([]config.RateLimitZone{{Name: "api", Key: "header:X-Api-Key", Rate: config.Rate{N: 1, Per: time.Minute}, Size: 1024, Shared: true}}, in.shared, nil)
	if err != nil {
		t.Fatal(err)
	}
	in.limits, _ = zs.Route("routes[0]", "api", []config.RateLimit{{Zone: "api", Burst: burst, NoDelay: true}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.shared.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return in
}

func (in *instance) decide(t *testing.T, key string) Verdict {
	return in.limits.Decide(request(t, "X-Api-Key", key), Client{}, time.Now()).Verdict
}

func (in *instance) event(t *testing.T, up bool) SharedEvent {
	t.Helper()
	select {
	case e := <-in.events:
		if e.Up != up {
			t.Fatalf("event %+v, want up=%v", e, up)
		}
		return e
	case <-time.After(10 * time.Second):
		t.Fatalf("no event (up=%v) within 10s", up)
	}
	return SharedEvent{}
}

// Two instances sharing a zone see one budget per key: with 1r/m and a
// burst of 3, four requests pass between them, whichever gets them. When
// Redis dies both fall back to local buckets (one event each) and go on
// limiting; when it is back they return to it (another event).
func TestSharedZoneIsOneBudgetAcrossInstancesAndFallsBackLocally(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server; skipped with -short")
	}
	rs := startRedis(t, 0)
	a, b := newInstance(t, rs.addr(), 3), newInstance(t, rs.addr(), 3)
	passed := 0
	for i := range 10 {
		in := a
		if i%3 == 1 {
			in = b
		}
		if in.decide(t, "team-1") == Allow {
			passed++
		}
	}
	if passed != 4 {
		t.Fatalf("%d of 10 requests passed across two instances, want burst+1 = 4", passed)
	}
	if a.decide(t, "team-2") != Allow || b.decide(t, "team-2") != Allow {
		t.Fatal("another key has its own budget")
	}
	if a.decide(t, "team-1") != Reject || b.decide(t, "team-1") != Reject {
		t.Fatal("team-1's budget is spent on both instances")
	}

	rs.stop()
	// Local buckets: each instance starts team-1 afresh and limits it alone.
	for _, in := range []*instance{a, b} {
		got := []Verdict{}
		for range 5 {
			got = append(got, in.decide(t, "team-1"))
		}
		if fmt.Sprint(got) != "[allow allow allow allow reject]" {
			t.Fatalf("on local buckets: %v, want 4 passed then refused", got)
		}
		if e := in.event(t, false); e.Err == nil || e.Addr != rs.addr() {
			t.Fatalf("down event %+v, want the address and the error", e)
		}
		if in.shared.Up() {
			t.Fatal("store still marked up")
		}
	}
	st, zst := a.limits.zonesStats()
	if st.Fallback != 5 || zst.SharedUp || !zst.Shared {
		t.Fatalf("stats %+v %+v, want 5 fallback decisions and the store down", st, zst)
	}

	startRedis(t, rs.port)
	a.event(t, true)
	b.event(t, true)
	// A new Redis holds no buckets: team-1 starts over, shared again.
	passed = 0
	for i := range 6 {
		in := a
		if i%2 == 1 {
			in = b
		}
		if in.decide(t, "team-1") == Allow {
			passed++
		}
	}
	if passed != 4 {
		t.Fatalf("after Redis came back %d of 6 passed across both, want 4 (one shared budget again)", passed)
	}
}

// zonesStats is the first Stat and ZoneStat of the route's first zone.
func (l *Limits) zonesStats() (Stat, ZoneStat) {
	z := l.ls[0].zone
	c := l.ls[0].c
	st := Stat{Fallback: c.Fallback.Load()}
	return st, ZoneStat{Shared: z.shared != nil, SharedUp: z.shared.Up()}
}

// The cost of a shared zone's decision: one round trip to a redis-server
// on loopback.
//
//	go test -run '^$' -bench Shared -benchmem ./internal/access/ratelimit
func BenchmarkSharedDecide(b *testing.B) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		b.Skip("redis-server not installed")
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", b.TempDir())
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	if !testutil.Eventually(10*time.Second, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		b.Fatal("redis-server did not start")
	}
	sh := NewShared(&config.SharedLimits{Redis: addr, Timeout: config.Duration(time.Second)}, nil)
	defer sh.Close()
	zs, _ := CompileZones([]config.RateLimitZone{{Name: "z", Key: "client_ip", Rate: config.Rate{N: 1000000, Per: time.Second}, Size: 1024, Shared: true}}, sh, nil)
	lim, _ := zs.Route("routes[0]", "api", []config.RateLimit{{Zone: "z", Burst: 1000000, NoDelay: true}})
	r := request(b)
	c := Client{Addr: "192.0.2.10"}
	b.ReportAllocs()
	for b.Loop() {
		lim.Decide(r, c, time.Now())
	}
	if st, _ := zs.Stats(); st[0].Fallback != 0 {
		b.Fatalf("%d decisions fell back: Redis was not used", st[0].Fallback)
	}
}
