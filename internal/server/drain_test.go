package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// frontEnds are the front ends a test runs on: both, or the one the
// package's tests are run on (-frontend).
func frontEnds() []string {
	if *frontend != "" {
		return []string{*frontend}
	}
	return []string{config.FrontendNetHTTP, config.FrontendNative}
}

// Reloads that change a listener's settings (each a new server on the
// same socket, the old one drained) under keep-alive load fail no
// request. Before the drain waited for new connections' first requests,
// 1 to 100 of the 720 were lost a run: EOF on a connection the client had
// never used, which it does not retry.
func TestReloadOfListenerSettingsDropsNothing(t *testing.T) {
	for i, fe := range frontEnds() {
		t.Run(fe, func(t *testing.T) {
			t.Parallel()
			b1 := backend(t, fmt.Sprintf("127.1.0.%d", 21+i), named("b1"))
			const tmpl = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0", frontend: {{fe}}, idle_timeout: {{idle}} } ]
routes: [ { name: site, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: "{{b1}}" } ] } ]
`
			vars := func(n int) map[string]string {
				return map[string]string{"b1": addr(b1), "fe": fe, "idle": fmt.Sprintf("%ds", 30+n)}
			}
			s, url, _ := startSturdy(t, parseConfig(t, tmpl, vars(0)))
			const clients, perClient = 6, 120
			var failures atomic.Int64
			done := newProgress()
			var wg sync.WaitGroup
			for c := range clients {
				wg.Go(func() {
					client := clientFrom(fmt.Sprintf("127.0.%d.%d", 30+i, 30+c))
					for n := range perClient {
						resp, body, err := getBody(client, fmt.Sprintf("%s/c%d/%d", url, c, n))
						if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(body, "b1 ") {
							if failures.Add(1) <= 5 {
								t.Logf("request %d of client %d: %v %q", n, c, err, body)
							}
						}
						done.Add()
					}
				})
			}
			// A reload after every ten answers, while the load lasts.
			reloads := 0
			for n, k := 1, int64(0); k < clients*perClient && n < 100; n++ {
				if err := s.Reload(parseConfig(t, tmpl, vars(n))); err != nil {
					t.Fatal(err)
				}
				reloads++
				k = done.WaitPast(k+9, clients*perClient)
			}
			wg.Wait()
			if f := failures.Load(); f != 0 {
				t.Fatalf("%d of %d requests failed across %d reloads that each made a new server", f, clients*perClient, reloads)
			}
			if reloads < 4 {
				t.Fatalf("only %d reloads happened during the load", reloads)
			}
		})
	}
}

// getBody is a GET and its whole body.
func getBody(c *http.Client, url string) (*http.Response, string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// A connection its server has taken, whose client has not sent its
// request yet, is answered when the server stops: retired by a reload that
// changes the listener's settings, or by sturdy's shutdown (the old
// process's, in a binary upgrade). net/http's Shutdown alone would read
// the request and close the connection without an answer.
func TestConnectionNotYetUsedIsAnsweredWhenItsServerStops(t *testing.T) {
	for i, fe := range frontEnds() {
		for j, stop := range []string{"reload", "shutdown"} {
			t.Run(fe+"/"+stop, func(t *testing.T) {
				t.Parallel()
				b1 := backend(t, fmt.Sprintf("127.1.0.%d", 25+2*i+j), named("b1"))
				const tmpl = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0", frontend: {{fe}}, idle_timeout: {{idle}} } ]
routes: [ { name: site, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: "{{b1}}" } ] } ]
`
				vars := func(idle string) map[string]string {
					return map[string]string{"b1": addr(b1), "fe": fe, "idle": idle}
				}
				tap := &tapSockets{served: make(chan struct{}, 8)}
				s, url, _ := startSturdy(t, parseConfig(t, tmpl, vars("30s")), WithSockets(tap))
				web := strings.TrimPrefix(url, "http://")
				from := fmt.Sprintf("127.0.%d.%d", 40+i, 40+j)

				// idle: a kept-alive connection that has answered; the
				// server's drain closes it, which tells the test that the
				// drain has begun.
				idle := rawDial(t, from, web)
				defer idle.Close()
				<-tap.served
				idleR := bufio.NewReader(idle)
				if resp := rawGet(t, idle, idleR, "/first"); resp.StatusCode != 200 {
					t.Fatalf("first request: %d", resp.StatusCode)
				}
				// fresh: taken by the server, no request yet.
				fresh := rawDial(t, from, web)
				defer fresh.Close()
				select {
				case <-tap.served:
				case <-time.After(10 * time.Second):
					t.Fatal("the server never began to serve the new connection")
				}

				stopped := make(chan error, 1)
				switch stop {
				case "reload":
					if err := s.Reload(parseConfig(t, tmpl, vars("31s"))); err != nil {
						t.Fatal(err)
					}
				case "shutdown":
					go func() {
						ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
						defer cancel()
						stopped <- s.Shutdown(ctx)
					}()
				}
				idle.SetReadDeadline(time.Now().Add(20 * time.Second))
				if _, err := idleR.ReadByte(); err == nil {
					t.Fatal("the idle connection got bytes, not closed by the drain")
				}

				fresh.SetDeadline(time.Now().Add(20 * time.Second))
				resp := rawGet(t, fresh, bufio.NewReader(fresh), "/fresh")
				if resp.StatusCode != 200 {
					t.Fatalf("the new connection's request: %d, want 200", resp.StatusCode)
				}
				if !resp.Close {
					t.Error("the answer of a stopping server keeps its connection (want Connection: close)")
				}
				if stop == "shutdown" {
					if err := <-stopped; err != nil {
						t.Errorf("shutdown: %v", err)
					}
				}
			})
		}
	}
}

// rawGet sends a GET on c and reads its answer, failing the test (with
// what the client would see) when the connection ends first.
func rawGet(t *testing.T, c net.Conn, br *bufio.Reader, path string) *http.Response {
	t.Helper()
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET %s: %v (the connection closed unanswered)", path, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// tapSockets opens plain sockets whose connections tell, on served, when a
// front end has begun to serve them: net/http's first Read, or the native
// server's SyscallConn (it waits on the descriptor itself).
type tapSockets struct{ served chan struct{} }

func (ts *tapSockets) Listen(network, addr string) (net.Listener, error) {
	l, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	return tapListener{l, ts.served}, nil
}

func (ts *tapSockets) ListenPacket(network, addr string) (net.PacketConn, error) {
	return net.ListenPacket(network, addr)
}

type tapListener struct {
	net.Listener
	served chan struct{}
}

func (l tapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &tapConn{TCPConn: c.(*net.TCPConn), served: l.served}, nil
}

type tapConn struct {
	*net.TCPConn
	served chan struct{}
	once   sync.Once
}

func (c *tapConn) tell() { c.once.Do(func() { c.served <- struct{}{} }) }

func (c *tapConn) Read(b []byte) (int, error) {
	c.tell()
	return c.TCPConn.Read(b)
}

func (c *tapConn) SyscallConn() (syscall.RawConn, error) {
	c.tell()
	return c.TCPConn.SyscallConn()
}
