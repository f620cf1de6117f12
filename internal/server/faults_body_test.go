package server

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/edge"
	"github.com/sturdyproxy/sturdy/internal/outcome"
	"github.com/sturdyproxy/sturdy/internal/testing/fake"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

const faultsConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes:
  - { name: app, default: true, pool: app }
  - { name: big, path: /big/, pool: app, buffer_request_body: 1KiB, request_buffering: false }
  - { name: slow, path: /slow/, pool: app, timeouts: { client_body: 300ms, client_send: 300ms } }
pools:
  - name: app
    hosts: [ { addr: "{{r1}}" }, { addr: "{{r2}}" } ]
    health: { passive: { window: 30s, min_requests: 5, min_clients: 2 } }
`

func startFaults(t *testing.T) (*Server, string, []*fake.Recorder) {
	t.Helper()
	rs := recorders(t, 2)
	s, url, _ := startSturdy(t, parseConfig(t, faultsConfig, map[string]string{"r1": rs[0].Addr, "r2": rs[1].Addr}))
	return s, strings.TrimPrefix(url, "http://"), rs
}

// chunkedPost is a POST whose chunked body is body (already framed).
func chunkedPost(path, body string) string {
	return "POST " + path + " HTTP/1.1\r\nHost: shop.example\r\nTransfer-Encoding: chunked\r\n\r\n" + body
}

// malformedBodies are bodies that do not parse, each a way to get chunked
// framing wrong, plus lengths that lie.
var malformedBodies = []struct{ name, req string }{
	{"non-hex size", chunkedPost("/bad", "zz\r\nabc\r\n0\r\n\r\n")},
	{"18 hex digits", chunkedPost("/bad", "000000000000000003\r\nabc\r\n0\r\n\r\n")},
	{"overflowing size", chunkedPost("/bad", "fffffffffffffffffff\r\nabc\r\n0\r\n\r\n")},
	{"negative size", chunkedPost("/bad", "-5\r\nabcde\r\n0\r\n\r\n")},
	{"0x size", chunkedPost("/bad", "0x5\r\nabcde\r\n0\r\n\r\n")},
	{"bare LF lines", chunkedPost("/bad", "3\nabc\n0\n\n")},
	{"data longer than its size", chunkedPost("/bad", "3\r\nabcdef\r\n0\r\n\r\n")},
	{"no CRLF after data", chunkedPost("/bad", "3\r\nabc0\r\n\r\n")},
	{"control byte in trailer", chunkedPost("/bad", "3\r\nabc\r\n0\r\nX-T: a\x01b\r\n\r\n")},
	{"control byte in extension", chunkedPost("/bad", "3;x=\x01\r\nabc\r\n0\r\n\r\n")},
	{"junk after size", chunkedPost("/bad", "3 x\r\nabc\r\n0\r\n\r\n")},
	{"trailer without colon", chunkedPost("/bad", "3\r\nabc\r\n0\r\nnot a field\r\n\r\n")},
	{"bare CR in a size line", chunkedPost("/bad", "3\rabc\r\n0\r\n\r\n")},
	{"space before the size", chunkedPost("/bad", " 3\r\nabc\r\n0\r\n\r\n")},
	{"empty size line", chunkedPost("/bad", "\r\nabc\r\n0\r\n\r\n")},
	{"size line too long", chunkedPost("/bad", "3;"+strings.Repeat("e", 4000)+"\r\nabc\r\n0\r\n\r\n")},
	{"LF only after data", chunkedPost("/bad", "3\r\nabc\n0\r\n\r\n")},
	{"bare LF ending the trailers", chunkedPost("/bad", "3\r\nabc\r\n0\r\n\n")},
	{"DEL in a trailer", chunkedPost("/bad", "3\r\nabc\r\n0\r\nX-T: a\x7fb\r\n\r\n")},
	{"valid chunks then a bad one", chunkedPost("/bad", "3\r\nabc\r\n4\r\ndefg\r\nzz\r\nxyz\r\n0\r\n\r\n")},
}

// shortBodies end before they should; the client then half-closes.
var shortBodies = []struct{ name, req string }{
	{"length that lies", "POST /bad HTTP/1.1\r\nHost: shop.example\r\nContent-Length: 100\r\n\r\nonly this"},
	{"chunked without its last chunk", chunkedPost("/bad", "3\r\nabc\r\n")},
}

// Items 1 and 2: a body that does not parse is the client's. It gets
// 400 and a closed connection, and not one byte of it (not even the head)
// reaches a backend; six clients sending such bodies among good traffic
// move no host out of rotation.
func TestMalformedBodiesAreTheClients(t *testing.T) {
	t.Parallel()
	s, addr, rec := startFaults(t)
	var wg sync.WaitGroup
	errs := make(chan string, 200)
	for c := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from := fmt.Sprintf("127.0.12.%d", c+1)
			good := clientFrom(from)
			for i := range 4 {
				m := malformedBodies[(c*4+i)%len(malformedBodies)]
				r := rawSend(t, from, addr, m.req, 5*time.Second)
				if r.first() != 400 || !r.closed {
					errs <- fmt.Sprintf("%s from %s: status %d, closed %v: %q", m.name, from, r.first(), r.closed, r.text)
				}
				for range 3 {
					if resp, _ := get(t, good, "http://"+addr+"/ok"); resp.StatusCode != 200 {
						errs <- fmt.Sprintf("good GET from %s: %d", from, resp.StatusCode)
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, m := range malformedBodies {
		if r := rawSend(t, "127.0.12.9", addr, m.req, 5*time.Second); r.first() != 400 || !r.closed {
			t.Errorf("%s: status %d, closed %v: %q", m.name, r.first(), r.closed, r.text)
		}
	}
	for _, m := range shortBodies {
		c := rawDial(t, "127.0.12.9", addr)
		c.Write([]byte(m.req))
		c.(interface{ CloseWrite() error }).CloseWrite()
		if r := rawRead(c, 5*time.Second); r.first() != 400 || !r.closed {
			t.Errorf("%s: status %d, closed %v: %q", m.name, r.first(), r.closed, r.text)
		}
		c.Close()
	}
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	for _, r := range rec {
		if got := r.Received(); strings.Contains(got, "/bad") {
			t.Errorf("a backend received (part of) a malformed request:\n%q", got)
		}
	}
	hostsClean(t, s)
	c := s.edge
	if n := c.Count(edge.FaultMalformedBody); n != uint64(24+len(malformedBodies)) {
		t.Errorf("malformed_body counted %d, want %d", n, 24+len(malformedBodies))
	}
	if n := c.Count(edge.FaultShortBody); n != uint64(len(shortBodies)) {
		t.Errorf("short_body counted %d, want %d", n, len(shortBodies))
	}
}

// Item 2, for bodies larger than the route buffers on a route with
// request_buffering: false: they stream, and when
// the stream turns out malformed the attempt is abandoned (the backend
// sees its connection closed before the request ends), classed
// client_body_error, held against no host; the client gets 400.
func TestMalformedStreamedBodyAbortsTheAttempt(t *testing.T) {
	t.Parallel()
	s, addr, rec := startFaults(t)
	chunk := strings.Repeat("a", 2048)
	streamedBad := []string{"zz\r\n", "5\nhello\n", "3\r\nabcdef\r\n", "0\r\nX-T: \x01\r\n\r\n", "0\r\n\n", "-1\r\n", "3\rabc\r\n"}
	for i, bad := range streamedBad {
		req := chunkedPost("/big/upload", fmt.Sprintf("800\r\n%s\r\n800\r\n%s\r\n%s", chunk, chunk, bad))
		r := rawSend(t, "127.0.12.20", addr, req, 5*time.Second)
		if r.first() != 400 || !r.closed {
			t.Errorf("case %d: status %d, closed %v: %q", i, r.first(), r.closed, r.text)
		}
	}
	// Every backend connection that saw the upload was closed before the
	// request ended: no backend got a complete malformed request. (The
	// backend notices the close a moment after the client has its 400.)
	seen, open := 0, 0
	testutil.Eventually(5*time.Second, func() bool {
		seen, open = 0, 0
		for _, r := range rec {
			got, closed := r.Conns()
			for i, b := range got {
				if strings.Contains(b, "/big/upload") {
					seen++
					if !closed[i] {
						open++
					}
				}
			}
		}
		return seen > 0 && open == 0
	})
	if seen == 0 {
		t.Fatal("no upload streamed to a backend: the test proves nothing")
	}
	if open > 0 {
		t.Errorf("%d backend connections carrying a broken upload were kept open", open)
	}
	for _, r := range rec {
		got, _ := r.Conns()
		for _, b := range got {
			if strings.Contains(b, "/big/upload") && strings.Contains(b, "\r\n0\r\n\r\n") {
				t.Errorf("a backend got a complete request from a broken upload:\n%q", b)
			}
		}
	}
	if n := allAttempts(s, outcome.ClientBodyError); n != uint64(len(streamedBad)) {
		t.Errorf("%d attempts classed client_body_error, want %d", n, len(streamedBad))
	}
	hostsClean(t, s)
	// A good upload of the same size still goes through, streamed.
	good := chunkedPost("/big/upload", fmt.Sprintf("800\r\n%s\r\n800\r\n%s\r\n0\r\n\r\n", chunk, chunk))
	r := rawSend(t, "127.0.12.20", addr, good+"GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 5*time.Second)
	if fmt.Sprint(r.statuses()) != "[200 200]" {
		t.Errorf("a good upload and a request after it on the same connection: %v\n%q", r.statuses(), r.text)
	}
	if !strings.Contains(r.text, "POST /big/upload 4096") {
		t.Errorf("the good upload did not arrive whole:\n%q", r.text)
	}
}
