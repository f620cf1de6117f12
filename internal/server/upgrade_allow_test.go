package server

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

const upgradeAllowConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0", frontend: {{fe}} } ]
routes:
  - { name: admin, path: /admin/, pool: h2c, access: [ { deny: all } ] }
  - { name: site, default: true, pool: h2c }
  - { name: custom, path: /custom/, pool: raw, upgrades: [ websocket, x-custom ] }
  - { name: plain, path: /plain/, pool: raw }
pools:
  - { name: h2c, hosts: [ { addr: "{{h2c}}" } ] }
  - { name: raw, hosts: [ { addr: "{{raw}}" } ] }
`

// upgradeBackend answers an Upgrade with 101 to the same protocol and
// echoes what follows; /plain/always101 switches to h2c whatever was
// asked. It records the Upgrade field of every request.
type upgradeBackend struct {
	mu   sync.Mutex
	seen []string
}

func (b *upgradeBackend) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	up := req.Header.Get("Upgrade")
	b.mu.Lock()
	b.seen = append(b.seen, req.URL.Path+" "+up)
	b.mu.Unlock()
	switch {
	case strings.HasSuffix(req.URL.Path, "/always101"):
		up = "h2c"
	case up == "":
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: close\r\n\r\nno upgrade")
		return
	}
	io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+up+"\r\n\r\n")
	io.Copy(c, br)
}

// h2cTunnel asks path for an h2c upgrade from address from and, when it
// is switched, sends GET /admin/secret as HTTP/2 through the tunnel. It
// returns the status of the upgrade request.
func h2cTunnel(t *testing.T, from, base, path string) int {
	t.Helper()
	c := rawDial(t, from, strings.TrimPrefix(base, "http://"))
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: site.test\r\nConnection: Upgrade, HTTP2-Settings\r\n"+
		"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("upgrade request: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	io.WriteString(c, http2.ClientPreface)
	fr := http2.NewFramer(c, br)
	fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "site.test"}, {":path", "/admin/secret"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
	// Read until the tunnelled stream is answered (or the deadline).
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			break
		}
		if h, ok := f.(*http2.HeadersFrame); ok && h.StreamID == 3 {
			break
		}
	}
	return resp.StatusCode
}

// An Upgrade is forwarded only to a protocol the route allows (WebSocket
// by default), never h2c: a backend that accepts h2c would give the client
// an HTTP/2 connection on which every request passes the route's rules
// unjudged (here GET /admin/secret past a deny-all route). A 101 is
// spliced only to the protocol that was asked for and allowed.
func TestH2CUpgradeIsNotTunnelled(t *testing.T) {
	t.Parallel()
	for _, fe := range frontEnds() {
		t.Run(fe, func(t *testing.T) {
			var mu sync.Mutex
			var paths []string
			app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				paths = append(paths, r.Proto+" "+r.URL.Path+" upgrade="+r.Header.Get("Upgrade"))
				mu.Unlock()
				io.WriteString(w, "app")
			})
			// A backend that takes an h2c upgrade (without insisting on
			// HTTP2-Settings, which a proxy drops as hop-by-hop) and then
			// serves HTTP/2 on the connection: net/http's server reads the
			// tunnelled connection as h2c with prior knowledge.
			tunnels := &connListener{conns: make(chan net.Conn), done: make(chan struct{})}
			h2 := &http.Server{Handler: app, Protocols: new(http.Protocols)}
			h2.Protocols.SetUnencryptedHTTP2(true)
			go h2.Serve(tunnels)
			t.Cleanup(func() { h2.Close() })
			h2cApp := rawBackend(t, "127.1.32.1", func(c net.Conn) {
				c.SetDeadline(time.Now().Add(10 * time.Second))
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				if !strings.EqualFold(req.Header.Get("Upgrade"), "h2c") {
					defer c.Close()
					app.ServeHTTP(&responseBuffer{header: http.Header{}}, req)
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\napp")
					return
				}
				io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n")
				select {
				case tunnels.conns <- bufferedConn{c, br}:
				case <-tunnels.done:
					c.Close()
				}
			})
			raw := &upgradeBackend{}
			rawAddr := rawBackend(t, "127.1.32.2", raw.serve)
			_, base, _ := startSturdy(t, parseConfig(t, upgradeAllowConfig, map[string]string{"fe": fe, "h2c": h2cApp, "raw": rawAddr}))

			if st := h2cTunnel(t, "127.0.32.1", base, "/public"); st != http.StatusOK {
				t.Errorf("h2c upgrade request: %d, want 200 without the upgrade", st)
			}
			mu.Lock()
			got := append([]string(nil), paths...)
			mu.Unlock()
			for _, p := range got {
				if strings.Contains(p, "/admin/") || strings.Contains(p, "HTTP/2") || !strings.HasSuffix(p, "upgrade=") {
					t.Errorf("the backend got %q", p)
				}
			}
			if len(got) != 1 {
				t.Errorf("the backend got %q, want the one request as HTTP/1.1", got)
			}

			// A backend that switches protocols unasked is not spliced.
			if st := h2cTunnel(t, "127.0.32.2", base, "/plain/always101"); st != http.StatusBadGateway {
				t.Errorf("a 101 to h2c nobody may ask for: %d, want 502", st)
			}
			// A protocol the route allows is spliced; on another route it is
			// not forwarded.
			for _, tc := range []struct {
				path string
				want int
			}{{"/custom/x", http.StatusSwitchingProtocols}, {"/plain/x", http.StatusOK}} {
				c := rawDial(t, "127.0.32.3", strings.TrimPrefix(base, "http://"))
				c.SetDeadline(time.Now().Add(5 * time.Second))
				io.WriteString(c, "GET "+tc.path+" HTTP/1.1\r\nHost: site.test\r\nConnection: Upgrade\r\nUpgrade: h2c, x-custom\r\n\r\n")
				br := bufio.NewReader(c)
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != tc.want {
					t.Errorf("%s: %d, want %d", tc.path, resp.StatusCode, tc.want)
				}
				if resp.StatusCode == http.StatusSwitchingProtocols {
					if up := resp.Header.Get("Upgrade"); up != "x-custom" {
						t.Errorf("%s: switched to %q", tc.path, up)
					}
					io.WriteString(c, "ping")
					buf := make([]byte, 4)
					if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "ping" {
						t.Errorf("%s: echo %q, %v", tc.path, buf, err)
					}
				}
				c.Close()
			}
			raw.mu.Lock()
			defer raw.mu.Unlock()
			want := []string{"/plain/always101 ", "/custom/x x-custom", "/plain/x "}
			if strings.Join(raw.seen, "|") != strings.Join(want, "|") {
				t.Errorf("the raw backend saw %q, want %q", raw.seen, want)
			}
		})
	}
}

// bufferedConn reads what its reader buffered before the connection.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// responseBuffer is a ResponseWriter that keeps nothing but the header.
type responseBuffer struct{ header http.Header }

func (b *responseBuffer) Header() http.Header         { return b.header }
func (b *responseBuffer) Write(p []byte) (int, error) { return len(p), nil }
func (b *responseBuffer) WriteHeader(int)             {}

// connListener is a net.Listener of the connections sent to it.
type connListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *connListener) Addr() net.Addr { return fixedAddr("tunnels") }
