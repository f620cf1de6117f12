package access

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Basic auth: a challenge, then the right password passes and the backend
// never sees the Authorization header; failures are rate limited per client.
func TestBasicAuthOverRealSockets(t *testing.T) {
	s := newStack(t, `
routes:
  - name: staff
    default: true
    pool: web
    basic_auth: { realm: Staff only, htpasswd: DIR/htpasswd, failure_burst: 1, failure_rate: 1r/m }
`)
	alice, guesser := from(t, "127.0.0.20"), from(t, "127.0.0.21")
	resp, _ := do(t, alice, "GET", s.front+"/")
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != `Basic realm="Staff only", charset="UTF-8"` {
		t.Fatalf("no credentials: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	req := func(c *http.Client, pw string) *http.Response {
		r, _ := http.NewRequest("GET", s.front+"/", nil)
		r.SetBasicAuth("alice", pw)
		resp, err := c.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if resp := req(alice, "wonder land"); resp.StatusCode != 200 {
		t.Fatalf("right password: %d", resp.StatusCode)
	}
	if h := s.lastSeen(); h.Get("Authorization") != "" {
		t.Fatal("the password reached the backend")
	}
	var got []int
	for range 3 {
		got = append(got, req(guesser, "guess").StatusCode)
	}
	if fmt.Sprint(got) != "[401 429 429]" { // one failure allowed
		t.Fatalf("guesser: %v", got)
	}
	if resp := req(alice, "wonder land"); resp.StatusCode != 200 {
		t.Fatalf("alice after the guesser was blocked: %d", resp.StatusCode)
	}
}

func TestAuthorizationIsForwardedWhenConfigured(t *testing.T) {
	s := newStack(t, `
routes:
  - { name: staff, default: true, pool: web, basic_auth: { htpasswd: DIR/htpasswd, forward_authorization: true } }
`)
	r, _ := http.NewRequest("GET", s.front+"/", nil)
	r.SetBasicAuth("alice", "wonder land")
	resp, err := from(t, "127.0.0.22").Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(s.lastSeen().Get("Authorization"), "Basic ") {
		t.Fatalf("%d, Authorization %q", resp.StatusCode, s.lastSeen().Get("Authorization"))
	}
}

// Forward auth behind the other controls: the auth service's user reaches
// the backend, a forged one does not.
func TestForwardAuthOverRealSockets(t *testing.T) {
	auth := serve(t, "127.2.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Cookie") == "session=ok" {
			w.Header().Set("X-Auth-Request-User", "bob")
			w.WriteHeader(202)
			return
		}
		http.Redirect(w, r, "http://login.example/?rd="+url.QueryEscape(r.Header.Get("X-Forwarded-Uri")), http.StatusFound)
	}))
	s := newStack(t, `
routes:
  - name: app
    default: true
    pool: web
    forward_auth: { url: "`+auth+`/check", copy_headers: [X-Auth-Request-User] }
`)
	c := from(t, "127.0.0.30")
	resp, body := do(t, c, "GET", s.front+"/inbox", "X-Auth-Request-User", "mallory")
	if resp.StatusCode != 302 || resp.Header.Get("Location") != "http://login.example/?rd=%2Finbox" || strings.Contains(body, "content") {
		t.Fatalf("signed out: %d %q %q", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	resp, body = do(t, c, "GET", s.front+"/inbox", "Cookie", "session=ok", "X-Auth-Request-User", "mallory")
	if resp.StatusCode != 200 || body != "content of /inbox for bob\n" {
		t.Fatalf("signed in: %d %q", resp.StatusCode, body)
	}
}
