package sim

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// answer is what one client request got.
type answer struct {
	at     time.Duration // when it was sent, since the run began
	id     string        // the request's number (innocents' requests)
	client string
	path   string
	post   bool // a POST, which is never replayed once sent
	status int  // 0: no answer (the connection failed)
	blamed bool // sturdy said the request itself failed (on two backends, or each time lately)
}

// answers collects every answer of a run; the clients append, the judge
// reads once they stopped.
type answers struct {
	mu  sync.Mutex // guards all
	all []answer
}

func (a *answers) add(x answer) {
	a.mu.Lock()
	a.all = append(a.all, x)
	a.mu.Unlock()
}

// maxRequests bounds one client's requests in a run, whatever its rate.
const maxRequests = 3000

// clients runs the run's innocent and faulty clients against the proxy
// at addr until the world's duration has passed.
type clients struct {
	nw    network
	w     *World
	addr  string
	since func() time.Duration
	out   *answers
}

func (c *clients) run(ctx context.Context) {
	var wg sync.WaitGroup
	for i, ip := range c.w.Clients {
		wg.Go(func() { c.innocent(ctx, i, ip) })
	}
	for i := range c.w.Faults {
		f := &c.w.Faults[i]
		if f.Kind.Owner() == ClassClient {
			wg.Go(func() { c.faulty(ctx, f) })
		}
	}
	wg.Wait()
}

func (c *clients) httpClient(ip string) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
				return c.nw.dial(ctx, ip, addr)
			},
			MaxIdleConnsPerHost: 2,
			DisableCompression:  true,
		},
		Timeout: 10 * time.Second,
	}
}

// pause waits d or until ctx ends; false when it ended.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// gap is an exponential wait for a client sending rate requests per
// second, at most ten mean gaps.
func gap(r *rand.Rand, rate float64) time.Duration {
	return time.Duration(min(r.ExpFloat64(), 10) / rate * float64(time.Second))
}

// innocent browses like a person: one request at a time over keep-alive,
// pages mostly, now and then a route's report, and, while a request
// fault lasts, now and then the request that kills whatever serves it.
func (c *clients) innocent(ctx context.Context, i int, ip string) {
	r := rand.New(rand.NewPCG(c.w.Seed, uint64(1000+i)))
	hc := c.httpClient(ip)
	defer hc.CloseIdleConnections()
	for n := 0; n < maxRequests; n++ {
		if !pause(ctx, gap(r, c.w.Rates[i])) {
			return
		}
		now := c.since()
		route := routeName(r.IntN(c.w.Routes))
		path := fmt.Sprintf("/%s/page/%d", route, r.IntN(100))
		method := "GET"
		switch x := r.Float64(); {
		case x < 0.25:
			path = "/" + route + "/report"
		case x < 0.40:
			// A form sent: never replayed once a host received it.
			method, path = "POST", fmt.Sprintf("/%s/form/%d", route, r.IntN(100))
		default:
			for _, f := range c.w.faultsAt(now, ClassRequest) {
				if r.Float64() < f.Rate {
					path = f.Owner
				}
			}
		}
		c.send(ctx, hc, method, ip, path, now, fmt.Sprintf("%s-%d", ip, n))
		if r.IntN(10) == 0 {
			hc.CloseIdleConnections() // a new visitor from the same address
		}
	}
}

func (c *clients) send(ctx context.Context, hc *http.Client, method, ip, path string, now time.Duration, id string) {
	var body io.Reader
	if method == "POST" {
		body = strings.NewReader("name=sim&comment=" + strings.Repeat("x", 200))
	}
	req, _ := http.NewRequestWithContext(ctx, method, "http://"+c.addr+path, body)
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if id != "" {
		req.Header.Set(idHeader, id)
	}
	a := answer{at: now, client: ip, path: path, id: id, post: method == "POST"}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			c.out.add(a)
		}
		return
	}
	text, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	a.status = resp.StatusCode
	a.blamed = strings.Contains(string(text), "this request failed the same way")
	c.out.add(a)
}

// faulty plays a faulty client while its fault lasts.
func (c *clients) faulty(ctx context.Context, f *Fault) {
	r := rand.New(rand.NewPCG(c.w.Seed, uint64(2000+f.Index)))
	if !pause(ctx, f.Start) {
		return
	}
	hc := c.httpClient(f.Owner)
	defer hc.CloseIdleConnections()
	for n := 0; n < maxRequests && c.since() < f.End; n++ {
		now := c.since()
		route := routeName(r.IntN(c.w.Routes))
		switch f.Kind {
		case ClientScan:
			c.send(ctx, hc, "GET", f.Owner, fmt.Sprintf("/%s/wp-admin/%d.php", route, n), now, "")
		case ClientMalformed:
			// A lying length ends with the client's leaving, which is
			// what makes the body short.
			chunked := r.IntN(2) == 0
			leave := 20 * time.Millisecond
			if chunked {
				leave = 0
			}
			c.raw(ctx, f.Owner, now, malformed(route, chunked), leave)
		case ClientStall:
			// Half the body, then nothing: sturdy cuts it at the
			// route's client_body timeout.
			c.raw(ctx, f.Owner, now, fmt.Sprintf("POST /%s/upload HTTP/1.1\r\nHost: sim\r\nContent-Length: 1000\r\n\r\n%s", route, strings.Repeat("x", 500)), 0)
		case ClientHangup:
			c.raw(ctx, f.Owner, now, fmt.Sprintf("GET /%s/think HTTP/1.1\r\nHost: sim\r\n\r\n", route), 50*time.Millisecond)
		}
		if !pause(ctx, gap(r, f.Rate)) {
			return
		}
	}
}

// malformed is a request whose body's framing lies: bad chunk sizes, or
// a length longer than what is sent before the client closes its side.
func malformed(route string, chunked bool) string {
	if chunked {
		return fmt.Sprintf("POST /%s/upload HTTP/1.1\r\nHost: sim\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nnot a chunk\r\n0\r\n\r\n", route)
	}
	return fmt.Sprintf("POST /%s/upload HTTP/1.1\r\nHost: sim\r\nContent-Length: 100\r\n\r\nshort", route)
}

// raw writes req on a connection of its own and reads the status line;
// leave, when not 0, hangs up that long after sending, before any answer.
func (c *clients) raw(ctx context.Context, ip string, now time.Duration, req string, leave time.Duration) {
	conn, err := c.nw.dial(ctx, ip, c.addr)
	if err != nil {
		return
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.WriteString(conn, req)
	}()
	if leave > 0 {
		pause(ctx, leave)
		conn.Close()
		<-done
		return
	}
	line, _ := bufio.NewReader(conn).ReadString('\n')
	conn.Close()
	<-done
	var status int
	fmt.Sscanf(line, "HTTP/1.1 %d", &status)
	c.out.add(answer{at: now, client: ip, path: "(raw)", status: status})
}
