package server

import (
	"crypto/tls"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/edge"
	"github.com/sturdyproxy/sturdy/internal/testing/testpki"
)

// smuggle is a request whose framing two parsers can read differently,
// followed by a request hidden where one of them sees body.
var smuggle = []struct{ name, req string }{
	{"CL.TE", "POST /front HTTP/1.1\r\nHost: shop.example\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" +
		"GET /smuggled HTTP/1.1\r\nHost: shop.example\r\n\r\n"},
	{"TE.CL", "POST /front HTTP/1.1\r\nHost: shop.example\r\nTransfer-Encoding: chunked\r\nContent-Length: 48\r\n\r\n0\r\n\r\n" +
		"GET /smuggled HTTP/1.1\r\nHost: shop.example\r\n\r\n"},
	{"TE folded", "POST /front HTTP/1.1\r\nHost: shop.example\r\nContent-Length: 5\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n" +
		"GET /smuggled HTTP/1.1\r\nHost: shop.example\r\n\r\n"},
	{"TE upper case with CL", "POST /front HTTP/1.1\r\nHost: shop.example\r\nContent-Length: 5\r\nTransfer-Encoding: CHUNKED\r\n\r\n0\r\n\r\n" +
		"GET /smuggled HTTP/1.1\r\nHost: shop.example\r\n\r\n"},
	{"TE on HTTP/1.0", "POST /front HTTP/1.0\r\nHost: shop.example\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\n0\r\n\r\n" +
		"GET /smuggled HTTP/1.1\r\nHost: shop.example\r\n\r\n"},
	{"two lengths", "POST /front HTTP/1.1\r\nHost: shop.example\r\nContent-Length: 0\r\nContent-Length: 45\r\n\r\n" +
		"GET /smuggled HTTP/1.1\r\nHost: shop.example\r\n\r\n"},
	{"TE list", "POST /front HTTP/1.1\r\nHost: shop.example\r\nTransfer-Encoding: identity, chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" +
		"GET /smuggled HTTP/1.1\r\nHost: shop.example\r\n\r\n"},
	{"two TE fields", "POST /front HTTP/1.1\r\nHost: shop.example\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" +
		"GET /smuggled HTTP/1.1\r\nHost: shop.example\r\n\r\n"},
	{"TE.TE obfuscated", "POST /front HTTP/1.1\r\nHost: shop.example\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: x\r\nContent-Length: 4\r\n\r\n0\r\n\r\n" +
		"GET /smuggled HTTP/1.1\r\nHost: shop.example\r\n\r\n"},
	{"TE xchunked with CL", "POST /front HTTP/1.1\r\nHost: shop.example\r\nTransfer-Encoding: xchunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n" +
		"GET /smuggled HTTP/1.1\r\nHost: shop.example\r\n\r\n"},
	{"TE chunked, identity", "POST /front HTTP/1.1\r\nHost: shop.example\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n" +
		"GET /smuggled HTTP/1.1\r\nHost: shop.example\r\n\r\n"},
	{"TE with space before colon", "POST /front HTTP/1.1\r\nHost: shop.example\r\nTransfer-Encoding : chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n" +
		"GET /smuggled HTTP/1.1\r\nHost: shop.example\r\n\r\n"},
	{"TE behind a vertical tab", "POST /front HTTP/1.1\r\nHost: shop.example\r\nTransfer-Encoding:\x0bchunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n" +
		"GET /smuggled HTTP/1.1\r\nHost: shop.example\r\n\r\n"},
	{"CL with a sign", "POST /front HTTP/1.1\r\nHost: shop.example\r\nContent-Length: +45\r\n\r\n" +
		"GET /smuggled HTTP/1.1\r\nHost: shop.example\r\n\r\n"},
	{"CL list", "POST /front HTTP/1.1\r\nHost: shop.example\r\nContent-Length: 45, 0\r\n\r\n" +
		"GET /smuggled HTTP/1.1\r\nHost: shop.example\r\n\r\n"},
	{"CL folded", "POST /front HTTP/1.1\r\nHost: shop.example\r\nContent-Length: 0\r\n 45\r\n\r\n" +
		"GET /smuggled HTTP/1.1\r\nHost: shop.example\r\n\r\n"},
	{"CL.TE on a GET", "GET /front HTTP/1.1\r\nHost: shop.example\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" +
		"GET /smuggled HTTP/1.1\r\nHost: shop.example\r\n\r\n"},
	{"after a good request", "GET /first HTTP/1.1\r\nHost: shop.example\r\n\r\n" +
		"POST /front HTTP/1.1\r\nHost: shop.example\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" +
		"GET /smuggled HTTP/1.1\r\nHost: shop.example\r\n\r\n"},
}

// Item 3 on a plain listener: a request with ambiguous framing is refused
// with 400 and the connection closed; neither it nor what hides behind it
// reaches a backend. Unambiguous chunked requests keep their connection.
func TestAmbiguousFramingIsRefused(t *testing.T) {
	t.Parallel()
	s, addr, rec := startFaults(t)
	for _, c := range smuggle {
		r := rawSend(t, "127.0.12.30", addr, c.req, 5*time.Second)
		st := r.statuses()
		if !r.closed || len(st) == 0 || st[len(st)-1] < 400 || st[len(st)-1] >= 600 {
			t.Errorf("%s: statuses %v, closed %v:\n%s", c.name, st, r.closed, r.text)
		}
	}
	got := rec[0].Received() + rec[1].Received()
	if strings.Contains(got, "/smuggled") || strings.Contains(got, "/front") {
		t.Errorf("an ambiguous request or what it hid reached a backend:\n%q", got)
	}
	if !strings.Contains(got, "GET /first") {
		t.Error("the good request before the ambiguous one was not served")
	}
	if s.edge.Count(edge.FaultFraming) == 0 {
		t.Error("ambiguous framing not counted")
	}
	// Chunked uploads with one framing keep the connection alive.
	ok := chunkedPost("/a", "3\r\nabc\r\n0\r\n\r\n") + chunkedPost("/b", "2\r\nde\r\n0\r\nX-Sum: 1\r\n\r\n") + "GET /c HTTP/1.1\r\nHost: x\r\n\r\n"
	r := rawSend(t, "127.0.12.30", addr, ok, 500*time.Millisecond)
	if fmt.Sprint(r.statuses()) != "[200 200 200]" || r.closed {
		t.Errorf("three unambiguous requests on one connection: %v, closed %v\n%s", r.statuses(), r.closed, r.text)
	}
	hostsClean(t, s)
}

const tlsFramingConfig = `
admin: { listen: "off" }
listeners:
  - name: https
    listen: "127.0.0.1:0"
    tls: { certificates: [ { cert: "{{cert}}", key: "{{key}}" } ] }
routes: [ { name: app, default: true, pool: app } ]
pools:
  - { name: app, hosts: [ { addr: "{{r1}}" } ] }
`

// Item 3 on a TLS listener, where no tracker can see the bytes (net/http
// decrypts them itself): a chunked HTTP/1.1 request is answered, then
// its connection is closed, so that nothing after its body is ever read
// as another request. Requests with Content-Length keep theirs.
func TestChunkedOverTLSClosesTheConnection(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testpki.NewCA(t, "framing CA")
	cert, key := ca.Write(t, dir, "shop", testpki.Leaf{DNS: []string{"shop.example"}})
	rec := recorders(t, 1)
	s, _, _ := startSturdy(t, parseConfig(t, tlsFramingConfig, map[string]string{"cert": cert, "key": key, "r1": rec[0].Addr}))
	addr := s.Addr("https")
	send := func(req string) rawReply {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "shop.example", NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, req)
		return rawRead(c, time.Second)
	}
	for _, c := range smuggle[:4] {
		r := send(c.req)
		if !r.closed || len(r.statuses()) != 1 {
			t.Errorf("%s: statuses %v, closed %v", c.name, r.statuses(), r.closed)
		}
	}
	if got := rec[0].Received(); strings.Contains(got, "/smuggled") {
		t.Errorf("a smuggled request reached the backend:\n%q", got)
	}
	if r := send("GET /a HTTP/1.1\r\nHost: shop.example\r\n\r\nPOST /b HTTP/1.1\r\nHost: shop.example\r\nContent-Length: 2\r\n\r\nhi"); r.closed || len(r.statuses()) != 2 {
		t.Errorf("requests with lengths over TLS: %v, closed %v", r.statuses(), r.closed)
	}
}
