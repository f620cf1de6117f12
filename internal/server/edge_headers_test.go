package server

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/edge"
)

// headerEcho answers with the request's header and trailer, as JSON,
// after reading the body (the trailer comes after it).
func headerEcho() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		json.NewEncoder(w).Encode(map[string]http.Header{"header": r.Header, "trailer": r.Trailer})
	})
}

// rawExchange sends raw from address from and returns the header and
// trailer the echo backend got, and the status.
func echoExchange(t *testing.T, from, base, raw string) (int, http.Header, http.Header) {
	t.Helper()
	c := rawDial(t, from, strings.TrimPrefix(base, "http://"))
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got map[string]http.Header
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
	}
	return resp.StatusCode, got["header"], got["trailer"]
}

const edgeHeadersConfig = `
admin: { listen: "off" }
trusted_proxies: [ 127.0.31.8, 127.0.31.9 ]
listeners:
  - { name: web, listen: "127.0.0.1:0", frontend: {{fe}} }
  - { name: lax, listen: "127.0.0.1:0", frontend: {{fe}}, allow_underscores_in_headers: true }
routes:
  - { name: site, default: true, pool: echo }
  - { name: stream, path: /stream/, pool: echo, buffer_request_body: 0 }
pools:
  - { name: echo, hosts: [ { addr: "{{b}}" } ] }
`

func startEdgeHeaders(t *testing.T, fe string) (s *Server, web, lax string) {
	b := backend(t, "127.1.31.1", headerEcho())
	s, web, _ = startSturdy(t, parseConfig(t, edgeHeadersConfig, map[string]string{"b": addr(b), "fe": fe}))
	return s, web, "http://" + s.Addr("lax")
}

// Header names with "_" never reach a backend by default: CGI, WSGI, Rack
// and PHP turn "-" into "_", so X_Real_IP would pass for the X-Real-IP
// sturdy sets (nginx drops them: underscores_in_headers off). Each request
// that lost one is counted once as an edge decision. A listener with
// allow_underscores_in_headers keeps them.
func TestHeadersWithUnderscoresAreDropped(t *testing.T) {
	t.Parallel()
	for _, fe := range frontEnds() {
		t.Run(fe, func(t *testing.T) {
			s, web, lax := startEdgeHeaders(t, fe)
			raw := "GET /x HTTP/1.1\r\nHost: site.test\r\n" +
				"X_Forwarded_For: 6.6.6.6\r\nX_Real_IP: 6.6.6.6\r\nX_Client_Cert_Subject: CN=admin\r\n" +
				"x_auth_user: admin\r\nTransfer_Encoding: chunked\r\nX-Kept: yes\r\n\r\n"
			before := s.edge.Count(edge.DroppedUnderscore)
			for i, from := range []string{"127.0.31.1", "127.0.31.2", "127.0.31.8"} {
				st, h, _ := echoExchange(t, from, web, raw)
				if st != 200 {
					t.Fatalf("from %s: status %d", from, st)
				}
				for k := range h {
					if strings.Contains(k, "_") {
						t.Errorf("from %s: %s reached the backend: %q", from, k, h[k])
					}
				}
				if h.Get("X-Kept") != "yes" || h.Get("X-Real-Ip") != from {
					t.Errorf("from %s: X-Kept %q, X-Real-Ip %q", from, h.Get("X-Kept"), h.Get("X-Real-Ip"))
				}
				if got := s.edge.Count(edge.DroppedUnderscore) - before; got != uint64(i+1) {
					t.Errorf("after %d requests, %d counted as underscore_header", i+1, got)
				}
			}
			st, h, _ := echoExchange(t, "127.0.31.3", lax, raw)
			if st != 200 || h.Get("X_auth_user") != "admin" || h.Get("X_real_ip") != "6.6.6.6" {
				t.Errorf("allow_underscores_in_headers: %d, %v", st, h)
			}
			// No such field, nothing counted.
			n := s.edge.Count(edge.DroppedUnderscore)
			echoExchange(t, "127.0.31.1", web, "GET /x HTTP/1.1\r\nHost: site.test\r\nX-A-B: 1\r\n\r\n")
			if s.edge.Count(edge.DroppedUnderscore) != n {
				t.Error("a request without underscores counted as underscore_header")
			}
		})
	}
}

// The client-address fields that CDNs and Exchange-era proxies pass on
// are dropped from clients like the other identity fields, and pass from
// trusted proxies.
func TestMoreIdentityHeadersAreDroppedFromClients(t *testing.T) {
	t.Parallel()
	_, web, _ := startEdgeHeaders(t, config.FrontendNative)
	raw := "GET /x HTTP/1.1\r\nHost: site.test\r\nX-Originating-IP: 6.6.6.6\r\nX-Remote-IP: 6.6.6.6\r\n" +
		"X-Remote-Addr: 6.6.6.6\r\nX-ProxyUser-Ip: 6.6.6.6\r\n\r\n"
	names := []string{"X-Originating-Ip", "X-Remote-Ip", "X-Remote-Addr", "X-Proxyuser-Ip"}
	_, h, _ := echoExchange(t, "127.0.31.4", web, raw)
	for _, k := range names {
		if v, ok := h[k]; ok {
			t.Errorf("from a client, %s reached the backend: %q", k, v)
		}
	}
	_, h, _ = echoExchange(t, "127.0.31.8", web, raw)
	for _, k := range names {
		if h.Get(k) != "6.6.6.6" {
			t.Errorf("from a trusted proxy, %s = %q", k, h.Get(k))
		}
	}
}

// Behind trusted proxies, X-Real-IP is the client sturdy resolved from
// X-Forwarded-For (the address its limits and keys judge), not the
// nearest proxy's; a proxy's own X-Real-IP is kept only when it sent no
// chain to resolve.
func TestRealIPIsTheResolvedClient(t *testing.T) {
	t.Parallel()
	for _, fe := range frontEnds() {
		t.Run(fe, func(t *testing.T) {
			_, web, _ := startEdgeHeaders(t, fe)
			for _, tc := range []struct{ from, fields, want string }{
				{"127.0.31.8", "X-Forwarded-For: 203.0.113.5\r\n", "203.0.113.5"},
				{"127.0.31.8", "X-Forwarded-For: 198.51.100.1, 127.0.31.9\r\n", "198.51.100.1"},
				{"127.0.31.8", "X-Forwarded-For: 203.0.113.5\r\nX-Real-IP: 192.0.2.99\r\n", "203.0.113.5"},
				{"127.0.31.8", "X-Real-IP: 192.0.2.7\r\n", "192.0.2.7"},
				{"127.0.31.8", "", "127.0.31.8"},
				{"127.0.31.5", "X-Forwarded-For: 203.0.113.5\r\nX-Real-IP: 192.0.2.99\r\n", "127.0.31.5"},
			} {
				_, h, _ := echoExchange(t, tc.from, web, "GET /x HTTP/1.1\r\nHost: site.test\r\n"+tc.fields+"\r\n")
				if got := h.Get("X-Real-Ip"); got != tc.want {
					t.Errorf("from %s with %q: X-Real-Ip %q, want %q", tc.from, tc.fields, got, tc.want)
				}
			}
		})
	}
}

// A request trailer may not carry what is decided from the header
// (RFC 9110 6.5.1): Host, framing, authentication, cookies, conditionals,
// content format, nor the fields that name the client. Those are dropped
// on the way to the backend, on a route that reads bodies whole and on
// one that streams them; the rest of the trailer goes on.
func TestForbiddenRequestTrailersAreDropped(t *testing.T) {
	t.Parallel()
	forbidden := []string{"Host", "Authorization", "Cookie", "If-None-Match", "Range", "Content-Type", "Content-Encoding",
		"X-Forwarded-For", "X-Real-Ip", "X-Client-Cert-Subject", "X_user", "X-Original-Url"}
	for _, fe := range frontEnds() {
		t.Run(fe, func(t *testing.T) {
			s, web, _ := startEdgeHeaders(t, fe)
			for _, path := range []string{"/buffered", "/stream/x"} {
				before := s.edge.Count(edge.DroppedTrailer)
				var tr strings.Builder
				for _, k := range forbidden {
					tr.WriteString(k + ": evil\r\n")
				}
				raw := "POST " + path + " HTTP/1.1\r\nHost: site.test\r\nTransfer-Encoding: chunked\r\n" +
					"Trailer: X-Checksum, Host, Authorization\r\n\r\n" +
					"5\r\nhello\r\n0\r\nX-Checksum: abc\r\n" + tr.String() + "\r\n"
				st, h, trailer := echoExchange(t, "127.0.31.6", web, raw)
				if st != 200 {
					t.Fatalf("%s: status %d", path, st)
				}
				if trailer.Get("X-Checksum") != "abc" {
					t.Errorf("%s: the allowed trailer was lost: %v", path, trailer)
				}
				for _, k := range forbidden {
					if v, ok := trailer[k]; ok {
						t.Errorf("%s: trailer %s reached the backend: %q", path, k, v)
					}
				}
				if strings.Contains(h.Get("Trailer"), "Host") {
					t.Errorf("%s: the backend was announced a Host trailer: %q", path, h.Get("Trailer"))
				}
				if got := s.edge.Count(edge.DroppedTrailer) - before; got != 1 {
					t.Errorf("%s: %d requests counted as forbidden_trailer, want 1", path, got)
				}
			}
		})
	}
}
