package fake

import (
	"net"
	"sync"
	"sync/atomic"
)

// Blackhole is a backend that accepts connections and never reads from or
// writes to them, holding them open until Close: a host whose process is
// wedged while its kernel still completes handshakes (incident 001's
// variant, where every request waits for a timeout instead of failing fast).
type Blackhole struct {
	Addr     string
	Accepted atomic.Int64 // connections accepted

	ln    net.Listener
	mu    sync.Mutex // guards conns
	conns []net.Conn
	wg    sync.WaitGroup
}

// NewBlackhole listens on ip:0 (any loopback address).
func NewBlackhole(ip string) (*Blackhole, error) {
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		return nil, err
	}
	b := &Blackhole{Addr: ln.Addr().String(), ln: ln}
	b.wg.Add(1)
	go b.accept()
	return b, nil
}

func (b *Blackhole) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.Accepted.Add(1)
		b.mu.Lock()
		b.conns = append(b.conns, c)
		b.mu.Unlock()
	}
}

// Close stops accepting and closes every connection it held.
func (b *Blackhole) Close() {
	b.ln.Close()
	b.wg.Wait()
	b.mu.Lock()
	for _, c := range b.conns {
		c.Close()
	}
	b.conns = nil
	b.mu.Unlock()
}

// RefusingAddr returns an address on ip where nothing listens, so that
// connecting to it is refused at once: a host whose process is gone. The
// port was free a moment ago; another process could take it, which on a
// loopback address nobody else uses is as good as never.
func RefusingAddr(ip string) (string, error) {
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", err
	}
	return addr, nil
}
