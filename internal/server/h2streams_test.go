package server

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"
	"github.com/sturdyproxy/sturdy/internal/testing/testpki"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Raw is a hand-written HTTP/2 client on one connection: Go's own
// client never sends a body that disagrees with its content-length nor
// resets a stream on request, so stream errors need one. Header blocks
// are literal fields without indexing (a zero-size dynamic table), so no
// HPACK state is shared between streams.
type h2Raw struct {
	c    net.Conn
	wmu  sync.Mutex // guards fr's writes, enc and hbuf: the test and the reader both write
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
	next uint32 // the next client stream id

	mu      sync.Mutex // guards streams and goAway
	streams map[uint32]*h2Stream
	goAway  *http2.GoAwayFrame // the first GOAWAY the server sent, if any
	done    chan struct{}      // closed when the reader stops
	readErr error
}

// h2Stream is what came back on one stream.
type h2Stream struct {
	status int
	body   bytes.Buffer
	reset  http2.ErrCode
	ended  chan struct{} // closed at END_STREAM or RST_STREAM
}

func dialH2Raw(t testing.TB, c net.Conn) *h2Raw {
	t.Helper()
	h := &h2Raw{c: c, next: 1, streams: map[uint32]*h2Stream{}, done: make(chan struct{})}
	h.fr = http2.NewFramer(c, c)
	h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	h.enc = hpack.NewEncoder(&h.hbuf)
	h.enc.SetMaxDynamicTableSizeLimit(0)
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := h.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); <-h.done })
	go h.read()
	return h
}

func (h *h2Raw) read() {
	defer close(h.done)
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			h.readErr = err
			h.mu.Lock()
			for _, s := range h.streams {
				select {
				case <-s.ended:
				default:
					close(s.ended)
				}
			}
			h.mu.Unlock()
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				h.write(func() error { return h.fr.WriteSettingsAck() })
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				h.write(func() error { return h.fr.WritePing(true, f.Data) })
			}
		case *http2.GoAwayFrame:
			h.mu.Lock()
			if h.goAway == nil {
				h.goAway = f
			}
			h.mu.Unlock()
		case *http2.MetaHeadersFrame:
			s := h.stream(f.StreamID)
			if st, err := strconv.Atoi(f.PseudoValue("status")); err == nil && st >= 200 {
				s.status = st
			}
			if f.StreamEnded() {
				close(s.ended)
			}
		case *http2.DataFrame:
			s := h.stream(f.StreamID)
			s.body.Write(f.Data())
			if n := uint32(len(f.Data())); n > 0 {
				h.write(func() error {
					h.fr.WriteWindowUpdate(0, n)
					return h.fr.WriteWindowUpdate(f.StreamID, n)
				})
			}
			if f.StreamEnded() {
				close(s.ended)
			}
		case *http2.RSTStreamFrame:
			s := h.stream(f.StreamID)
			s.reset = f.ErrCode
			select {
			case <-s.ended:
			default:
				close(s.ended)
			}
		}
	}
}

func (h *h2Raw) stream(id uint32) *h2Stream {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.streams[id]
}

func (h *h2Raw) write(fn func() error) error {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	return fn()
}

// open sends a POST's HEADERS declaring length, then body in one DATA
// frame; end sets END_STREAM on it, and rst resets the stream after it.
func (h *h2Raw) open(authority, path string, length int, body []byte, end, rst bool) (*h2Stream, error) {
	s := &h2Stream{ended: make(chan struct{})}
	err := h.write(func() error {
		id := h.next
		h.next += 2
		h.mu.Lock()
		h.streams[id] = s
		h.mu.Unlock()
		h.hbuf.Reset()
		for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", authority}, {":path", path}, {"content-length", strconv.Itoa(length)}} {
			h.enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
		}
		if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.hbuf.Bytes(), EndHeaders: true}); err != nil {
			return err
		}
		if err := h.fr.WriteData(id, end, body); err != nil {
			return err
		}
		if rst {
			return h.fr.WriteRSTStream(id, http2.ErrCodeCancel)
		}
		return nil
	})
	return s, err
}

const h2StreamsConfig = `
admin: { listen: "off" }
listeners:
  - { name: h2c, listen: "127.0.0.1:0", h2c: true }
  - { name: tls, listen: "127.0.0.1:0", tls: { cert: "{{cert}}", key: "{{key}}" } }
routes: [ { name: all, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: "{{b}}" } ] } ]
`

// A bad stream is a stream error, not a connection error: on one HTTP/2
// connection (h2c and over TLS), streams whose body ends before its
// content-length, runs past it or is reset by the client are answered or
// refused alone, every good stream interleaved with them is served, and
// the server sends no GOAWAY. The backend sees only the good requests and
// no host is charged.
func TestH2BadStreamSparesItsNeighbours(t *testing.T) {
	t.Parallel()
	var seen atomic.Int64
	b := backend(t, "127.1.32.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		seen.Add(1)
		fmt.Fprintf(w, "got %s", body)
	}))
	dir := t.TempDir()
	ca := testpki.NewCA(t, "h2 streams CA")
	cert, key := ca.Write(t, dir, "x", testpki.Leaf{DNS: []string{"x"}})
	s, _, _ := startSturdy(t, parseConfig(t, h2StreamsConfig, map[string]string{"b": addr(b), "cert": cert, "key": key}))

	dials := map[string]func() net.Conn{
		"h2c": func() net.Conn { return rawDial(t, "127.32.0.1", s.Addr("h2c")) },
		"tls": func() net.Conn {
			c := tls.Client(rawDial(t, "127.32.0.2", s.Addr("tls")), &tls.Config{RootCAs: ca.Pool(), ServerName: "x", NextProtos: []string{"h2"}})
			if err := c.Handshake(); err != nil || c.ConnectionState().NegotiatedProtocol != "h2" {
				t.Fatalf("TLS: %v, protocol %q", err, c.ConnectionState().NegotiatedProtocol)
			}
			return c
		},
	}
	rng := rand.New(rand.NewPCG(32, 4))
	var goods int64
	for _, name := range []string{"h2c", "tls"} {
		h := dialH2Raw(t, dials[name]())
		type sent struct {
			s    *h2Stream
			kind string
			body string
		}
		var all []sent
		for round := range 12 {
			var wave []sent
			// A bad stream first, its good neighbours opened right after:
			// a connection shutdown in answer to it refuses them.
			for i := range 1 + rng.IntN(8) {
				kind := "good"
				if i == 0 || rng.IntN(4) == 0 {
					kind = []string{"short", "long", "reset"}[rng.IntN(3)]
				}
				body := fmt.Sprintf("%s-%d-%d", name, round, i)
				var st *h2Stream
				var err error
				switch kind {
				case "good":
					st, err = h.open("x", "/good", len(body), []byte(body), true, false)
				case "short":
					st, err = h.open("x", "/short", len(body)+10, []byte(body), true, false)
				case "long":
					st, err = h.open("x", "/long", len(body)-3, []byte(body), true, false)
				case "reset":
					st, err = h.open("x", "/reset", len(body)+10, []byte(body), false, true)
				}
				if err != nil {
					h.mu.Lock()
					ga := h.goAway
					h.mu.Unlock()
					t.Fatalf("%s: round %d: writing stream: %v (GOAWAY received: %v)", name, round, err, ga)
				}
				wave = append(wave, sent{st, kind, body})
			}
			for _, w := range wave {
				if w.kind == "reset" {
					continue // the client gave it up: no answer is owed
				}
				select {
				case <-w.s.ended:
				case <-time.After(5 * time.Second):
					t.Fatalf("%s: round %d: a %s stream got no answer in 5s", name, round, w.kind)
				}
			}
			all = append(all, wave...)
		}
		for _, w := range all {
			switch {
			case w.kind == "good":
				goods++
				if w.s.status != 200 || w.s.body.String() != "got "+w.body {
					t.Errorf("%s: a good stream got %d %q (reset %v); want 200 %q", name, w.s.status, w.s.body.String(), w.s.reset, "got "+w.body)
				}
			case w.kind == "reset":
			case w.s.status >= 500 || w.s.status == 200 || w.s.status == 0 && w.s.reset == 0:
				t.Errorf("%s: a %s stream got %d (reset %v); want a 4xx or the stream refused", name, w.kind, w.s.status, w.s.reset)
			}
		}
		h.mu.Lock()
		if h.goAway != nil {
			t.Errorf("%s: the server sent GOAWAY (%v, last stream %d): one bad stream ended the connection", name, h.goAway.ErrCode, h.goAway.LastStreamID)
		}
		h.mu.Unlock()
	}
	if n := seen.Load(); n != goods {
		t.Errorf("the backend read %d whole requests; want only the %d good ones", n, goods)
	}
	hostsClean(t, s)
}

// On HTTP/3 a body that ends before its content-length is the stream's
// fault too: it gets a well-formed 400 (no connection-specific field,
// which would make the answer malformed) and its neighbours on the same
// QUIC connection are served.
func TestH3BadStreamGetsItsAnswer(t *testing.T) {
	t.Parallel()
	var seen atomic.Int64
	b := backend(t, "127.1.32.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		seen.Add(1)
		fmt.Fprintf(w, "got %s", body)
	}))
	dir := t.TempDir()
	ca := testpki.NewCA(t, "h3 streams CA")
	cert, key := ca.Write(t, dir, "x", testpki.Leaf{DNS: []string{"x"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	s, _, _ := startSturdy(t, parseConfig(t, http3Config, map[string]string{"b": addr(b), "cert": cert, "key": key}))
	h3 := &http3.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: "x"}}
	t.Cleanup(func() { h3.Close() })
	c := &http.Client{Timeout: 5 * time.Second, Transport: h3}
	url := "https://" + s.HTTP3Addr("tls") + "/"
	post := func(body string, length int64) (int, string, error) {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.ContentLength = length
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(got), err
	}
	var goods int64
	for i := range 20 {
		body := "h3-" + strconv.Itoa(i)
		if i%4 == 1 {
			if st, _, err := post(body, int64(len(body)+10)); err != nil || st != 400 {
				t.Errorf("a body short of its content-length: %d, %v; want a readable 400", st, err)
			}
			continue
		}
		goods++
		if st, got, err := post(body, int64(len(body))); err != nil || st != 200 || got != "got "+body {
			t.Errorf("a good request after bad ones: %d %q %v", st, got, err)
		}
	}
	if n := seen.Load(); n != goods {
		t.Errorf("the backend got %d requests; want only the %d good ones", n, goods)
	}
	hostsClean(t, s)
}
