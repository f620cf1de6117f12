package sim

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/server"
)

// Variant is where a run happens: the network and sturdy's front end.
type Variant struct {
	// Loopback runs on the kernel's sockets in real time; otherwise the
	// run is on pipes in memory and must be inside a testing/synctest
	// bubble for its fake clock (a 30 s run then takes well under a
	// second).
	Loopback bool
	// Frontend is the listener's front end, "native" or "net/http"; the
	// native one needs real sockets.
	Frontend string
}

func (v Variant) String() string {
	if v.Loopback {
		return "loopback " + v.Frontend
	}
	return "memory " + v.Frontend
}

// tail is how long a run goes on after its world's duration, so that
// what sturdy concludes late is seen, and answers drain.
const tail = 3 * time.Second

// Run plays w against a real sturdy (internal/server's) and judges what
// it concluded against the truth. Everything it starts is stopped when it
// returns.
func Run(w World, v Variant) (*Report, error) {
	if v.Frontend == "" {
		v.Frontend = "net/http"
	}
	if v.Frontend == "native" && !v.Loopback {
		return nil, fmt.Errorf("the native front end waits for readiness on the socket itself: it needs loopback")
	}
	var nw network = loopback{}
	if !v.Loopback {
		nw = newMemory()
	}
	t0 := time.Now()
	since := func() time.Duration { return time.Since(t0) }
	stop := make(chan struct{})
	seen := &ledger{hits: map[string][]int{}}
	stopHosts, err := serveHosts(nw, &w, since, stop, seen)
	if err != nil {
		return nil, err
	}
	defer stopHosts()
	defer close(stop)

	cfg, err := config.Parse([]byte(configFor(&w, v)), fmt.Sprintf("(simulated world %d)", w.Seed))
	if err != nil {
		return nil, err
	}
	inj := &injector{w: &w, since: since, rnd: rand.New(rand.NewPCG(w.Seed, 77))}
	opts := []server.Option{server.WithDialer(func(d *net.Dialer) func(context.Context, string, string) (net.Conn, error) {
		return inj.dial(nw.upstream(d))
	})}
	opts = append(opts, server.WithSockets(inj.sockets(nw)))
	srv, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), opts...)
	if err != nil {
		return nil, err
	}
	obs := observe(srv, &w, since)
	if err := srv.Start(); err != nil {
		return nil, err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), w.Duration)
	defer cancel()
	var wg sync.WaitGroup
	out := &answers{}
	wg.Go(func() { obs.sample(ctx) })
	cl := &clients{nw: nw, w: &w, addr: srv.Addr("web"), since: since, out: out}
	wg.Go(func() { cl.run(ctx) })
	wg.Wait()
	pause(context.Background(), tail)
	obs.last()
	r := judge(&w, v, obs, out.all)
	r.blamedReach(&w, out.all, seen)
	return r, nil
}

// configFor is sturdy's config for w: defaults, but for the route
// timeouts a 30 s world needs (a slow endpoint must time out, a stalled
// body be cut, within the run) and the pool's active checks when the
// world has them.
func configFor(w *World, v Variant) string {
	var b strings.Builder
	fmt.Fprintf(&b, "admin: { listen: \"off\" }\nlisteners: [ { name: web, listen: \"127.0.0.1:0\", frontend: %q } ]\nroutes:\n", v.Frontend)
	const limits = "timeouts: { response_header: 1s, client_body: 2s }"
	for i := range w.Routes {
		if i == 0 {
			fmt.Fprintf(&b, "  - { name: r0, default: true, pool: app, %s }\n", limits)
			continue
		}
		fmt.Fprintf(&b, "  - { name: %s, path: /%s/, pool: app, %s }\n", routeName(i), routeName(i), limits)
	}
	b.WriteString("pools:\n  - name: app\n    hosts:\n")
	for _, a := range w.Hosts {
		fmt.Fprintf(&b, "      - { addr: %q }\n", a)
	}
	if w.Active {
		b.WriteString("    health:\n      active: { path: /healthz }\n")
	}
	return b.String()
}

// injector makes sturdy itself run out of file descriptors while a
// sturdy fault lasts: that share of its upstream dials and of its
// accepts fail with EMFILE, as the kernel's would.
type injector struct {
	w     *World
	since func() time.Duration
	mu    sync.Mutex // guards rnd
	rnd   *rand.Rand
}

func (in *injector) fails() bool {
	for _, f := range in.w.faultsAt(in.since(), ClassSturdy) {
		in.mu.Lock()
		hit := in.rnd.Float64() < f.Rate
		in.mu.Unlock()
		if hit {
			return true
		}
	}
	return false
}

func (in *injector) dial(next func(context.Context, string, string) (net.Conn, error)) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if in.fails() {
			return nil, exhausted(addr)
		}
		return next(ctx, network, addr)
	}
}

type listenFunc func(network, addr string) (net.Listener, error)

func (f listenFunc) Listen(network, addr string) (net.Listener, error) { return f(network, addr) }

// ListenPacket is the kernel's: the simulated worlds serve no HTTP/3.
func (listenFunc) ListenPacket(network, addr string) (net.PacketConn, error) {
	return net.ListenPacket(network, addr)
}

func (in *injector) sockets(nw network) listenFunc {
	return func(network, addr string) (net.Listener, error) {
		var ln net.Listener
		var err error
		if src := nw.sockets(); src != nil {
			ln, err = src.Listen(network, addr)
		} else {
			ln, err = net.Listen(network, addr)
		}
		if err != nil {
			return nil, err
		}
		return &faultyListener{Listener: ln, in: in}, nil
	}
}

// faultyListener fails accepts while sturdy is out of descriptors. The
// kernel leaves the connection in the backlog when accept fails; so
// does this: the next Accept takes it.
type faultyListener struct {
	net.Listener
	in      *injector
	mu      sync.Mutex // guards pending
	pending net.Conn
}

func (l *faultyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	c := l.pending
	l.pending = nil
	l.mu.Unlock()
	if c == nil {
		var err error
		if c, err = l.Listener.Accept(); err != nil {
			return nil, err
		}
	}
	if l.in.fails() {
		l.mu.Lock()
		l.pending = c
		l.mu.Unlock()
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: errEMFILE}
	}
	return c, nil
}

func (l *faultyListener) Close() error {
	l.mu.Lock()
	if l.pending != nil {
		l.pending.Close()
		l.pending = nil
	}
	l.mu.Unlock()
	return l.Listener.Close()
}
