package sim

import (
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// host is one backend of the run's pool, with a WAF in front of it that
// refuses the scanners (incident 000: the WAF answers for the host, so
// what sturdy sees from it is the host's address failing). It plays its
// own faults and the route's and the request's, which live on every host.
type host struct {
	w     *World
	i     int
	since func() time.Duration
	stop  <-chan struct{} // closed when the run ends: hung requests return
	seen  *ledger

	mu  sync.Mutex // guards rnd
	rnd *rand.Rand
}

func newHost(w *World, i int, since func() time.Duration, stop <-chan struct{}, seen *ledger) *host {
	return &host{w: w, i: i, since: since, stop: stop, seen: seen, rnd: rand.New(rand.NewPCG(w.Seed, uint64(i)+1))}
}

// idHeader carries a request's number from the innocent clients to the
// hosts, so that the judge knows which hosts a request reached.
const idHeader = "X-Sim-Request"

// ledger records which hosts each numbered request reached, attempts
// counted.
type ledger struct {
	mu   sync.Mutex // guards hits
	hits map[string][]int
}

func (l *ledger) add(id string, host int) {
	if id == "" {
		return
	}
	l.mu.Lock()
	l.hits[id] = append(l.hits[id], host)
	l.mu.Unlock()
}

// reached returns how many attempts of request id the hosts saw, and on
// how many distinct hosts.
func (l *ledger) reached(id string) (attempts, hosts int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[int]bool{}
	for _, h := range l.hits[id] {
		seen[h] = true
	}
	return len(l.hits[id]), len(seen)
}

func (h *host) chance(p float64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rnd.Float64() < p
}

// clientOf is the client as the WAF reads it from what sturdy forwards.
func clientOf(r *http.Request) string {
	if ip := r.Header.Get("X-Real-Ip"); ip != "" {
		return ip
	}
	xff, _, _ := strings.Cut(r.Header.Get("X-Forwarded-For"), ",")
	return strings.TrimSpace(xff)
}

func (h *host) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := h.since()
	probe := r.URL.Path == "/healthz"
	h.seen.add(r.Header.Get(idHeader), h.i)
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
	}
	for _, f := range h.w.faultsAt(now, ClassClient) {
		if f.Kind == ClientScan && clientOf(r) == f.Owner {
			if f.Reset {
				hangUp(w, true)
				return
			}
			http.Error(w, "blocked by the web application firewall", http.StatusBadGateway)
			return
		}
	}
	closes := false
	for _, f := range h.w.faultsAt(now, ClassHost) {
		if f.Index != h.i {
			continue
		}
		// A broken host fails its probe as well; a gray or a full one
		// passes it.
		hit := h.chance(f.Rate)
		switch f.Kind {
		case HostReset:
			if probe || hit {
				hangUp(w, true)
				return
			}
		case HostHang:
			if probe || hit {
				h.hang(r)
				return
			}
		case Host5xx:
			if probe || hit {
				http.Error(w, "internal error", http.StatusBadGateway)
				return
			}
		case HostGray:
			if !probe && hit {
				http.Error(w, "internal error", http.StatusBadGateway)
				return
			}
		case HostCloses:
			// It still plays the route's and the request's faults, which
			// live on every host: it answers what it answers, then closes.
			closes = !probe
		case HostShed:
			if !probe && hit {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "over capacity", http.StatusServiceUnavailable)
				return
			}
		}
	}
	if probe {
		io.WriteString(w, "ok")
		return
	}
	route, rest := splitRoute(r.URL.Path)
	for _, f := range h.w.faultsAt(now, ClassRoute) {
		if routeName(f.Index) != route {
			continue
		}
		if f.Kind == RouteSlow {
			h.hang(r)
			return
		}
		http.Error(w, "report failed", http.StatusBadGateway)
		return
	}
	for _, f := range h.w.faultsAt(now, ClassRequest) {
		if r.URL.Path == f.Owner {
			hangUp(w, false) // ACK, then FIN, no bytes (incident 003)
			return
		}
	}
	if rest == "/think" {
		select {
		case <-time.After(300 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
	if closes {
		h.answerAndClose(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	io.WriteString(w, "ok from "+h.w.HostIPs[h.i]+" "+r.URL.Path)
}

// answerAndClose answers and then closes the connection without having
// said so (no Connection: close), as a server whose keep-alive timeout
// is zero does: a connection the proxy keeps for the next request is
// already closing.
func (h *host) answerAndClose(w http.ResponseWriter, r *http.Request) {
	body := "ok from " + h.w.HostIPs[h.i] + " " + r.URL.Path
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	io.WriteString(w, body)
	rc := http.NewResponseController(w)
	rc.Flush() // the whole answer is out before the connection goes
	c, buf, err := rc.Hijack()
	if err != nil {
		return
	}
	buf.Flush()
	c.Close()
}

// hang answers nothing until sturdy gives up on the request or the run
// ends.
func (h *host) hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-h.stop:
	}
}

// splitRoute splits "/r1/page/3" into "r1" and "/page/3".
func splitRoute(p string) (string, string) {
	p = strings.TrimPrefix(p, "/")
	route, rest, _ := strings.Cut(p, "/")
	return route, "/" + strings.SplitN(rest, "/", 2)[0]
}

// hangUp closes the request's connection without an answer: with an RST
// (a crash), or with a FIN (a parser that gave up).
func hangUp(w http.ResponseWriter, rst bool) {
	c, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if rst {
		reset(c)
		return
	}
	c.Close()
}

// serveHosts starts one server per host of w on nw and returns a function
// that stops them all.
func serveHosts(nw network, w *World, since func() time.Duration, stop <-chan struct{}, seen *ledger) (func(), error) {
	var srvs []*http.Server
	var wg sync.WaitGroup
	closeAll := func() {
		for _, s := range srvs {
			s.Close()
		}
		wg.Wait()
	}
	for i, ip := range w.HostIPs {
		ln, err := nw.listen(ip)
		if err != nil {
			closeAll()
			return nil, err
		}
		w.Hosts[i] = ln.Addr().String()
		s := &http.Server{Handler: newHost(w, i, since, stop, seen), ReadHeaderTimeout: 5 * time.Second}
		srvs = append(srvs, s)
		wg.Go(func() { s.Serve(ln) })
	}
	return closeAll, nil
}

var _ net.Conn = (*memConn)(nil)
