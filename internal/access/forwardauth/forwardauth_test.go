package forwardauth

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// serve runs h on a loopback address until the test ends.
func serve(t *testing.T, addr string, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String()
}

// authServer plays oauth2-proxy: /oauth2/auth answers 202 with
// X-Auth-Request-User for a signed-in cookie and otherwise redirects to
// /oauth2/sign_in?rd=THE-ORIGINAL-URL; sign_in sets the cookie and sends the
// client back. /deny, /forbid, /broken and /slow answer 401, 403, 500 and
// nothing in time. It records the sub-requests it saw.
type authServer struct {
	URL  string
	mu   sync.Mutex
	seen []*http.Request
}

func newAuthServer(t *testing.T) *authServer {
	a := &authServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/oauth2/auth", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.seen = append(a.seen, r)
		a.mu.Unlock()
		if c, err := r.Cookie("_oauth2_proxy"); err == nil && strings.HasPrefix(c.Value, "signed-in:") {
			w.Header().Set("X-Auth-Request-User", strings.TrimPrefix(c.Value, "signed-in:"))
			w.Header().Set("X-Auth-Request-Email", "alice@example.com")
			w.Header().Set("X-Not-Copied", "1")
			w.WriteHeader(http.StatusAccepted)
			return
		}
		rd := r.Header.Get("X-Forwarded-Proto") + "://" + r.Header.Get("X-Forwarded-Host") + r.Header.Get("X-Forwarded-Uri")
		http.Redirect(w, r, a.URL+"/oauth2/sign_in?rd="+url.QueryEscape(rd), http.StatusFound)
	})
	mux.HandleFunc("/oauth2/sign_in", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "_oauth2_proxy", Value: "signed-in:alice", Path: "/"})
		http.Redirect(w, r, r.URL.Query().Get("rd"), http.StatusFound)
	})
	mux.HandleFunc("/deny", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="api"`)
		w.Header().Set("Set-Cookie", "tries=1")
		w.Header().Set("X-Internal", "not for clients")
		http.Error(w, "sign in first", http.StatusUnauthorized)
	})
	mux.HandleFunc("/forbid", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "not yours", http.StatusForbidden) })
	mux.HandleFunc("/broken", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "db down", http.StatusInternalServerError) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	a.URL = serve(t, "127.0.0.1:0", mux)
	return a
}

func (a *authServer) last() *http.Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seen[len(a.seen)-1]
}

// site is sturdy in miniature: forward auth, then a reverse proxy to a
// backend that echoes the headers it got.
func site(t *testing.T, cfg config.ForwardAuth) (*Auth, string) {
	t.Helper()
	backend := serve(t, "127.0.0.2:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "protected content for user="+r.Header.Get("X-Auth-Request-User")+
			" email="+r.Header.Get("X-Auth-Request-Email")+" notcopied="+r.Header.Get("X-Not-Copied")+"\n")
	}))
	bu, _ := url.Parse(backend)
	up := &http.Transport{}
	t.Cleanup(up.CloseIdleConnections)
	fa, err := Compile("routes[0].forward_auth", "app", &cfg, up, nil)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(bu) }}
	front := serve(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		v := fa.Check(r, Origin{ClientIP: host, Proto: "http"})
		if !v.OK {
			v.Write(w)
			return
		}
		r = r.Clone(r.Context())
		v.Apply(r.Header)
		rp.ServeHTTP(w, r)
	}))
	return fa, front
}

// client dials from its own loopback address and does not follow redirects.
func client(t *testing.T, from string, jar http.CookieJar) *http.Client {
	tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}).DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, u string, header ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// The oauth2-proxy flow: unauthenticated → 302 to sign in; the sign-in sets
// a cookie; with it → 202 from the auth service and the user's headers
// reach the backend. A client cannot forge X-Auth-Request-User.
func TestOAuth2ProxyStyleSignInFlow(t *testing.T) {
	auth := newAuthServer(t)
	fa, front := site(t, config.ForwardAuth{URL: auth.URL + "/oauth2/auth", Timeout: config.Duration(5 * time.Second),
		CopyHeaders: []string{"X-Auth-Request-User", "x-auth-request-email"}})
	jar, _ := cookiejar.New(nil)
	c := client(t, "127.0.0.7", jar)

	resp, body := get(t, c, front+"/reports/q3?x=1", "X-Auth-Request-User", "mallory")
	if resp.StatusCode != http.StatusFound || strings.Contains(body, "protected") {
		t.Fatalf("unauthenticated: %d %q, want a 302 to sign in and no content", resp.StatusCode, body)
	}
	loc := resp.Header.Get("Location")
	if !strings.HasPrefix(loc, auth.URL+"/oauth2/sign_in?rd=") || !strings.Contains(loc, url.QueryEscape(front+"/reports/q3?x=1")) {
		t.Fatalf("Location %q, want the sign-in page with the original URL", loc)
	}
	sub := auth.last()
	if sub.Method != "GET" || sub.Header.Get("X-Forwarded-Method") != "GET" || sub.Header.Get("X-Forwarded-Uri") != "/reports/q3?x=1" ||
		sub.Header.Get("X-Original-Uri") != "/reports/q3?x=1" || sub.Header.Get("X-Forwarded-For") != "127.0.0.7" ||
		sub.Header.Get("X-Forwarded-Host") != strings.TrimPrefix(front, "http://") || sub.Header.Get("X-Forwarded-Proto") != "http" {
		t.Fatalf("sub-request headers %v", sub.Header)
	}

	resp, _ = get(t, c, loc) // sign in: cookie set, back to the original URL
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != front+"/reports/q3?x=1" {
		t.Fatalf("sign-in: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, body = get(t, c, resp.Header.Get("Location"), "X-Auth-Request-User", "mallory", "X-Not-Copied", "")
	if resp.StatusCode != http.StatusOK || body != "protected content for user=alice email=alice@example.com notcopied=\n" {
		t.Fatalf("signed in: %d %q", resp.StatusCode, body)
	}
	if !strings.Contains(auth.last().Header.Get("Cookie"), "_oauth2_proxy=signed-in:alice") {
		t.Fatal("the cookie was not sent to the auth service")
	}
	// Only the chosen client headers go to the auth service.
	get(t, c, front+"/", "Authorization", "Bearer t", "X-Secret", "s")
	if h := auth.last().Header; h.Get("Authorization") != "Bearer t" || h.Get("X-Secret") != "" {
		t.Fatalf("sub-request headers %v", h)
	}
	if fa.C.Redirected.Load() != 1 || fa.C.Allowed.Load() != 2 {
		t.Fatalf("counters: redirected %d, allowed %d", fa.C.Redirected.Load(), fa.C.Allowed.Load())
	}
}

// Refusals reach the client with their status, challenge, cookies and body;
// failures are a 5xx that says the auth service failed, never the content.
func TestRefusalsAndFailures(t *testing.T) {
	auth := newAuthServer(t)
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + closed.Addr().String() + "/auth"
	closed.Close()
	for _, tc := range []struct {
		name, url  string
		status     int
		body       string
		header     string
		value      string
		notForward string
	}{
		{"401", auth.URL + "/deny", 401, "sign in first\n", "Www-Authenticate", `Bearer realm="api"`, "X-Internal"},
		{"403", auth.URL + "/forbid", 403, "not yours\n", "Content-Type", "text/plain; charset=utf-8", ""},
		{"500", auth.URL + "/broken", 502, `502 Bad Gateway: route "app": the auth service answered 500, which is neither a permission (2xx) nor a refusal (401, 403, 3xx); the request was not passed on.` + "\n", "", "", ""},
		{"timeout", auth.URL + "/slow", 504, `504 Gateway Timeout: route "app": the auth service did not answer within 300ms; the request was not passed on.` + "\n", "", "", ""},
		{"unreachable", dead, 502, `502 Bad Gateway: route "app": the auth service could not be reached; the request was not passed on.` + "\n", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, front := site(t, config.ForwardAuth{URL: tc.url, Timeout: config.Duration(300 * time.Millisecond)})
			resp, body := get(t, client(t, "127.0.0.8", nil), front+"/x")
			if resp.StatusCode != tc.status || body != tc.body {
				t.Fatalf("got %d %q, want %d %q", resp.StatusCode, body, tc.status, tc.body)
			}
			if tc.header != "" && resp.Header.Get(tc.header) != tc.value {
				t.Errorf("%s: %q, want %q", tc.header, resp.Header.Get(tc.header), tc.value)
			}
			if tc.notForward != "" && resp.Header.Get(tc.notForward) != "" {
				t.Errorf("%s reached the client", tc.notForward)
			}
			if tc.status == 401 && resp.Header.Get("Set-Cookie") != "tries=1" {
				t.Errorf("Set-Cookie %q", resp.Header.Get("Set-Cookie"))
			}
		})
	}
}

// statuses: nginx reads the answer as nginx's auth_request: 2xx allows,
// 401 and 403 go back, anything else (a redirect, another status, a
// timeout, a failed connection) is 500. request_headers: ["*"] sends
// every client header but those of the connection and framing.
func TestNginxStatusesAndEveryHeader(t *testing.T) {
	auth := newAuthServer(t)
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + closed.Addr().String() + "/auth"
	closed.Close()
	for _, tc := range []struct {
		url    string
		status int
	}{
		{auth.URL + "/deny", 401},
		{auth.URL + "/forbid", 403},
		{auth.URL + "/oauth2/auth", 500}, // its 302 to sign in
		{auth.URL + "/broken", 500},
		{auth.URL + "/slow", 500},
		{dead, 500},
	} {
		_, front := site(t, config.ForwardAuth{URL: tc.url, Timeout: config.Duration(300 * time.Millisecond), Statuses: config.ForwardAuthStatusesNginx})
		resp, body := get(t, client(t, "127.0.0.8", nil), front+"/x")
		if resp.StatusCode != tc.status || strings.Contains(body, "protected") {
			t.Errorf("%s: %d %q, want %d", tc.url, resp.StatusCode, body, tc.status)
		}
		if tc.status == 500 && !strings.Contains(body, "nginx's auth_request reads as an error") {
			t.Errorf("%s: body %q does not say why", tc.url, body)
		}
		if tc.status == 401 && (body != "401 Unauthorized\n" || resp.Header.Get("Www-Authenticate") != `Bearer realm="api"` || resp.Header.Get("Set-Cookie") != "") {
			t.Errorf("401: %q, challenge %q, cookie %q; want sturdy's page and only the challenge, as nginx", body, resp.Header.Get("Www-Authenticate"), resp.Header.Get("Set-Cookie"))
		}
	}
	_, front := site(t, config.ForwardAuth{URL: auth.URL + "/oauth2/auth", Timeout: config.Duration(5 * time.Second), RequestHeaders: []string{"*"}, Statuses: config.ForwardAuthStatusesNginx})
	get(t, client(t, "127.0.0.8", nil), front+"/x", "X-Token", "good", "Cookie", "_oauth2_proxy=signed-in:bob", "Connection", "X-Token")
	h := auth.last().Header
	if h.Get("X-Token") != "good" || h.Get("Cookie") != "_oauth2_proxy=signed-in:bob" || h.Get("Connection") != "" {
		t.Errorf("with request_headers [*], the sub-request's headers are %v", h)
	}
	for hh, want := range map[string]string{"": strings.TrimPrefix(auth.URL, "http://"), "$host": "site.example", "$http_host": "Site.Example:8443", "auth.internal": "auth.internal"} {
		_, front := site(t, config.ForwardAuth{URL: auth.URL + "/oauth2/auth", Timeout: config.Duration(5 * time.Second), HostHeader: hh})
		req, _ := http.NewRequest("GET", front+"/x", nil)
		req.Host = "Site.Example:8443"
		resp, err := client(t, "127.0.0.8", nil).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := auth.last().Host; got != want {
			t.Errorf("host_header %q: the auth service got Host %q, want %q", hh, got, want)
		}
	}
}

// A client that gives up is not reported as a failure of the auth service.
func TestClientCancelIsNotAnAuthFailure(t *testing.T) {
	auth := newAuthServer(t)
	fa, err := Compile("p", "app", &config.ForwardAuth{URL: auth.URL + "/slow", Timeout: config.Duration(5 * time.Second)}, &http.Transport{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r, _ := http.NewRequestWithContext(ctx, "GET", "http://site/x", nil)
	time.AfterFunc(50*time.Millisecond, cancel)
	if v := fa.Check(r, Origin{}); v.OK || v.Status != 499 || fa.C.Failed.Load() != 0 || fa.C.Timeouts.Load() != 0 {
		t.Fatalf("verdict %d, failed %d, timeouts %d", v.Status, fa.C.Failed.Load(), fa.C.Timeouts.Load())
	}
}

func TestCompileErrors(t *testing.T) {
	if _, err := Compile("routes[1].forward_auth", "a", &config.ForwardAuth{URL: "ftp://x/"}, &http.Transport{}, nil); err == nil || !strings.HasPrefix(err.Error(), "routes[1].forward_auth.url: ") {
		t.Errorf("error %v", err)
	}
	if a, err := Compile("p", "a", nil, nil, nil); a != nil || err != nil {
		t.Error("no forward_auth: nil")
	}
}
