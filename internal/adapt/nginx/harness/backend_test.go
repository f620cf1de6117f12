package harness

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
)

// record is what the backend received for one request.
type record struct {
	Addr    string // the backend address of the nginx config this port stands for
	Method  string
	URI     string // the request target as received: path and query
	Host    string
	Headers http.Header
}

// backendBody is the backend's fixed answer.
const backendBody = "answered by the recording backend\n"

// backend records requests on one loopback port per backend address of a
// config, keyed by the X-Harness-Id header the client sets.
type backend struct {
	mu      sync.Mutex
	records map[string]record // guarded by mu
	servers []*http.Server
	addrs   map[string]string // backend address in the config -> 127.0.0.1:port
}

func newBackend() *backend {
	return &backend{records: map[string]record{}, addrs: map[string]string{}}
}

// listen returns the loopback address standing for addr, opening a port
// for it on first use.
func (b *backend) listen(addr string) (string, error) {
	addr = socketKey(addr)
	if a, ok := b.addrs[addr]; ok {
		return a, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: b.handler(addr), ReadHeaderTimeout: 5 * time.Second}
	b.servers = append(b.servers, srv)
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			panic(err)
		}
	}()
	b.addrs[addr] = l.Addr().String()
	return l.Addr().String(), nil
}

func (b *backend) handler(addr string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Harness-Id")
		b.mu.Lock()
		b.records[id] = record{Addr: addr, Method: r.Method, URI: r.RequestURI, Host: r.Host, Headers: r.Header.Clone()}
		b.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		// X-Harness-Answer: 403 makes it answer that status (an auth
		// service refusing, a redirect to sign in), with a challenge.
		if code, err := strconv.Atoi(r.Header.Get("X-Harness-Answer")); err == nil && code >= 200 && code <= 599 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="harness"`)
			if code >= 300 && code < 400 {
				w.Header().Set("Location", "/signin")
			}
			w.WriteHeader(code)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(backendBody)))
		w.Write([]byte(backendBody))
	})
}

func (b *backend) take(id string) (record, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.records[id]
	delete(b.records, id)
	return r, ok
}

func (b *backend) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, s := range b.servers {
		s.Shutdown(ctx)
	}
}

// socketKey writes a unix-socket address one way (nginx reads
// unix:///run/x.sock as unix:/run/x.sock), so that both sides' names for a
// socket find the same port.
func socketKey(addr string) string {
	if p, ok := strings.CutPrefix(addr, "unix:"); ok {
		return "unix:" + path.Clean(p)
	}
	return addr
}
