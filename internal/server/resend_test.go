package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/health"
	"github.com/sturdyproxy/sturdy/internal/outcome"
)

const resendConfig = `
admin: { listen: "off" }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: site, default: true, pool: web } ]
pools:
  - name: web
    balance: round_robin
    hosts: [ { addr: "{{a}}" }, { addr: "{{b}}" } ]
`

// goingDownBackend answers with keep-alive until dying is set; from then on
// it reads each request and closes the connection without answering, on
// the connections it already had as on new ones: a process on its way
// down, still accepting.
func goingDownBackend(t *testing.T, ip string, dying *atomic.Bool, got *atomic.Int64) string {
	return rawBackend(t, ip, func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			got.Add(1)
			if dying.Load() {
				return
			}
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na"); err != nil {
				return
			}
		}
	})
}

// One of two backends dies under keep-alive load. The request that meets
// its idle connection is sent again on a new one (the keep-alive race)
// and fails there too: that is one host asked twice, not two backends
// agreeing that the request is bad. It goes to the healthy host.
func TestAResendToTheSameHostIsNotASecondBackend(t *testing.T) {
	t.Parallel()
	var dying atomic.Bool
	var gotA atomic.Int64
	a := goingDownBackend(t, "127.1.4.1", &dying, &gotA)
	b := addr(backend(t, "127.1.4.2", named("b")))
	s, url, _ := startSturdy(t, parseConfig(t, resendConfig, map[string]string{"a": a, "b": b}))

	c := clientFrom("127.0.4.1")
	for i := range 4 { // both hosts have an idle keep-alive connection now
		if resp, body := get(t, c, fmt.Sprintf("%s/warm/%d", url, i)); resp.StatusCode != 200 {
			t.Fatalf("warm-up: %d %q", resp.StatusCode, body)
		}
	}
	dying.Store(true)
	before := gotA.Load()
	var failed []string
	for i := range 10 {
		resp, body := get(t, clientFrom(fmt.Sprintf("127.0.4.%d", 2+i%3)), fmt.Sprintf("%s/page/%d", url, i))
		if resp.StatusCode != 200 || !strings.HasPrefix(body, "b ") {
			failed = append(failed, fmt.Sprintf("%d %q", resp.StatusCode, body))
		}
	}
	if len(failed) > 0 {
		t.Errorf("%d of 10 requests were not served by the healthy host: %v", len(failed), failed)
	}
	if gotA.Load() == before {
		t.Fatal("the dying host got no request: nothing was tested")
	}
	m := s.monitor
	if n := m.AttributedCount(health.AttrRequest); n != 0 {
		t.Errorf("%d failures attributed to the request; the dying host is the cause", n)
	}
	h := s.Runtime().Pools[0].Host(a)
	if h == nil || h.Attempts(outcome.EOFBeforeResponse) == 0 {
		t.Errorf("the dying host was charged nothing")
	}
}
