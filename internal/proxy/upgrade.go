package proxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// upgrade finishes a 101 Switching Protocols exchange (WebSocket and the
// like) by splicing the client's connection to the backend's. The
// connection is tracked in h.Upgrades, so that a shutdown gives it the
// grace period and then, for a WebSocket, a close frame.
func (f *forwarder) upgrade(resp *http.Response) int {
	w := f.w
	// Only to the protocol that was forwarded, the one the client asked
	// for and the route allows: a backend that switches to another, or
	// when none was asked, would open a tunnel no rule sees into.
	reqUp, respUp := f.up, upgradeType(resp.Header)
	if reqUp == "" {
		return writeEdgeError(w, http.StatusBadGateway, f.rt.Name, fmt.Sprintf("the backend switched to protocol %q, but this request asked for no protocol this route allows (upgrades)", respUp))
	}
	if !strings.EqualFold(reqUp, respUp) {
		return writeEdgeError(w, http.StatusBadGateway, f.rt.Name, fmt.Sprintf("the backend switched to protocol %q, the client asked for %q", respUp, reqUp))
	}
	backend, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		return writeEdgeError(w, http.StatusBadGateway, f.rt.Name, "the backend's upgraded connection is not writable")
	}
	defer backend.Close()
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return writeEdgeError(w, http.StatusInternalServerError, f.rt.Name, "this listener cannot upgrade connections (HTTP/2)")
	}
	defer conn.Close()
	copyResponseHeader(w.Header(), resp.Header)
	hdr := w.Header()
	hdr["Connection"] = []string{"Upgrade"}
	hdr["Upgrade"] = []string{respUp}
	delete(hdr, "Content-Type")
	if _, err := fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\n"); err != nil {
		return 499
	}
	if err := hdr.Write(brw); err != nil {
		return 499
	}
	if _, err := brw.WriteString("\r\n"); err != nil || brw.Flush() != nil {
		return 499
	}
	u := &upgraded{client: conn, backend: backend, websocket: strings.EqualFold(respUp, "websocket"), done: make(chan struct{})}
	if f.h.Upgrades != nil {
		f.h.Upgrades.add(u)
		defer f.h.Upgrades.remove(u)
	}
	ended := make(chan struct{}, 2)
	go u.copyToBackend(brw, ended)
	go u.copyFromBackend(ended)
	<-ended // when either side ends, the deferred closes end the other
	close(u.done)
	return http.StatusSwitchingProtocols
}

// Upgrades tracks upgraded connections: net/http's Shutdown does not wait
// for them, so the server does, through this. The zero value is ready.
type Upgrades struct {
	mu    sync.Mutex
	conns map[*upgraded]struct{}
}

func (us *Upgrades) add(u *upgraded) {
	us.mu.Lock()
	defer us.mu.Unlock()
	if us.conns == nil {
		us.conns = map[*upgraded]struct{}{}
	}
	us.conns[u] = struct{}{}
}

func (us *Upgrades) remove(u *upgraded) {
	us.mu.Lock()
	defer us.mu.Unlock()
	delete(us.conns, u)
}

// Len is the number of upgraded connections open now.
func (us *Upgrades) Len() int {
	us.mu.Lock()
	defer us.mu.Unlock()
	return len(us.conns)
}

func (us *Upgrades) list() []*upgraded {
	us.mu.Lock()
	defer us.mu.Unlock()
	out := make([]*upgraded, 0, len(us.conns))
	for u := range us.conns {
		out = append(out, u)
	}
	return out
}

// Shutdown waits for the upgraded connections to end until ctx ends, then
// tells each WebSocket client the server is going away (close code 1001,
// sent between two frames of the backend's so that the stream stays
// valid) and closes every connection. It returns how many were still open
// when ctx ended.
func (us *Upgrades) Shutdown(ctx context.Context) int {
	for us.Len() > 0 {
		select {
		case <-ctx.Done():
			return us.goAway()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return 0
}

func (us *Upgrades) goAway() int {
	open := us.list()
	var wg sync.WaitGroup
	for _, u := range open {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u.goAway()
		}()
	}
	wg.Wait()
	return len(open)
}

// upgraded is one spliced connection.
type upgraded struct {
	client    net.Conn
	backend   io.ReadWriteCloser
	websocket bool
	done      chan struct{} // closed when the splice has ended

	// mu is held while a backend frame is partly written to the client, so
	// that a close frame is only ever written between frames. closing stops
	// the copy once the close frame went out.
	mu      sync.Mutex
	closing bool
}

// goingAway is a WebSocket close frame, code 1001 ("going away"), as a
// server sends it (unmasked).
var goingAway = []byte{0x88, 0x02, 0x03, 0xe9}

// copyToBackend and copyFromBackend are the splice's two directions, as
// named functions so that a goroutine dump says which one is stuck. Each
// says on ended when it stops.
func (u *upgraded) copyToBackend(from io.Reader, ended chan<- struct{}) {
	io.Copy(u.backend, from)
	ended <- struct{}{}
}

func (u *upgraded) copyFromBackend(ended chan<- struct{}) {
	u.toClient()
	ended <- struct{}{}
}

// goAway ends the connection: a close frame to a WebSocket client when one
// can be sent between frames within a second, a moment for the client to
// answer it, then both sides closed.
func (u *upgraded) goAway() {
	if u.websocket && u.lockWithin(time.Second) {
		u.closing = true
		u.client.SetWriteDeadline(time.Now().Add(time.Second))
		u.client.Write(goingAway)
		u.mu.Unlock()
		select {
		case <-u.done: // the client closed in answer
		case <-time.After(time.Second):
		}
	}
	u.client.Close()
	u.backend.Close()
}

func (u *upgraded) lockWithin(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !u.mu.TryLock() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// toClient copies the backend's side to the client. For a WebSocket it
// follows the frames (RFC 6455 5.2) so that it knows where one ends.
func (u *upgraded) toClient() {
	if !u.websocket {
		io.Copy(u.client, u.backend)
		return
	}
	buf := make([]byte, 32<<10)
	var fr frameTracker
	for {
		n, err := u.backend.Read(buf)
		for p := buf[:n]; len(p) > 0; {
			if fr.atBoundary() {
				u.mu.Lock()
				if u.closing {
					u.mu.Unlock()
					return
				}
			}
			k := fr.advance(p)
			_, werr := u.client.Write(p[:k])
			p = p[k:]
			if fr.atBoundary() {
				u.mu.Unlock()
			}
			if werr != nil {
				if !fr.atBoundary() {
					u.mu.Unlock()
				}
				return
			}
		}
		if err != nil {
			if !fr.atBoundary() {
				u.mu.Unlock()
			}
			return
		}
	}
}

// frameTracker follows WebSocket frame boundaries in a byte stream.
type frameTracker struct {
	head    [14]byte // the header read so far
	got     int      // bytes of head read
	need    int      // header length once known (0: not yet)
	payload uint64   // payload bytes left in the current frame
	inFrame bool     // between a frame's first byte and its last
}

func (t *frameTracker) atBoundary() bool { return !t.inFrame }

// advance consumes a prefix of p that stays within one frame (header and
// payload) and returns its length.
func (t *frameTracker) advance(p []byte) int {
	t.inFrame = true
	used := 0
	for used < len(p) && (t.need == 0 || t.got < t.need) {
		t.head[t.got] = p[used]
		t.got++
		used++
		if t.got == 2 {
			t.need = 2
			switch l := t.head[1] & 0x7f; {
			case l == 126:
				t.need += 2
			case l == 127:
				t.need += 8
			}
			if t.head[1]&0x80 != 0 {
				t.need += 4 // masking key
			}
		}
		if t.need != 0 && t.got == t.need {
			t.payload = t.length()
			break
		}
	}
	if t.need == 0 || t.got < t.need {
		return used // the header is not complete yet
	}
	take := min(uint64(len(p)-used), t.payload)
	t.payload -= take
	used += int(take)
	if t.payload == 0 {
		*t = frameTracker{}
	}
	return used
}

func (t *frameTracker) length() uint64 {
	switch l := t.head[1] & 0x7f; {
	case l == 126:
		return uint64(t.head[2])<<8 | uint64(t.head[3])
	case l == 127:
		var n uint64
		for i := 2; i < 10; i++ {
			n = n<<8 | uint64(t.head[i])
		}
		return n
	default:
		return uint64(l)
	}
}
