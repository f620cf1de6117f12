package cli

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestHealthcheck(t *testing.T) {
	var ready atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		if ready.Load() {
			w.Write([]byte("ready\n"))
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("not ready:\n- route site: only the sorry page is left\n"))
	}))
	defer srv.Close()

	ready.Store(true)
	if code, out, errs := run("healthcheck", "-url", srv.URL+"/readyz"); code != 0 || out != "ready\n" || errs != "" {
		t.Errorf("ready: exit %d, %q, %q", code, out, errs)
	}
	if code, out, _ := run("healthcheck", "-q", "-url", srv.URL+"/readyz"); code != 0 || out != "" {
		t.Errorf("ready -q: exit %d, %q", code, out)
	}
	ready.Store(false)
	if code, _, errs := run("healthcheck", "-url", srv.URL+"/readyz"); code != 1 || !strings.Contains(errs, "only the sorry page is left") {
		t.Errorf("not ready: exit %d, %q", code, errs)
	}
	if code, _, errs := run("healthcheck", "-url", srv.URL+"/nope"); code != 1 || !strings.Contains(errs, "404") {
		t.Errorf("wrong path: exit %d, %q", code, errs)
	}
}

func TestHealthcheckUnreachableAndSlow(t *testing.T) {
	// A port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if code, _, errs := run("healthcheck", "-url", "http://"+addr+"/readyz"); code != 1 || !strings.Contains(errs, "not ready") {
		t.Errorf("refused: exit %d, %q", code, errs)
	}
	// A listener that never answers: the timeout ends it. The handler
	// holds until the test ends, so only the timeout can end the wait,
	// and the error says it did.
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hang }))
	defer srv.Close()
	defer close(hang)
	if code, _, errs := run("healthcheck", "-timeout", "100ms", "-url", srv.URL+"/readyz"); code != 1 || !strings.Contains(errs, "deadline") {
		t.Errorf("hung: exit %d, %q", code, errs)
	}
	if code, _, _ := run("healthcheck", "-url", "::bad"); code != 2 {
		t.Errorf("bad url: exit %d", code)
	}
	if code, _, _ := run("healthcheck", "extra"); code != 2 {
		t.Errorf("extra argument: exit %d", code)
	}
}
