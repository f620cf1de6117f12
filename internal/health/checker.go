package health

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/outcome"
)

// checker probes every host of one pool. Each host has one goroutine, so at
// most one probe per host is ever in flight.
type checker struct {
	m      *Monitor
	p      *Pool
	cfg    Probe
	client *http.Client
	kicks  map[string]chan struct{} // by address: a request on the previous config's host may ask
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newChecker(m *Monitor, p *Pool) *checker {
	cfg := *p.cfg.Probe
	d := &net.Dialer{Timeout: cfg.Timeout}
	dial := d.DialContext
	if m.o.Dial != nil {
		dial = m.o.Dial(d)
	}
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         dial,
		MaxIdleConnsPerHost: 1,
		DisableCompression:  true,
		TLSClientConfig:     p.TLS,
		Protocols:           probeProtocols(p.cfg.Protocol), // grpccheck.go
	}
	if p.TLS != nil && p.TLS.ServerName == "" {
		// A host dialled at an address of its name is still that name to
		// its certificate.
		names := map[string]string{}
		for _, h := range p.Hosts {
			if name, _, err := net.SplitHostPort(h.Name); err == nil {
				names[h.Addr] = name
			}
		}
		if len(names) > 0 {
			tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				raw, err := dial(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				tc := p.TLS.Clone()
				if tc.ServerName = names[addr]; tc.ServerName == "" {
					tc.ServerName, _, _ = net.SplitHostPort(addr)
				}
				conn := tls.Client(raw, tc)
				if err := conn.HandshakeContext(ctx); err != nil {
					raw.Close()
					return nil, err
				}
				return conn, nil
			}
		}
	}
	c := &checker{
		m: m, p: p, cfg: cfg,
		// Probes use their own connections: a probe must not queue behind
		// traffic, nor traffic behind probes.
		client: &http.Client{
			Transport:     tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		kicks: map[string]chan struct{}{},
	}
	for _, h := range p.Hosts {
		c.kicks[h.Addr] = make(chan struct{}, 1)
	}
	return c
}

func (c *checker) start(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	c.cancel = cancel
	for _, h := range c.p.Hosts {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			// A panic in one probe loop starts that loop over; the host
			// keeps being probed.
			for ctx.Err() == nil && !c.m.guard("health checker "+c.p.Name, func() { c.run(ctx, h) }) {
			}
		}()
	}
}

func (c *checker) stop() {
	c.cancel()
	c.wg.Wait()
	c.client.CloseIdleConnections()
}

// kick asks for a probe of the host at addr now; one already asked for is
// enough.
func (c *checker) kick(addr string) {
	if k := c.kicks[addr]; k != nil {
		select {
		case k <- struct{}{}:
		default:
		}
	}
}

func (c *checker) run(ctx context.Context, h *Host) {
	// The first probe comes within one jitter, so that a restart does not
	// probe every host at the same instant.
	t := time.NewTimer(c.jitter())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kicks[h.Addr]:
		case <-t.C:
		}
		if h.Mode() != Maintenance {
			ok, detail, err := c.probe(ctx, h)
			switch {
			case ctx.Err() != nil:
				return // stopped mid-probe: that says nothing about the host
			case outcome.IsLocalExhaustion(err):
				// sturdy itself is out of descriptors, ports or memory:
				// the probe never reached the host, which it must not be
				// judged on (its traffic's failures are sturdy's too). A
				// probe its traffic asked for stays asked for.
			default:
				c.p.checkResult(h, ok, detail, time.Now())
			}
		}
		t.Stop()
		t.Reset(c.interval(h) + c.jitter())
	}
}

// interval is the wait before h's next probe: the fast interval while
// the host is in question (suspect, down, or healthy with its last probe
// failed, as HAProxy's fastinter), the usual one otherwise. A failing
// host that only its probes can find (little of its traffic reaching it,
// while sturdy was short of descriptors) took fall whole intervals, 15 s
// by default, and outlived the bound (simulator seeds 83, 250).
func (c *checker) interval(h *Host) time.Duration {
	switch h.Mode() {
	case Suspect, Down:
		return c.cfg.FastInterval
	}
	if h.checkFail.Load() > 0 {
		return c.cfg.FastInterval
	}
	return c.cfg.Interval
}

func (c *checker) jitter() time.Duration {
	if c.cfg.Jitter <= 0 {
		return 0
	}
	return rand.N(c.cfg.Jitter)
}

// probe sends one readiness request and judges its answer.
// probe sends one check to h: whether it passed, the answer in words, and
// the transport's error when there was no answer.
func (c *checker) probe(parent context.Context, h *Host) (bool, string, error) {
	ctx, cancel := context.WithTimeout(parent, c.cfg.Timeout)
	defer cancel()
	if c.cfg.GRPC {
		return c.probeGRPC(ctx, h)
	}
	req, err := http.NewRequestWithContext(ctx, c.cfg.Method, c.p.Scheme+"://"+h.Target+c.cfg.Path, nil)
	if err != nil {
		return false, err.Error(), nil
	}
	switch {
	case c.cfg.Host != "":
		req.Host = c.cfg.Host
	case h.Name != "":
		req.Host = h.Name // as configured, not the address it resolved to
	}
	req.Header.Set("User-Agent", "sturdy-health-check")
	resp, err := c.client.Do(req)
	if err != nil {
		return false, "request failed: " + shortErr(err), err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < c.cfg.ExpectLo || resp.StatusCode > c.cfg.ExpectHi {
		return false, fmt.Sprintf("status %d, expected %s", resp.StatusCode, c.cfg.Expect), nil
	}
	if c.cfg.ExpectBody != "" && !strings.Contains(string(body), c.cfg.ExpectBody) {
		return false, fmt.Sprintf("status %d but the body lacks %q", resp.StatusCode, c.cfg.ExpectBody), nil
	}
	return true, fmt.Sprintf("status %d", resp.StatusCode), nil
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
// pass; a healthy host goes down after fall failures in a row, or on the
// first when its traffic asked for the probe (askProbe); a down host
// comes back after rise passes, with slow start.
func (p *Pool) checkResult(h *Host, ok bool, detail string, now time.Time) {
	h.setCheck(CheckResult{Time: now, OK: ok, Detail: detail})
	a := p.cfg.Probe
	asked := h.probeAsked.Swap(false)
	if ok {
		h.checkFail.Store(0)
		n := h.checkOK.Add(1)
		switch h.Mode() {
		case Suspect:
			if p.probeDisagrees(h, detail, now) {
				return
			}
			p.restore(h, "readiness probe passed ("+detail+"); passive evidence cleared", now)
		case Down:
			if int(n) >= a.Rise && h.transition(Down, Healthy, "readiness probes passed", detail, now) {
				h.window.Reset()
				h.connectFailures.Store(0)
				h.slowStart(now, p.cfg.Passive.SlowStart)
				p.m.emit(event.Event{
					Type: event.HostUp, Pool: p.Name, Host: h.Addr,
					Message:  fmt.Sprintf("host up: %d readiness probes passed", n),
					Evidence: map[string]any{"check": detail},
				})
				p.trackEmpty(now)
			}
		}
		return
	}
	h.checkOK.Store(0)
	n := h.checkFail.Add(1)
	from := h.Mode()
	// A probe its traffic asked for (failures of routes served elsewhere)
	// confirms the traffic: one failure decides, as for a suspect host.
	if (from == Suspect || (from == Healthy && (int(n) >= a.Fall || asked))) &&
		h.transition(from, Down, "readiness probe failed", detail, now) {
		p.m.emit(event.Event{
			Type: event.HostDown, Severity: event.Warning, Pool: p.Name, Host: h.Addr,
			Message:  fmt.Sprintf("host down: readiness probe failed (%s)", detail),
			Evidence: map[string]any{"was": from.String(), "failed_probes": n, "check": fmt.Sprintf("%s %s", a.Method, a.Path)},
		})
		p.cut(h) // requests waiting on it go elsewhere now, not at their timeout
		p.trackEmpty(now)
	}
}

// probeDisagrees handles a passing probe of a suspect host: the probe and
// the traffic disagree. A host that passes its probe while failing real
// requests would loop suspect, restored, suspect forever and keep its
// share; after gray_failure.disagreements such times within
// gray_failure.within it is announced (probe_disagrees, with both sides of
// the evidence) and taken out like a passive ejection: for eject_time,
// doubling on repeats, within max_ejected. It reports whether the host
// stays out of rotation or suspect (true), or may be restored (false).
func (p *Pool) probeDisagrees(h *Host, detail string, now time.Time) bool {
	g := p.cfg.Passive.GrayFailure
	if !g.On() || !p.cfg.Passive.On() {
		return false
	}
	ns := now.UnixNano()
	h.mu.Lock()
	if h.grayHeld {
		h.mu.Unlock()
		return true // held in rotation as suspect; the tick decides when it returns
	}
	h.disagreed[h.ndisagree%len(h.disagreed)] = ns
	h.ndisagree++
	n := 0
	for _, t := range h.disagreed[:min(h.ndisagree, len(h.disagreed))] {
		if ns-t <= int64(g.Within) {
			n++
		}
	}
	reason, traffic := h.reason, h.evidence
	if n < g.Disagreements {
		h.mu.Unlock()
		return false
	}
	h.ndisagree = 0
	h.mu.Unlock()
	p.m.emit(event.Event{
		Type: event.ProbeDisagrees, Severity: event.Warning, Pool: p.Name, Host: h.Addr,
		Message: fmt.Sprintf("the readiness probe passes but real traffic fails: %d times in %s; taking the host out", n, g.Within),
		Evidence: map[string]any{
			"traffic": reason + ": " + traffic, "probe": fmt.Sprintf("%s %s: %s", p.cfg.Probe.Method, p.cfg.Probe.Path, detail),
			"disagreements": n, "within_seconds": g.Within.Seconds(),
		},
	})
	p.eject(h, "the readiness probe passes but real traffic fails", traffic, now)
	if h.Mode() == Suspect {
		// max_ejected leaves no room: it stays in rotation, tried only
		// when the healthy hosts cannot take a request.
		h.mu.Lock()
		h.grayHeld = true
		h.mu.Unlock()
	}
	return true
}
