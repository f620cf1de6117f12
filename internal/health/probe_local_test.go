package health

import (
	"context"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/event"
)

// sturdy out of descriptors: every probe fails at its own socket() and
// never reaches the host. That says nothing about the host, so no
// number of such probes takes it down, however urgently its traffic
// asked for one; once a descriptor is free again, the probe decides.
func TestProbesSturdyCouldNotSendDoNotJudgeTheHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var exhausted atomic.Bool
		exhausted.Store(true)
		rec := &recorder{}
		var probes atomic.Int64
		dial := func(*net.Dialer) func(context.Context, string, string) (net.Conn, error) {
			return func(_ context.Context, _, addr string) (net.Conn, error) {
				probes.Add(1)
				if exhausted.Load() {
					return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", syscall.EMFILE)}
				}
				return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
			}
		}
		m := NewMonitor(Options{Bus: rec, Dial: dial})
		probe := &Probe{Method: "GET", Path: "/healthz", ExpectLo: 200, ExpectHi: 399, Expect: "200-399",
			Interval: time.Second, FastInterval: time.Second, Timeout: time.Second, Rise: 1, Fall: 1}
		p := probedPool(t, m, probe)
		h := p.Hosts[0]
		c := newChecker(m, p)
		c.start(t.Context())
		defer c.stop()
		for i := range 10 {
			h.probeAsked.Store(i%2 == 0) // as its traffic's failures would
			c.kick(h.Addr)
			time.Sleep(time.Second)
			synctest.Wait()
		}
		if probes.Load() < 10 {
			t.Fatalf("%d probes tried in 10 s", probes.Load())
		}
		if h.Mode() != Healthy || rec.count(event.HostDown) != 0 {
			t.Fatalf("after %d probes sturdy could not send: host %s, %d host_down", probes.Load(), h.Mode(), rec.count(event.HostDown))
		}
		exhausted.Store(false)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if h.Mode() != Down {
			t.Fatalf("a probe that reached the host and was refused: host %s, want down", h.Mode())
		}
	})
}

// A healthy host whose probe failed is in question: its next probes come
// at the fast interval until it falls or passes (HAProxy's fastinter).
// At the usual interval a host only its probes could find took fall
// whole intervals to go down (15 s by default, simulator seeds 83, 250).
func TestAFailedProbeIsFollowedAtTheFastInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		var refusing atomic.Bool
		dial := func(*net.Dialer) func(context.Context, string, string) (net.Conn, error) {
			return func(_ context.Context, _, addr string) (net.Conn, error) {
				if !refusing.Load() {
					c, s := net.Pipe()
					go func() {
						defer s.Close()
						buf := make([]byte, 4096)
						s.Read(buf)
						s.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"))
					}()
					return c, nil
				}
				return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
			}
		}
		m := NewMonitor(Options{Bus: rec, Dial: dial})
		probe := &Probe{Method: "GET", Path: "/healthz", ExpectLo: 200, ExpectHi: 399, Expect: "200-399",
			Interval: 5 * time.Second, FastInterval: time.Second, Timeout: time.Second, Rise: 2, Fall: 3}
		p := probedPool(t, m, probe)
		h := p.Hosts[0]
		c := newChecker(m, p)
		c.start(t.Context())
		defer c.stop()
		time.Sleep(6 * time.Second) // a passing probe or two, at the usual interval
		synctest.Wait()
		if h.Mode() != Healthy {
			t.Fatalf("host %s before it fails, want healthy", h.Mode())
		}
		refusing.Store(true)
		// The next probe is due within 5 s; the two after it 1 s apart.
		time.Sleep(5*time.Second + 2500*time.Millisecond)
		synctest.Wait()
		if h.Mode() != Down {
			t.Fatalf("host %s 7.5 s after it began refusing, want down: fall 3 at the fast interval after the first failure", h.Mode())
		}
	})
}

// probedPool is a pool of one host, 10.0.0.1:80, with the config's
// passive defaults and probe as its active check.
func probedPool(t *testing.T, m *Monitor, probe *Probe) *Pool {
	t.Helper()
	cfg, err := config.Parse([]byte(`
listeners: [ { name: web, listen: 127.0.0.1:0 } ]
routes: [ { name: a, default: true, pool: p } ]
pools: [ { name: p, hosts: [ { addr: "10.0.0.1:80" } ] } ]
`), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPool(m, testAttributing, PoolConfig{Name: "p", Balance: "round_robin", FailStatuses: []int{502, 503, 504},
		Passive: passiveOf(cfg.Pools[0].Health.Passive), Probe: probe,
		Hosts: []HostSpec{{Addr: "10.0.0.1:80", Weight: 1}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
