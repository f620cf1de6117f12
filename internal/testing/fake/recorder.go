package fake

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Recorder is a backend that reports exactly the bytes it received, per
// connection, as they came off the wire: what a proxy sent it, half
// requests included. It answers each complete request 200 with the
// request's method, target and body length, and echoes the request's
// header fields as "Got-Name: value" lines in the body. Handler, when
// set, answers instead.
type Recorder struct {
	Addr string
	// Handler answers instead of the echo, when set before traffic.
	Handler http.Handler

	ln    net.Listener
	srv   *http.Server
	mu    sync.Mutex // guards conns
	conns []*recConn
	open  atomic.Int64
	reqs  atomic.Int64
	wg    sync.WaitGroup
}

type recConn struct {
	net.Conn
	r      *Recorder
	mu     sync.Mutex // guards buf, closed
	buf    bytes.Buffer
	closed bool // the peer closed (EOF or error on read)
	once   sync.Once
}

func (c *recConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.buf.Write(p[:n])
	if err != nil {
		c.closed = true
	}
	c.mu.Unlock()
	return n, err
}

func (c *recConn) Close() error {
	c.once.Do(func() { c.r.open.Add(-1) })
	return c.Conn.Close()
}

type recListener struct {
	net.Listener
	r *Recorder
}

func (l recListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	rc := &recConn{Conn: c, r: l.r}
	l.r.mu.Lock()
	l.r.conns = append(l.r.conns, rc)
	l.r.mu.Unlock()
	l.r.open.Add(1)
	return rc, nil
}

// NewRecorder listens on ip:0 and serves.
func NewRecorder(ip string) (*Recorder, error) {
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		return nil, err
	}
	r := &Recorder{Addr: ln.Addr().String(), ln: ln}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 5 * time.Second}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.srv.Serve(recListener{ln, r})
	}()
	return r, nil
}

func (r *Recorder) serve(w http.ResponseWriter, req *http.Request) {
	r.reqs.Add(1)
	if r.Handler != nil {
		r.Handler.ServeHTTP(w, req)
		return
	}
	n, err := io.Copy(io.Discard, req.Body)
	if err != nil {
		http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %d\n", req.Method, req.RequestURI, n)
	for k, vv := range req.Header {
		for _, v := range vv {
			fmt.Fprintf(&b, "Got-%s: %s\n", k, v)
		}
	}
	io.WriteString(w, b.String())
}

// Received returns every byte received so far, all connections in the
// order they were accepted.
func (r *Recorder) Received() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, c := range r.conns {
		c.mu.Lock()
		b.Write(c.buf.Bytes())
		c.mu.Unlock()
	}
	return b.String()
}

// Conns returns the bytes received on each connection so far, and
// whether the proxy had closed it.
func (r *Recorder) Conns() (received []string, closed []bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.mu.Lock()
		received = append(received, c.buf.String())
		closed = append(closed, c.closed)
		c.mu.Unlock()
	}
	return received, closed
}

// Open is the number of connections open now.
func (r *Recorder) Open() int64 { return r.open.Load() }

// Requests is the number of complete request heads served.
func (r *Recorder) Requests() int64 { return r.reqs.Load() }

// Close stops the recorder and closes its connections.
func (r *Recorder) Close() {
	r.srv.Close()
	r.wg.Wait()
}
