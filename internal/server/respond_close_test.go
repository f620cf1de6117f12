package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"
)

const respondCloseConfig = `
admin: { listen: "off" }
listeners:
  - { name: web, listen: "127.0.0.1:0" }
  - { name: h2c, listen: "127.0.0.1:0", h2c: true }
routes:
  - { name: scanners, path: /wp-admin/, respond: { close: true } }
  - { name: site, default: true, respond: { body: "ok\n" } }
`

// respond: { close: true } answers nothing, as nginx's return 444: on
// HTTP/1 the connection closes with not a byte written, even one kept
// alive by an earlier answer; on HTTP/2 only the stream is reset, and the
// connection serves the next request.
func TestRespondClose(t *testing.T) {
	t.Parallel()
	s, _, logs := startSturdy(t, parseConfig(t, respondCloseConfig, nil))

	c, err := net.Dial("tcp", s.Addr("web"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "ok\n" {
		t.Fatalf("GET /: %d %q, want the fixed 200", resp.StatusCode, body)
	}
	io.WriteString(c, "POST /wp-admin/x.php HTTP/1.1\r\nHost: a.test\r\nContent-Length: 2\r\n\r\nab")
	rest, err := io.ReadAll(br)
	if err != nil || len(rest) != 0 {
		t.Fatalf("the closing route sent %q (read error %v); want nothing, then the connection closed", rest, err)
	}

	cl := h2cClient()
	base := "http://" + s.Addr("h2c")
	if resp, err := cl.Get(base + "/wp-admin/"); err == nil {
		resp.Body.Close()
		t.Fatalf("HTTP/2: the closing route answered %s %d; want the stream reset", resp.Proto, resp.StatusCode)
	} else if !strings.Contains(err.Error(), "stream error") {
		t.Errorf("HTTP/2: %v; want a stream error (RST_STREAM)", err)
	}
	reused := false
	req, _ := http.NewRequest("GET", base+"/", nil)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}))
	resp, err = cl.Do(req)
	if err != nil {
		t.Fatalf("HTTP/2 after the reset: %v", err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || string(body) != "ok\n" || !reused {
		t.Errorf("HTTP/2 after the reset: %s %q on a reused connection %v; want the fixed answer on the same connection", resp.Proto, body, reused)
	}
	if got := s.Status().Routes[0].Requests["4xx"]; got != 2 {
		t.Errorf("route scanners counted %d 4xx answers (the 444 of the access log), want 2; logs:\n%s", got, logs.String())
	}
}

// methods_status: 444 closes the connection for a method the route
// refuses (nginx's server-level `if ($request_method !~ ...) { return 444; }`),
// with not a byte written; an allowed method is answered as before.
func TestMethodsStatusClose(t *testing.T) {
	t.Parallel()
	s, _, _ := startSturdy(t, parseConfig(t, `
admin: { listen: "off" }
listeners:
  - { name: web, listen: "127.0.0.1:0" }
routes:
  - { name: site, default: true, methods: [GET, POST], methods_status: 444, respond: { body: "ok\n" } }
`, nil))
	c, err := net.Dial("tcp", s.Addr("web"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	io.WriteString(c, "HEAD / HTTP/1.1\r\nHost: a.test\r\n\r\n")
	resp, err := http.ReadResponse(br, &http.Request{Method: "HEAD"})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("HEAD (allowed with GET): %v %v, want 200", resp, err)
	}
	io.WriteString(c, "DELETE / HTTP/1.1\r\nHost: a.test\r\n\r\n")
	rest, err := io.ReadAll(br)
	if err != nil || len(rest) != 0 {
		t.Fatalf("a refused method got %q (read error %v); want nothing, then the connection closed", rest, err)
	}
}
