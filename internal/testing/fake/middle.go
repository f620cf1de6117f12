package fake

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// WAFMode is how the WAF refuses a blocked client.
type WAFMode int

// WAF modes.
const (
	WAF502   WAFMode = iota // answer 502, as the incident's WAF did
	WAFReset                // reset the connection without answering
)

// WAF is a middle tier in front of one backend that refuses every request
// from one client address, as seen in X-Real-IP or X-Forwarded-For: the
// setup of incident 000.
type WAF struct {
	Addr    string
	Blocked atomic.Int64 // requests refused

	blocked string
	mode    WAFMode
	srv     *http.Server
	wg      sync.WaitGroup
}

// NewWAF listens on ip:0 and forwards to backend (host:port), refusing
// requests from client blocked.
func NewWAF(ip, backend, blocked string, mode WAFMode) (*WAF, error) {
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		return nil, err
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: "http", Host: backend})
			pr.Out.Host = pr.In.Host
			pr.Out.Header["X-Forwarded-For"] = pr.In.Header["X-Forwarded-For"]
		},
		Transport: &http.Transport{MaxIdleConnsPerHost: 64},
	}
	w := &WAF{Addr: ln.Addr().String(), blocked: blocked, mode: mode}
	w.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if clientOf(r) != w.blocked {
			rp.ServeHTTP(rw, r)
			return
		}
		w.Blocked.Add(1)
		if w.mode == WAFReset {
			reset(rw)
			return
		}
		http.Error(rw, "blocked by WAF", http.StatusBadGateway)
	})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.srv.Serve(ln)
	}()
	return w, nil
}

func clientOf(r *http.Request) string {
	if ip := r.Header.Get("X-Real-Ip"); ip != "" {
		return ip
	}
	xff := r.Header.Get("X-Forwarded-For")
	if i := strings.IndexByte(xff, ','); i >= 0 {
		xff = xff[:i]
	}
	return strings.TrimSpace(xff)
}

// reset closes the client's connection with RST, sending nothing.
func reset(rw http.ResponseWriter) {
	conn, _, err := http.NewResponseController(rw).Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// Close stops the WAF.
func (w *WAF) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if w.srv.Shutdown(ctx) != nil {
		w.srv.Close()
	}
	w.wg.Wait()
}

// NodeLike is a backend with a strict hand-written request parser, like
// Node.js's: a request target with a raw byte >= 0x80, a control byte, or
// the marker makes it close the connection without answering (ACK, then
// FIN: incident 003). Anything else gets a small 200 with keep-alive.
type NodeLike struct {
	Addr    string
	Served  atomic.Int64
	Dropped atomic.Int64

	marker string
	ln     net.Listener
	mu     sync.Mutex // guards conns
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

// NewNodeLike listens on ip:0. marker may be "" (raw bytes only).
func NewNodeLike(ip, marker string) (*NodeLike, error) {
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		return nil, err
	}
	n := &NodeLike{Addr: ln.Addr().String(), marker: marker, ln: ln, conns: map[net.Conn]bool{}}
	n.wg.Add(1)
	go n.accept()
	return n, nil
}

func (n *NodeLike) accept() {
	defer n.wg.Done()
	for {
		c, err := n.ln.Accept()
		if err != nil {
			return
		}
		n.mu.Lock()
		n.conns[c] = true
		n.mu.Unlock()
		n.wg.Add(1)
		go n.serve(c)
	}
}

func (n *NodeLike) serve(c net.Conn) {
	defer n.wg.Done()
	defer func() {
		n.mu.Lock()
		delete(n.conns, c)
		n.mu.Unlock()
		c.Close()
	}()
	br := bufio.NewReader(c)
	for {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		length := 0
		for {
			h, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if h == "\r\n" || h == "\n" {
				break
			}
			if k, v, ok := strings.Cut(h, ":"); ok && strings.EqualFold(k, "content-length") {
				length, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		if length > 0 {
			if _, err := br.Discard(length); err != nil {
				return
			}
		}
		parts := strings.Split(strings.TrimRight(line, "\r\n"), " ")
		if len(parts) != 3 || n.rejects(parts[1]) {
			n.Dropped.Add(1)
			return // hang up without a word
		}
		n.Served.Add(1)
		body := "ok from node-like backend"
		if _, err := c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\nConnection: keep-alive\r\n\r\n" + body)); err != nil {
			return
		}
	}
}

func (n *NodeLike) rejects(target string) bool {
	for i := 0; i < len(target); i++ {
		if c := target[i]; c >= 0x80 || c < 0x20 || c == 0x7f {
			return true
		}
	}
	return n.marker != "" && strings.Contains(target, n.marker)
}

// Close stops the listener and every connection.
func (n *NodeLike) Close() {
	n.ln.Close()
	n.mu.Lock()
	for c := range n.conns {
		c.Close()
	}
	n.mu.Unlock()
	n.wg.Wait()
}
