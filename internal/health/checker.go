package health

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/pool"
)

// checker probes every host of one pool. Each host has one goroutine, so at
// most one probe per host is ever in flight.
type checker struct {
	m      *Monitor
	p      *Pool
	cfg    config.ActiveCheck
	lo, hi int
	client *http.Client
	kicks  map[string]chan struct{} // by address: a request still holding the previous config's host may ask
	stop   chan struct{}
	wg     sync.WaitGroup
}

func newChecker(m *Monitor, p *Pool) *checker {
	cfg := *p.cfg.Active
	lo, hi, _ := config.ParseStatusRange(cfg.ExpectStatus)
	d := &net.Dialer{Timeout: cfg.Timeout.D()}
	dial := d.DialContext
	if m.dial != nil {
		dial = m.dial(d)
	}
	c := &checker{
		m: m, p: p, cfg: cfg, lo: lo, hi: hi,
		// Probes use their own connections: a probe must not queue behind
		// traffic, nor traffic behind probes.
		client: &http.Client{
			Transport: &http.Transport{
				Proxy:               nil,
				DialContext:         dial,
				MaxIdleConnsPerHost: 1,
				DisableCompression:  true,
				TLSClientConfig:     p.TLS,
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		kicks: map[string]chan struct{}{},
		stop:  make(chan struct{}),
	}
	for _, h := range p.Pool.Hosts {
		c.kicks[h.Addr] = make(chan struct{}, 1)
	}
	return c
}

func (c *checker) start() {
	for _, h := range c.p.Pool.Hosts {
		c.wg.Add(1)
		go c.run(h)
	}
}

func (c *checker) close() {
	close(c.stop)
	c.wg.Wait()
	c.client.CloseIdleConnections()
}

// kick asks for a probe of h now; a probe already asked for is enough.
func (c *checker) kick(h *pool.Host) {
	if k := c.kicks[h.Addr]; k != nil {
		select {
		case k <- struct{}{}:
		default:
		}
	}
}

func (c *checker) run(h *pool.Host) {
	defer c.wg.Done()
	// The first probe comes within one jitter, so that a restart does not
	// probe every host at the same instant.
	t := time.NewTimer(c.jitter())
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-c.kicks[h.Addr]:
		case <-t.C:
		}
		if h.Mode() != pool.Maintenance {
			ok, detail := c.probe(h)
			c.p.checkResult(h, ok, detail, time.Now())
		}
		t.Stop()
		t.Reset(c.interval(h) + c.jitter())
	}
}

func (c *checker) interval(h *pool.Host) time.Duration {
	switch h.Mode() {
	case pool.Suspect, pool.Down:
		return c.cfg.FastInterval.D()
	}
	return c.cfg.Interval.D()
}

func (c *checker) jitter() time.Duration {
	if c.cfg.Jitter <= 0 {
		return 0
	}
	return rand.N(c.cfg.Jitter.D())
}

// probe sends one readiness request and judges its answer.
func (c *checker) probe(h *pool.Host) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout.D())
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	scheme := "http://"
	if c.p.Pool.Scheme == "https" {
		scheme = "https://"
	}
	req, err := http.NewRequestWithContext(ctx, c.cfg.Method, scheme+h.Addr+c.cfg.Path, nil)
	if err != nil {
		return false, err.Error()
	}
	if c.cfg.Host != "" {
		req.Host = c.cfg.Host
	}
	req.Header.Set("User-Agent", "sturdy-health-check")
	resp, err := c.client.Do(req)
	if err != nil {
		return false, "request failed: " + shortErr(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < c.lo || resp.StatusCode > c.hi {
		return false, fmt.Sprintf("status %d, expected %s", resp.StatusCode, c.cfg.ExpectStatus)
	}
	if c.cfg.ExpectBody != "" && !strings.Contains(string(body), c.cfg.ExpectBody) {
		return false, fmt.Sprintf("status %d but the body lacks %q", resp.StatusCode, c.cfg.ExpectBody)
	}
	return true, fmt.Sprintf("status %d", resp.StatusCode)
}

func shortErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && len(s)-i < 60 {
		return s[i+2:]
	}
	return s
}

// checkResult applies one probe result. A suspect host goes down on its
// first failed probe (the probe decides) and back to healthy on its first
// pass; a healthy host goes down after fall failures in a row; a down host
// comes back after rise passes, with slow start.
func (p *Pool) checkResult(h *pool.Host, ok bool, detail string, now time.Time) {
	h.SetCheck(pool.CheckResult{Time: now, OK: ok, Detail: detail})
	a := p.cfg.Active
	if ok {
		h.CheckFail.Store(0)
		n := h.CheckOK.Add(1)
		switch h.Mode() {
		case pool.Suspect:
			p.restore(h, "readiness probe passed ("+detail+"); passive evidence cleared", now)
		case pool.Down:
			if int(n) >= a.Rise && h.Transition(pool.Down, pool.Healthy, "readiness probes passed", detail, now) {
				h.Window.Reset()
				h.ConnectFailures.Store(0)
				h.SlowStart(now, p.cfg.Passive.SlowStart.D())
				p.m.emit(event.Event{
					Type: event.HostUp, Pool: p.Pool.Name, Host: h.Addr,
					Message:  fmt.Sprintf("host up: %d readiness probes passed", n),
					Evidence: map[string]any{"check": detail},
				})
				p.trackEmpty(now)
			}
		}
		return
	}
	h.CheckOK.Store(0)
	n := h.CheckFail.Add(1)
	from := h.Mode()
	if (from == pool.Suspect || (from == pool.Healthy && int(n) >= a.Fall)) &&
		h.Transition(from, pool.Down, "readiness probe failed", detail, now) {
		p.m.emit(event.Event{
			Type: event.HostDown, Severity: event.Warning, Pool: p.Pool.Name, Host: h.Addr,
			Message:  fmt.Sprintf("host down: readiness probe failed (%s)", detail),
			Evidence: map[string]any{"was": from.String(), "failed_probes": n, "check": fmt.Sprintf("%s %s", a.Method, a.Path)},
		})
		p.trackEmpty(now)
	}
}
