package server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/testing/fake"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

// counted is a backend that can be stopped (connections refused) and
// started again on the same address, and counts the requests it answered.
type counted struct {
	t    *testing.T
	addr string
	srv  *http.Server
	n    atomic.Int64
}

func newCounted(t *testing.T, ip string) *counted {
	c := &counted{t: t, addr: ip + ":0"}
	c.start()
	t.Cleanup(c.stop)
	return c
}

func (c *counted) start() {
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		c.t.Fatal(err)
	}
	c.addr = ln.Addr().String()
	c.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.n.Add(1)
		io.WriteString(w, "ok")
	})}
	go c.srv.Serve(ln)
}

func (c *counted) stop() { c.srv.Close() }

// spread sends n GETs, from four clients at once, and returns how many
// each backend answered meanwhile, and how many answers were not 200.
func spread(t *testing.T, url string, bs []*counted, n int) ([]int64, int) {
	t.Helper()
	before := make([]int64, len(bs))
	for i, b := range bs {
		before[i] = b.n.Load()
	}
	var bad atomic.Int64
	var wg sync.WaitGroup
	for _, ip := range ips("127.0.0.", 4) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := fake.Client(ip, 5*time.Second)
			for i := range n / 4 {
				resp, err := c.Get(fmt.Sprintf("%s/s/%d", url, i))
				if err != nil {
					bad.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	got := make([]int64, len(bs))
	for i, b := range bs {
		got[i] = b.n.Load() - before[i]
	}
	return got, int(bad.Load())
}

func percents(got []int64) string {
	var total int64
	for _, n := range got {
		total += n
	}
	s := ""
	for i, n := range got {
		if i > 0 {
			s += "/"
		}
		s += fmt.Sprintf("%.0f", 100*float64(n)/float64(max(total, 1)))
	}
	return s + " %"
}

// evenly checks that the backends in want share the requests equally
// (within tol of the mean, relatively) and that the others got none.
func evenly(t *testing.T, got []int64, in []bool, tol float64) {
	t.Helper()
	var total, k int64
	for i, n := range got {
		if in[i] {
			total += n
			k++
		} else if n != 0 {
			t.Errorf("backend %d, out of rotation, got %d requests", i, n)
		}
	}
	mean := float64(total) / float64(k)
	for i, n := range got {
		if in[i] && (float64(n) < mean*(1-tol) || float64(n) > mean*(1+tol)) {
			t.Errorf("shares %v (%s): backend %d got %d, want %.0f ±%.0f%%", got, percents(got), i, n, mean, tol*100)
		}
	}
}

const sharesConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: site, default: true, pool: web } ]
pools:
  - name: web
    balance: {{balance}}
    hosts: [ {{hosts}} ]
    health: { passive: { eject_time: {{eject}}, max_eject_time: {{eject}}, slow_start: 1m } }
`

func sharesSetup(t *testing.T, n int, balance, eject string) (*Server, string, []*counted) {
	var bs []*counted
	hosts := ""
	for i := range n {
		b := newCounted(t, fmt.Sprintf("127.1.0.%d", i+1))
		bs = append(bs, b)
		if i > 0 {
			hosts += ", "
		}
		hosts += fmt.Sprintf("{ addr: %q }", b.addr)
	}
	s, url, _ := startSturdy(t, parseConfig(t, sharesConfig, map[string]string{"hosts": hosts, "balance": balance, "eject": eject}))
	return s, url, bs
}

// ejectStopped stops backend b and sends requests until the pool ejects it.
func ejectStopped(t *testing.T, s *Server, url string, b *counted, i int) {
	t.Helper()
	b.stop()
	c := fake.Client("127.0.0.9", 2*time.Second)
	h := s.Runtime().Pool("web").Hosts[i]
	for range 50 {
		if h.Mode() == health.Ejected {
			return
		}
		if resp, err := c.Get(url + "/"); err == nil {
			resp.Body.Close()
		}
	}
	t.Fatalf("host %s is %s after 50 requests to its stopped backend", h.Addr, h.Mode())
}

// When a host is out (ejected, drained) or ramping up after a return (slow
// start), its share goes to the others in proportion to their weights, not
// to its neighbour in the balancing order, which would be the next to
// overload.
func TestAnOutHostsShareIsSpreadEvenly(t *testing.T) {
	t.Parallel()
	const n = 1200
	for _, balance := range []string{"round_robin", "least_conn", "random_two"} {
		// least_conn and random_two even out requests in flight, not
		// counts: on a busy machine a backend that is slow for a moment
		// loses requests to its peers, so their shares wander (+25 % was
		// seen with the machine's load at 16 on 2 cores). The fault this
		// test is for, the out host's share going to one neighbour, gives
		// that neighbour +33 % of the mean with two hosts left and +50 %
		// with three: the tolerance stays below both.
		tol := 0.1
		if balance != "round_robin" {
			tol = 0.3
		}
		t.Run(balance, func(t *testing.T) {
			t.Run("3 hosts, one ejected", func(t *testing.T) {
				s, url, bs := sharesSetup(t, 3, balance, "1h")
				ejectStopped(t, s, url, bs[1], 1)
				got, bad := spread(t, url, bs, n)
				t.Logf("measured: %s 3 hosts, one ejected: %v (%s), %d not 200", balance, got, percents(got), bad)
				evenly(t, got, []bool{true, false, true}, tol)
			})
			t.Run("4 hosts, one ejected", func(t *testing.T) {
				s, url, bs := sharesSetup(t, 4, balance, "1h")
				ejectStopped(t, s, url, bs[2], 2)
				got, bad := spread(t, url, bs, n)
				t.Logf("measured: %s 4 hosts, one ejected: %v (%s), %d not 200", balance, got, percents(got), bad)
				evenly(t, got, []bool{true, true, false, true}, tol+0.02)
			})
			t.Run("3 hosts, one drained", func(t *testing.T) {
				s, url, bs := sharesSetup(t, 3, balance, "1h")
				if err := s.SetHostMode("web", bs[0].addr, "drain"); err != nil {
					t.Fatal(err)
				}
				got, bad := spread(t, url, bs, n)
				t.Logf("measured: %s 3 hosts, one drained: %v (%s), %d not 200", balance, got, percents(got), bad)
				evenly(t, got, []bool{false, true, true}, tol)
			})
			t.Run("3 hosts, one in slow start", func(t *testing.T) {
				s, url, bs := sharesSetup(t, 3, balance, "200ms")
				ejectStopped(t, s, url, bs[0], 0)
				bs[0].start()
				h := s.Runtime().Pool("web").Hosts[0]
				if !testutil.Eventually(3*time.Second, func() bool { return h.Mode() == health.Healthy }) {
					t.Fatalf("host %s is %s after its eject time", h.Addr, h.Mode())
				}
				got, bad := spread(t, url, bs, n)
				t.Logf("measured: %s 3 hosts, one in slow start: %v (%s), %d not 200", balance, got, percents(got), bad)
				// The ramping host takes a small share (10% of its own at
				// first); the other two split the rest evenly.
				if got[0] > n/3/2 {
					t.Errorf("the host in slow start got %d of %d requests", got[0], n)
				}
				evenly(t, []int64{0, got[1], got[2]}, []bool{false, true, true}, tol+0.02)
			})
		})
	}
}
