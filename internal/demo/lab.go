package demo

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Who the simulated clients are, as they name themselves to sturdy in
// X-Forwarded-For (documentation addresses, RFC 5737).
var (
	VisitorAddrs = []string{"198.51.100.11", "198.51.100.12", "198.51.100.13", "198.51.100.14"}
	ScannerAddr  = "203.0.113.66"
)

// The scanner's pace and its bound: it stops by itself.
const (
	scannerEvery = 100 * time.Millisecond
	scannerFor   = time.Minute
)

// visitorPaths are what the visitors ask for: every route of the demo.
var visitorPaths = []string{"/", "/api/hello", "/cached/page", "/", "/api/items", "/cached/news"}

// scannerPaths are what a vulnerability scanner asks for.
var scannerPaths = []string{"/wp-login.php", "/.env", "/admin/config.php", "/phpmyadmin/index.php", "/.git/config", "/cgi-bin/test.cgi?id=1%27%20OR%20%271%27%3D%271"}

// Options configure a Lab.
type Options struct {
	// Listen is sturdy's listener (host:port), where the visitors, the
	// scanner and the malformed requests go. Required.
	Listen string
	// Backends are the three backends' addresses. Default BackendAddrs.
	Backends []string
	// Visitors is how many simulated visitors send requests, about one a
	// second each. 0 means len(VisitorAddrs); negative means none.
	Visitors int
}

// Lab is a running demo: the backends, the simulated visitors and the
// scanner. New binds the backends' addresses; Run serves them and sends
// the traffic until its context ends.
type Lab struct {
	listen   string
	backends []*backend
	visitors []string
	client   *http.Client

	visitorsOn atomic.Bool
	visits     counts
	scans      counts

	mu        sync.Mutex      // guards ctx, scan, malformed
	ctx       context.Context // Run's, while it runs
	scan      *scanRun        // non-nil while the scanner runs
	malformed []MalformedResult
	wg        sync.WaitGroup // the scanner, started by the controls
}

// scanRun is one run of the scanner.
type scanRun struct {
	stop  context.CancelFunc
	done  chan struct{}
	until time.Time
}

// counts are a traffic source's answers.
type counts struct {
	sent, ok, failed, refused atomic.Uint64 // refused: 4xx (a shed client gets 429)
}

func (c *counts) add(status int, err error) {
	c.sent.Add(1)
	switch {
	case err != nil || status >= 500:
		c.failed.Add(1)
	case status >= 400:
		c.refused.Add(1)
	default:
		c.ok.Add(1)
	}
}

// New binds the backends. It fails, with nothing left listening, when an
// address is taken.
func New(o Options) (*Lab, error) {
	if o.Listen == "" {
		return nil, errors.New("demo: no listener address to send traffic to")
	}
	addrs := o.Backends
	if len(addrs) == 0 {
		addrs = BackendAddrs
	}
	l := &Lab{listen: o.Listen, client: &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 8, DisableCompression: true},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}}
	switch {
	case o.Visitors == 0:
		l.visitors = VisitorAddrs
	case o.Visitors > 0:
		for i := range o.Visitors {
			l.visitors = append(l.visitors, "198.51.100."+strconv.Itoa(11+i%200))
		}
	}
	for i, addr := range addrs {
		b, err := newBackend("b"+strconv.Itoa(i+1), addr, ScannerAddr)
		if err != nil {
			l.closeBackends()
			return nil, err
		}
		l.backends = append(l.backends, b)
	}
	l.visitorsOn.Store(len(l.visitors) > 0)
	return l, nil
}

// BackendAddrs returns the backends' addresses as bound.
func (l *Lab) BackendAddrs() []string {
	var out []string
	for _, b := range l.backends {
		out = append(out, b.addr)
	}
	return out
}

// Run serves the backends and sends the visitors' traffic until ctx ends,
// then stops the scanner and the backends and returns.
func (l *Lab) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, b := range l.backends {
		wg.Go(b.serve)
	}
	l.mu.Lock()
	l.ctx = ctx
	l.mu.Unlock()
	for i, ip := range l.visitors {
		wg.Go(func() { l.visit(ctx, ip, i) })
	}
	<-ctx.Done()
	l.mu.Lock()
	l.ctx = nil
	if l.scan != nil {
		l.scan.stop()
	}
	l.mu.Unlock()
	l.wg.Wait()
	l.closeBackends()
	wg.Wait()
	l.client.CloseIdleConnections()
	return nil
}

func (l *Lab) closeBackends() {
	for _, b := range l.backends {
		b.close()
	}
}

// visit is one simulated visitor: a request about every second, after a
// first second that lets sturdy start.
func (l *Lab) visit(ctx context.Context, ip string, n int) {
	t := time.NewTimer(time.Second + time.Duration(n)*250*time.Millisecond)
	defer t.Stop()
	for i := n; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if l.visitorsOn.Load() {
			status, err := l.get(ctx, ip, visitorPaths[i%len(visitorPaths)], "sturdy-demo-visitor")
			if ctx.Err() == nil {
				l.visits.add(status, err)
			}
		}
		t.Reset(750*time.Millisecond + rand.N(500*time.Millisecond))
	}
}

// get sends one GET through sturdy as client ip and reads the answer.
func (l *Lab) get(ctx context.Context, ip, path, agent string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+l.listen+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-Forwarded-For", ip)
	req.Header.Set("User-Agent", agent)
	resp, err := l.client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// startScanner starts the scanner for scannerFor, unless it runs already.
func (l *Lab) startScanner() (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil {
		return "", errors.New("the demo is not running")
	}
	if l.scan != nil {
		return "the scanner is running already, until " + l.scan.until.Format(time.TimeOnly), nil
	}
	ctx, cancel := context.WithTimeout(l.ctx, scannerFor)
	run := &scanRun{stop: cancel, done: make(chan struct{}), until: time.Now().Add(scannerFor)}
	l.scan = run
	l.wg.Go(func() {
		defer func() {
			l.mu.Lock()
			l.scan = nil
			l.mu.Unlock()
			cancel()
			close(run.done)
		}()
		t := time.NewTicker(scannerEvery)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			status, err := l.get(ctx, ScannerAddr, scannerPaths[i%len(scannerPaths)], "sturdy-demo-scanner")
			if ctx.Err() == nil {
				l.scans.add(status, err)
			}
		}
	})
	return "scanner " + ScannerAddr + " started for " + scannerFor.String() + ": the WAF in front of every backend answers it 502", nil
}

// stopScanner stops the scanner and waits for it.
func (l *Lab) stopScanner() string {
	l.mu.Lock()
	run := l.scan
	l.mu.Unlock()
	if run == nil {
		return "the scanner was not running"
	}
	run.stop()
	<-run.done
	return "scanner stopped"
}
