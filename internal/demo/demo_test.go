package demo

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/ops/lint"
)

// The embedded config is valid and draws no warnings: it is the first thing
// a new user reads.
func TestEmbeddedConfigIsClean(t *testing.T) {
	c, err := config.Parse(Config, "demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if w := lint.Check(c); len(w) != 0 {
		t.Fatalf("warnings: %v", w)
	}
	for _, p := range c.Pools {
		for i, h := range p.Hosts {
			if !strings.HasPrefix(h.Addr, "127.0.0.1:91") || i >= len(BackendAddrs) {
				t.Fatalf("pool %s host %s is not a demo backend", p.Name, h.Addr)
			}
		}
	}
}

// Configure moves every listener and backend, in every pool, and sets the
// token; the result is still clean.
func TestConfigureMovesEverything(t *testing.T) {
	a := Addrs{Listen: "127.0.0.1:18080", Admin: "127.0.0.1:19901", Backends: []string{"127.0.0.1:19101", "127.0.0.1:19102", "127.0.0.1:19103"}}
	c, err := Configure(a, "0123456789abcdef0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	if c.Listeners[0].Listen != a.Listen || c.Admin.Listen != a.Admin || c.Admin.Token != "0123456789abcdef0123456789abcdef" {
		t.Errorf("listen %s admin %s token %q", c.Listeners[0].Listen, c.Admin.Listen, c.Admin.Token)
	}
	for _, p := range c.Pools {
		for i, h := range p.Hosts {
			if h.Addr != a.Backends[i] {
				t.Errorf("pool %s host %d: %s", p.Name, i, h.Addr)
			}
		}
	}
	if w := lint.Check(c); len(w) != 0 {
		t.Errorf("warnings: %v", w)
	}
	if _, err := Configure(Addrs{Backends: []string{"127.0.0.1:1"}}, ""); err == nil {
		t.Error("one backend address for three backends was accepted")
	}
	if a, b := NewToken(), NewToken(); a == b || len(a) != 32 {
		t.Error("tokens are not fresh 32-character values")
	}
}

func TestBackendAnswers(t *testing.T) {
	h := Handler("b1")
	for path, want := range map[string]string{"/x": "hello from demo backend b1", "/healthz": "ok from b1", "/cached/a": "cacheable answer", "/status/418": "answered 418"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "http://demo"+path, nil))
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("%s: %q", path, rec.Body.String())
		}
	}
}

// startLab runs a lab with backends on free loopback ports and no
// visitors; it stops when the test ends.
func startLab(t *testing.T) *Lab {
	t.Helper()
	l, err := New(Options{Listen: "127.0.0.1:1", Backends: []string{"127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"}, Visitors: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { l.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return l
}

func fetch(addr, path string, hdr http.Header, timeout time.Duration) (*http.Response, string, error) {
	req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
	for k, v := range hdr {
		req.Header[k] = v
	}
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b), nil
}

func post(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", path, nil))
	return rec.Code, rec.Body.String()
}

// Each mode does what the page says it does, on a real socket; the WAF in
// front refuses the scanner whatever the mode; heal brings every backend
// back.
func TestBackendModes(t *testing.T) {
	l := startLab(t)
	h := l.Handler()
	addr := l.BackendAddrs()[1]

	for _, tc := range []struct {
		mode  string
		check func(*http.Response, string, error) bool
		want  string
	}{
		{Mode503, func(r *http.Response, _ string, err error) bool { return err == nil && r.StatusCode == 503 }, "a 503"},
		{ModeReset, func(_ *http.Response, _ string, err error) bool { return isReset(err) }, "a reset connection"},
		{ModeBlackhole, func(_ *http.Response, _ string, err error) bool { return isTimeout(err) }, "no answer before the client's timeout"},
		{ModeSlow, func(_ *http.Response, _ string, err error) bool { return isTimeout(err) }, "no answer within 500ms"},
		{ModeOK, func(r *http.Response, body string, err error) bool {
			return err == nil && r.StatusCode == 200 && body == "ok from b2\n"
		}, "a normal answer"},
	} {
		if code, body := post(t, h, prefix+"backends/b2/"+tc.mode); code != 200 {
			t.Fatalf("set %s: %d %s", tc.mode, code, body)
		}
		resp, body, err := fetch(addr, "/healthz", nil, 500*time.Millisecond)
		if !tc.check(resp, body, err) {
			t.Errorf("mode %s: got %v %q %v, want %s", tc.mode, status(resp), body, err, tc.want)
		}
	}
	post(t, h, prefix+"backends/b2/503")
	resp, body, err := fetch(addr, "/", http.Header{"X-Forwarded-For": {ScannerAddr + ", 127.0.0.1"}}, time.Second)
	if err != nil || resp.StatusCode != 502 || !strings.Contains(body, "blocked by the WAF in front of b2") {
		t.Errorf("scanner through the WAF: %v %q %v", status(resp), body, err)
	}
	if code, _ := post(t, h, prefix+"heal"); code != 200 {
		t.Fatalf("heal: %d", code)
	}
	var st State
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", StatePath, nil))
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	for _, b := range st.Backends {
		if b.Mode != ModeOK {
			t.Errorf("after heal, %s is %s", b.Name, b.Mode)
		}
	}
	if st.Backends[1].WAFRefused != 1 || len(st.Commands) == 0 {
		t.Errorf("state: %+v", st)
	}
}

// The controls say what exists when asked for what does not.
func TestControlErrors(t *testing.T) {
	l := startLab(t)
	h := l.Handler()
	for path, want := range map[string]string{
		prefix + "backends/b2/melt": "modes are ok, slow, 503, reset, blackhole",
		prefix + "backends/b9/503":  "backends are b1 to b3",
		prefix + "scanner/explode":  "start or stop",
	} {
		if code, body := post(t, h, path); code != 404 || !strings.Contains(body, want) {
			t.Errorf("%s: %d %s", path, code, body)
		}
	}
	if code, body := post(t, h, prefix+"visitors/start"); code != 409 {
		t.Errorf("visitors without visitors: %d %s", code, body)
	}
}

func status(r *http.Response) any {
	if r == nil {
		return nil
	}
	return r.StatusCode
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isReset tells a connection closed without an answer from one that
// timed out.
func isReset(err error) bool { return err != nil && !isTimeout(err) }
