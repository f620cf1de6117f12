package admin

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/view"
)

const token = "0123456789abcdef0123"

func serve(t *testing.T, b Backend, o Options) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(New(b, o))
	t.Cleanup(srv.Close)
	return srv
}

type answer struct {
	code   int
	header http.Header
	body   string
}

func do(t *testing.T, method, url string, header map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	// No redirects: the tests look at them.
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(body)}
}

func TestLivez(t *testing.T) {
	srv := serve(t, &fakeBackend{}, Options{})
	a := do(t, "GET", srv.URL+"/livez", nil)
	if a.code != 200 || a.body != "ok\n" || a.header.Get("Cache-Control") != "no-store" {
		t.Errorf("%+v", a)
	}
}

// Test 5 of the issue at this level: /readyz is 503 with the reasons when
// the server says it is not ready, and while it drains.
func TestReadyz(t *testing.T) {
	b := &fakeBackend{}
	srv := serve(t, b, Options{})
	if a := do(t, "GET", srv.URL+"/readyz", nil); a.code != 200 || a.body != "ready\n" || a.header.Get("Cache-Control") != "no-store" {
		t.Errorf("ready: %+v", a)
	}

	b.notReady = []string{"route site: pool web is empty and has no fallback; only the sorry page answers"}
	a := do(t, "GET", srv.URL+"/readyz", nil)
	if a.code != 503 || a.body != "not ready:\n- route site: pool web is empty and has no fallback; only the sorry page answers\n" {
		t.Errorf("not ready: %d %q", a.code, a.body)
	}
	a = do(t, "GET", srv.URL+"/readyz", map[string]string{"Accept": "application/json"})
	var j struct {
		Ready   bool
		Reasons []string
	}
	if err := json.Unmarshal([]byte(a.body), &j); err != nil || a.code != 503 || j.Ready || len(j.Reasons) != 1 {
		t.Errorf("json: %d %s %v", a.code, a.body, err)
	}

	b.notReady, b.draining = nil, true
	if a := do(t, "GET", srv.URL+"/readyz", nil); a.code != 503 || !strings.Contains(a.body, "shutting down") {
		t.Errorf("draining: %d %q", a.code, a.body)
	}
	if a := do(t, "HEAD", srv.URL+"/readyz", nil); a.code != 503 {
		t.Errorf("HEAD while draining: %d", a.code)
	}
}

// Test 4 of the issue at this level: the runtime API needs the token and
// refuses cross-origin browser requests.
func TestRuntimeAPINeedsToken(t *testing.T) {
	drain := "/api/hosts/web/" + deadHost + "/drain"
	t.Run("no token configured", func(t *testing.T) {
		b := &fakeBackend{}
		srv := serve(t, b, Options{})
		a := do(t, "POST", srv.URL+drain, map[string]string{"Authorization": "Bearer " + token})
		if a.code != 403 || !strings.Contains(a.body, "set admin.token") || len(b.modes) != 0 {
			t.Errorf("%d %s %v", a.code, a.body, b.modes)
		}
	})
	b := &fakeBackend{}
	srv := serve(t, b, Options{Token: token})
	for _, tc := range []struct {
		name string
		auth string
		code int
	}{
		{"missing", "", 401},
		{"wrong", "Bearer 0123456789abcdef0124", 401},
		{"prefix of the token", "Bearer 0123456789", 401},
		{"basic scheme", "Basic " + token, 401},
		{"right", "Bearer " + token, 200},
		{"right, scheme in lower case", "bearer " + token, 200},
	} {
		a := do(t, "POST", srv.URL+drain, map[string]string{"Authorization": tc.auth})
		if a.code != tc.code {
			t.Errorf("%s: %d %s", tc.name, a.code, a.body)
		}
		if tc.code == 401 && a.header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: no WWW-Authenticate", tc.name)
		}
	}
	if len(b.modes) != 2 || b.modes[0] != "web/"+deadHost+"=drain" {
		t.Errorf("backend calls %v", b.modes)
	}
	// Only POST changes state.
	if a := do(t, "GET", srv.URL+drain, map[string]string{"Authorization": "Bearer " + token}); a.code != 405 {
		t.Errorf("GET: %d", a.code)
	}
}

func TestRuntimeAPIRefusesCrossOrigin(t *testing.T) {
	b := &fakeBackend{}
	srv := serve(t, b, Options{Token: token})
	auth := "Bearer " + token
	for _, tc := range []struct {
		name   string
		header map[string]string
		code   int
	}{
		{"cross-site fetch", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"same-site (another subdomain)", map[string]string{"Sec-Fetch-Site": "same-site"}, 403},
		{"foreign Origin, old browser", map[string]string{"Origin": "https://evil.example"}, 403},
		{"same-origin page", map[string]string{"Sec-Fetch-Site": "same-origin"}, 200},
		{"typed by the user", map[string]string{"Sec-Fetch-Site": "none"}, 200},
		{"curl", nil, 200},
	} {
		h := map[string]string{"Authorization": auth}
		for k, v := range tc.header {
			h[k] = v
		}
		a := do(t, "POST", srv.URL+"/api/reload", h)
		if a.code != tc.code {
			t.Errorf("%s: %d %s", tc.name, a.code, a.body)
		}
		if tc.code == 403 && !strings.Contains(a.body, "cross-origin") {
			t.Errorf("%s: body %s", tc.name, a.body)
		}
	}
}

func TestSetHostModeErrors(t *testing.T) {
	b := &fakeBackend{}
	srv := serve(t, b, Options{Token: token})
	auth := map[string]string{"Authorization": "Bearer " + token}
	for _, tc := range []struct {
		path, want string
		code       int
	}{
		{"/api/hosts/nope/" + deadHost + "/drain", `no pool \"nope\"; pools are web, api`, 404},
		{"/api/hosts/web/10.9.9.9:80/drain", `pool \"web\" has no host \"10.9.9.9:80\"; it has 10.0.0.11:8080, 10.0.0.12:8080, 10.0.0.13:8080`, 404},
		{"/api/hosts/web/" + deadHost + "/reboot", `unknown mode \"reboot\"`, 404},
		{"/api/hosts/web/" + deadHost + "/maintenance", `"mode": "maintenance"`, 200},
		{"/api/hosts/web/" + deadHost + "/ready", `"ok": true`, 200},
	} {
		a := do(t, "POST", srv.URL+tc.path, auth)
		if a.code != tc.code || !strings.Contains(a.body, tc.want) {
			t.Errorf("%s: %d %s; want %d %s", tc.path, a.code, a.body, tc.code, tc.want)
		}
	}
	b.modeErr = errors.New("host is already draining")
	if a := do(t, "POST", srv.URL+"/api/hosts/web/"+deadHost+"/drain", auth); a.code != 409 || !strings.Contains(a.body, "already draining") {
		t.Errorf("conflict: %d %s", a.code, a.body)
	}
	b.modeErr = errors.Join(ErrUnknownHost, errors.New("removed by a reload"))
	if a := do(t, "POST", srv.URL+"/api/hosts/web/"+deadHost+"/drain", auth); a.code != 404 {
		t.Errorf("unknown from backend: %d %s", a.code, a.body)
	}
}

func TestReload(t *testing.T) {
	b := &fakeBackend{}
	srv := serve(t, b, Options{Token: token})
	auth := map[string]string{"Authorization": "Bearer " + token}
	if a := do(t, "POST", srv.URL+"/api/reload", auth); a.code != 200 || !strings.Contains(a.body, `"config_hash": "5d41402abc4b2a76"`) {
		t.Errorf("ok: %d %s", a.code, a.body)
	}
	b.reloadErr = config.ErrorList{
		{File: "sturdy.yaml", Line: 4, Path: "routes[0].pool", Msg: `no pool named "nope"; define it under pools`},
		{File: "sturdy.yaml", Line: 9, Path: "webhooks[0].url", Msg: "missing"},
	}
	a := do(t, "POST", srv.URL+"/api/reload", auth)
	var body errorBody
	json.Unmarshal([]byte(a.body), &body)
	if a.code != 422 || len(body.Errors) != 2 || body.Errors[0] != `sturdy.yaml:4: routes[0].pool: no pool named "nope"; define it under pools` ||
		!strings.Contains(body.Error, "unchanged") {
		t.Errorf("invalid: %d %s", a.code, a.body)
	}
	b.reloadErr = errors.New("listener web: cannot listen on 127.0.0.1:80: permission denied")
	if a := do(t, "POST", srv.URL+"/api/reload", auth); a.code != 409 || !strings.Contains(a.body, "permission denied") {
		t.Errorf("apply failure: %d %s", a.code, a.body)
	}
}

// A loopback admin only answers requests that name it by IP or localhost
// (DNS rebinding).
func TestLoopbackHost(t *testing.T) {
	srv := serve(t, &fakeBackend{}, Options{Loopback: true})
	for host, code := range map[string]int{"evil.example:80": 421, "127.0.0.1:9901": 200, "localhost:9901": 200, "[::1]:9901": 200, "LOCALHOST": 200} {
		if a := do(t, "GET", srv.URL+"/api/status", map[string]string{"Host": host}); a.code != code {
			t.Errorf("Host %s: %d", host, a.code)
		}
	}
}

func TestReadEndpoints(t *testing.T) {
	srv := serve(t, &fakeBackend{}, Options{})
	a := do(t, "GET", srv.URL+"/metrics", nil)
	for _, want := range []string{
		`sturdy_host_state{host="10.0.0.12:8080",pool="web",state="healthy"} 1`,
		`sturdy_requests_total{code_class="2xx",route="site"}`,
		"go_goroutines", "sturdy_up 1",
	} {
		if a.code != 200 || !strings.Contains(a.body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	a = do(t, "GET", srv.URL+"/api/status", nil)
	var st view.Status
	if err := json.Unmarshal([]byte(a.body), &st); err != nil || a.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("/api/status: %v %v", err, a.header)
	}
	if st.Pools[0].Hosts[1].State != view.Ejected || st.Clients[0].Key != client {
		t.Errorf("/api/status: %+v", st.Pools[0].Hosts[1])
	}
	if a := do(t, "GET", srv.URL+"/api/status?pretty", nil); !strings.Contains(a.body, "\n  \"time\"") {
		t.Errorf("pretty: %.80s", a.body)
	}

	a = do(t, "GET", srv.URL+"/status", nil)
	if a.code != 200 || !strings.Contains(a.body, `<script src="status/app.js" defer>`) ||
		!strings.Contains(a.header.Get("Content-Security-Policy"), "frame-ancestors 'none'") || a.header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("/status: %d %v", a.code, a.header)
	}
	for path, ctype := range map[string]string{"/status/app.js": "text/javascript; charset=utf-8", "/status/app.css": "text/css; charset=utf-8", "/status/favicon.svg": "image/svg+xml"} {
		a := do(t, "GET", srv.URL+path, nil)
		if a.code != 200 || a.header.Get("Content-Type") != ctype || a.header.Get("ETag") == "" {
			t.Errorf("%s: %d %v", path, a.code, a.header)
		}
		// Revalidation with the ETag is a 304.
		if b := do(t, "GET", srv.URL+path, map[string]string{"If-None-Match": a.header.Get("ETag")}); b.code != 304 {
			t.Errorf("%s revalidated: %d", path, b.code)
		}
	}
	if a := do(t, "GET", srv.URL+"/status/nope.js", nil); a.code != 404 {
		t.Errorf("unknown asset: %d", a.code)
	}
	if a := do(t, "GET", srv.URL+"/", nil); a.code != 302 || a.header.Get("Location") != "status" {
		t.Errorf("/: %d %v", a.code, a.header)
	}
	if a := do(t, "GET", srv.URL+"/status/", nil); a.code != 301 || a.header.Get("Location") != "../status" {
		t.Errorf("/status/: %d %v", a.code, a.header)
	}
}

// Profiles reveal internals and cost CPU: they take the token.
func TestProfilesNeedToken(t *testing.T) {
	srv := serve(t, &fakeBackend{}, Options{Token: token})
	auth := map[string]string{"Authorization": "Bearer " + token}
	if a := do(t, "GET", srv.URL+"/debug/pprof/", nil); a.code != 401 {
		t.Errorf("without the token: %d, want 401", a.code)
	}
	if a := do(t, "GET", srv.URL+"/debug/pprof/goroutine?debug=1", nil); a.code != 401 {
		t.Errorf("a named profile without the token: %d, want 401", a.code)
	}
	if a := do(t, "GET", srv.URL+"/debug/pprof/", auth); a.code != 200 || !strings.Contains(a.body, "goroutine") {
		t.Errorf("index with the token: %d %q", a.code, a.body)
	}
	if a := do(t, "GET", srv.URL+"/debug/pprof/goroutine?debug=1", auth); a.code != 200 || !strings.Contains(a.body, "goroutine profile:") {
		t.Errorf("goroutine profile with the token: %d %.80q", a.code, a.body)
	}
	off := serve(t, &fakeBackend{}, Options{})
	if a := do(t, "GET", off.URL+"/debug/pprof/", auth); a.code != 403 {
		t.Errorf("no token configured: %d, want 403", a.code)
	}
}
