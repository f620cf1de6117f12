package sim

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// network is where a run's hosts listen and its clients dial from: the
// kernel's loopback (real sockets, any address of 127.0.0.0/8), or memory
// (pipes, so that a run fits in a testing/synctest bubble: a goroutine
// blocked on a real socket is not durably blocked, and fake time would
// never move).
type network interface {
	// listen opens a listener on ip, on a port of the network's choice.
	listen(ip string) (net.Listener, error)
	// dial connects from source address from (an IP) to addr.
	dial(ctx context.Context, from, addr string) (net.Conn, error)
	// sockets is what the server listens through (nil: the kernel's).
	sockets() interface {
		Listen(network, addr string) (net.Listener, error)
	}
	// upstream is how the server dials pool hosts.
	upstream(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error)
}

// reset hangs up on c with an RST (a crashing process), where plain
// Close would send a FIN.
func reset(c net.Conn) {
	switch c := c.(type) {
	case *net.TCPConn:
		c.SetLinger(0)
	case *memConn:
		c.st.reset.Store(true)
	}
	c.Close()
}

// loopback is the kernel's network: what a deployment sees, and the only
// one the native front end serves (it waits for readiness on the socket
// itself).
type loopback struct{}

func (loopback) listen(ip string) (net.Listener, error) { return net.Listen("tcp", ip+":0") }

func (loopback) dial(ctx context.Context, from, addr string) (net.Conn, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 2 * time.Second}
	return d.DialContext(ctx, "tcp", addr)
}

func (loopback) sockets() interface {
	Listen(network, addr string) (net.Listener, error)
} {
	return nil
}

func (loopback) upstream(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return d.DialContext
}

// memory is a network of pipes. Each listener gets a port of its own on
// its IP; a dial to an address nobody listens on is refused, as the
// kernel would.
type memory struct {
	mu   sync.Mutex // guards ls, port
	ls   map[string]*memListener
	port int
}

func newMemory() *memory { return &memory{ls: map[string]*memListener{}, port: 20000} }

func (m *memory) listen(ip string) (net.Listener, error) { return m.Listen("tcp", ip+":0") }

// Listen is the server's socket source (server.WithSockets).
func (m *memory) Listen(_, addr string) (net.Listener, error) {
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if a.Port == 0 {
		m.port++
		a.Port = m.port
	}
	if m.ls[a.String()] != nil {
		return nil, &net.OpError{Op: "listen", Net: "tcp", Addr: a, Err: os.NewSyscallError("bind", syscall.EADDRINUSE)}
	}
	l := &memListener{m: m, addr: a, conns: make(chan net.Conn), done: make(chan struct{})}
	m.ls[a.String()] = l
	return l, nil
}

func (m *memory) sockets() interface {
	Listen(network, addr string) (net.Listener, error)
} {
	return m
}

func (m *memory) upstream(*net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	// The proxy's own address on the way to a host, as the kernel would
	// pick it.
	return func(ctx context.Context, _, addr string) (net.Conn, error) { return m.dial(ctx, "127.0.0.1", addr) }
}

func (m *memory) dial(ctx context.Context, from, addr string) (net.Conn, error) {
	m.mu.Lock()
	l := m.ls[addr]
	m.port++
	local := &net.TCPAddr{IP: net.ParseIP(from), Port: m.port}
	m.mu.Unlock()
	ta, _ := net.ResolveTCPAddr("tcp", addr)
	if l == nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: ta, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	a, b := net.Pipe()
	st := &pipeState{}
	client := &memConn{Conn: a, st: st, local: local, remote: l.addr}
	server := &memConn{Conn: b, st: st, local: l.addr, remote: local}
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: ta, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	case <-ctx.Done():
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: ta, Err: ctx.Err()}
	}
}

type memListener struct {
	m     *memory
	addr  *net.TCPAddr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.m.mu.Lock()
		delete(l.m.ls, l.addr.String())
		l.m.mu.Unlock()
	})
	return nil
}

func (l *memListener) Addr() net.Addr { return l.addr }

// pipeState is shared by a pipe's two ends.
type pipeState struct {
	reset atomic.Bool // one end hung up with an RST
}

// memConn is one end of a pipe, with the addresses a socket would have
// and an RST the peer reads as ECONNRESET.
type memConn struct {
	net.Conn
	st            *pipeState
	local, remote net.Addr
}

func (c *memConn) LocalAddr() net.Addr  { return c.local }
func (c *memConn) RemoteAddr() net.Addr { return c.remote }

func (c *memConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	return n, c.translate("read", err)
}

func (c *memConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	return n, c.translate("write", err)
}

// translate turns a pipe's errors into a socket's: EOF after the peer's
// RST is ECONNRESET, a write to a closed peer is EPIPE.
func (c *memConn) translate(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF) && c.st.reset.Load():
		return &net.OpError{Op: op, Net: "tcp", Source: c.local, Addr: c.remote, Err: os.NewSyscallError(op, syscall.ECONNRESET)}
	case errors.Is(err, io.ErrClosedPipe) && op == "write":
		errno := syscall.EPIPE
		if c.st.reset.Load() {
			errno = syscall.ECONNRESET
		}
		return &net.OpError{Op: op, Net: "tcp", Source: c.local, Addr: c.remote, Err: os.NewSyscallError(op, errno)}
	}
	return err
}

// exhausted is the error a dial gets when sturdy has run out of file
// descriptors, as the kernel gives it.
func exhausted(addr string) error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", syscall.EMFILE), Addr: strAddr(addr)}
}

type strAddr string

func (a strAddr) Network() string { return "tcp" }
func (a strAddr) String() string  { return string(a) }

// errEMFILE is an accept's error when the process has no descriptor left.
var errEMFILE = os.NewSyscallError("accept", syscall.EMFILE)
