package exhaust

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"
)

// DefaultReserve is how many spare file descriptors a Reserve holds: one
// per connection it can accept while the process has none left.
const DefaultReserve = 4

// Reserve holds a few spare file descriptors for a listener that must
// answer when sturdy has run out of them (the admin listener: /livez,
// /readyz, /metrics), as nginx's and libev's users keep a spare one: when
// accept fails for want of descriptors, one spare is closed and the
// connection accepted into its place; when that connection closes, the
// spare is taken again.
type Reserve struct {
	mu    sync.Mutex // guards files
	files []*os.File
	want  int
}

// NewReserve opens n spare descriptors (os.DevNull), as many as it can.
func NewReserve(n int) *Reserve {
	r := &Reserve{want: n}
	r.refill()
	return r
}

// Len is how many spares are held now.
func (r *Reserve) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.files)
}

// release closes one spare; false when none is left.
func (r *Reserve) release() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.files) == 0 {
		return false
	}
	last := len(r.files) - 1
	r.files[last].Close()
	r.files = r.files[:last]
	return true
}

// refill opens spares up to the number wanted, while descriptors are free.
func (r *Reserve) refill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.files) < r.want {
		f, err := os.Open(os.DevNull)
		if err != nil {
			return
		}
		r.files = append(r.files, f)
	}
}

// Close releases every spare.
func (r *Reserve) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.files {
		f.Close()
	}
	r.files = nil
}

// Listener wraps ln so that accepts that fail for want of descriptors are
// counted on t (one aggregated line per interval, one event per episode,
// never a line per error) and served from the reserve while it lasts;
// without a spare, it waits and tries again as net/http would, without
// returning the error. Other errors are returned.
func (r *Reserve) Listener(ln net.Listener, t *Tracker) net.Listener {
	return &reserveListener{Listener: ln, res: r, t: t, done: make(chan struct{})}
}

type reserveListener struct {
	net.Listener
	res  *Reserve
	t    *Tracker
	done chan struct{}
	once sync.Once
}

func (l *reserveListener) Accept() (net.Conn, error) {
	var pause time.Duration
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			l.res.refill() // spares a closing connection could not take again
			return c, nil
		}
		if !l.t.AcceptFailed(err) {
			return nil, err
		}
		// A spare's descriptor may be taken by another part of the process
		// before the accept: then the next spare is tried.
		for outOfFiles(err) && l.res.release() {
			var c net.Conn
			if c, err = l.Listener.Accept(); err == nil {
				return &reservedConn{Conn: c, res: l.res}, nil
			}
		}
		pause = min(max(2*pause, 5*time.Millisecond), time.Second)
		select {
		case <-time.After(pause):
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
}

func (l *reserveListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

func outOfFiles(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// reservedConn is a connection accepted into a spare's place; closing it
// takes the spare again.
type reservedConn struct {
	net.Conn
	res  *Reserve
	once sync.Once
}

func (c *reservedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.res.refill)
	return err
}

type reservedKey struct{}

// ConnContext marks the requests of a connection accepted into a spare's
// place (for http.Server.ConnContext).
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if _, ok := c.(*reservedConn); ok {
		return context.WithValue(ctx, reservedKey{}, true)
	}
	return ctx
}

// CloseReserved answers the requests of a connection accepted into a
// spare's place with Connection: close, so that the spare is taken again
// as soon as the answer is out, not when the client's keep-alive ends.
func CloseReserved(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Context().Value(reservedKey{}) != nil {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}
