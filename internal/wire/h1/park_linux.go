package h1

import (
	"container/heap"
	"errors"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// parker holds the server's long-idle keep-alive connections without a
// goroutine each: their sockets wait in one epoll set (one-shot, for
// readability or the peer's close), and one goroutine waits on it. A
// connection idle for parkTime has no server goroutine any more; its
// watcher parks it here and exits, so that what is left of it is its
// struct, its socket and the runtime's poll descriptor. When bytes (or a
// FIN, or a reset) arrive, a new watcher takes it back, exactly where the
// old one left it. Connections whose idle timeout ends while parked are
// closed by the parker. Its goroutine runs while the server has
// connections parked and is stopped with the server.
type parker struct {
	srv *Server

	mu      sync.Mutex
	epfd    int // -1 until the first park
	evfd    int // wakes the goroutine: a new earliest deadline, or stop
	byFd    map[int32]*conn
	due     parkHeap // ordered by idleUntil
	running bool
	stopped bool
	done    chan struct{} // closed when the goroutine has exited
}

func (p *parker) init(s *Server) { p.srv, p.epfd, p.evfd = s, -1, -1 }

// park hands c to the parker; false means it could not (stopped, or the
// epoll set failed), and the watcher keeps waiting itself.
func (p *parker) park(c *conn) bool {
	fd := -1
	if c.raw.Control(func(f uintptr) { fd = int(f) }) != nil || fd < 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// Under mu, so that Shutdown and Close, which mark a connection
	// closed before they take it out (drop), either find it parked or
	// are seen here.
	if p.stopped || c.state.Load() != stIdle {
		return false
	}
	if p.epfd < 0 && !p.open() {
		return false
	}
	c.parkFd = int32(fd)
	// One-shot: after one event the socket stays in the set, disarmed,
	// until unpark removes it. A socket readable already reports at
	// once, so bytes that came as the watcher left are not missed.
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: int32(fd)}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return false
	}
	p.byFd[c.parkFd] = c
	earliest := len(p.due) == 0 || c.idleUntil.Load() < p.due[0].idleUntil.Load()
	heap.Push(&p.due, c)
	if !p.running {
		p.running = true
		p.done = make(chan struct{})
		go p.loop()
	} else if earliest {
		p.signal()
	}
	return true
}

// open makes the epoll set and the wake-up eventfd; under mu.
func (p *parker) open() bool {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return false
	}
	ev, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(ep)
		return false
	}
	e := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(ev)}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, ev, &e); err != nil {
		unix.Close(ep)
		unix.Close(ev)
		return false
	}
	p.epfd, p.evfd = ep, ev
	p.byFd = make(map[int32]*conn)
	return true
}

func (p *parker) signal() {
	one := [8]byte{1}
	unix.Write(p.evfd, one[:])
}

// take removes c from the parker; under mu. It reports whether c was
// parked.
func (p *parker) take(c *conn) bool {
	if c.parkIdx < 0 {
		return false
	}
	heap.Remove(&p.due, c.parkIdx)
	delete(p.byFd, c.parkFd)
	// Removed before its socket can be closed, so that the number, once
	// reused, never meets this entry.
	unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, int(c.parkFd), nil)
	return true
}

// drop takes c out of the parker for Shutdown or Close, which then close
// it; false means it was not parked (a watcher has it, or will).
func (p *parker) drop(c *conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.take(c)
}

// stop closes every parked connection and ends the goroutine.
func (p *parker) stop() {
	p.mu.Lock()
	p.stopped = true
	running := p.running
	if running {
		p.signal()
	}
	p.mu.Unlock()
	if running {
		<-p.done
	}
}

// loop waits for parked sockets to become readable and for idle timeouts
// to end. It exits when nothing is parked (park starts it again) or the
// parker is stopped.
func (p *parker) loop() {
	events := make([]unix.EpollEvent, 64)
	var wake, expired []*conn
	for {
		p.mu.Lock()
		if p.stopped || len(p.due) == 0 {
			var left []*conn
			if p.stopped {
				for len(p.due) > 0 {
					c := p.due[0]
					p.take(c)
					left = append(left, c)
				}
				unix.Close(p.epfd)
				unix.Close(p.evfd)
				p.epfd, p.evfd = -1, -1
			}
			p.running = false
			close(p.done)
			p.mu.Unlock()
			for _, c := range left {
				c.closeParked()
			}
			return
		}
		wait := time.Duration(p.due[0].idleUntil.Load() - p.srv.mono(time.Now()))
		p.mu.Unlock()
		ms := -1
		if wait <= 0 {
			ms = 0
		} else {
			ms = int((wait + time.Millisecond - 1) / time.Millisecond)
		}
		n, err := unix.EpollWait(p.epfd, events, ms)
		if err != nil && !errors.Is(err, syscall.EINTR) {
			n = 0
			time.Sleep(10 * time.Millisecond) // not expected: do not spin
		}
		wake, expired = wake[:0], expired[:0]
		p.mu.Lock()
		for _, ev := range events[:max(n, 0)] {
			if int(ev.Fd) == p.evfd {
				var b [8]byte
				unix.Read(p.evfd, b[:])
				continue
			}
			if c := p.byFd[ev.Fd]; c != nil && p.take(c) {
				wake = append(wake, c)
			}
		}
		now := p.srv.mono(time.Now())
		for len(p.due) > 0 && p.due[0].idleUntil.Load() <= now {
			c := p.due[0]
			p.take(c)
			expired = append(expired, c)
		}
		p.mu.Unlock()
		for _, c := range wake {
			go c.watch() // where the watcher that parked it left off
		}
		for _, c := range expired {
			c.closeParked()
		}
		clear(wake)
		clear(expired)
	}
}

// closeParked closes a connection taken from the parker that no watcher
// has: its idle timeout ended, or the server stops.
func (c *conn) closeParked() {
	if c.state.CompareAndSwap(stIdle, stClosed) {
		c.nc.Close()
	}
	c.srv.untrack(c)
}

// parkHeap orders parked connections by the end of their idle timeout.
type parkHeap []*conn

func (h parkHeap) Len() int           { return len(h) }
func (h parkHeap) Less(i, j int) bool { return h[i].idleUntil.Load() < h[j].idleUntil.Load() }
func (h parkHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].parkIdx, h[j].parkIdx = i, j
}
func (h *parkHeap) Push(x any) {
	c := x.(*conn)
	c.parkIdx = len(*h)
	*h = append(*h, c)
}
func (h *parkHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	c.parkIdx = -1
	return c
}
