package resolve

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

func TestUnixTargetsRoundTripAndDial(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "over the socket") })}
	go srv.Serve(ln)
	defer srv.Close()
	target := Target("unix:" + path)
	if _, _, err := net.SplitHostPort(target); err != nil {
		t.Fatalf("target %q is not host:port: %v", target, err)
	}
	if got, ok := unixPath(target); !ok || got != path {
		t.Fatalf("unixPath(%q) = %q, %v", target, got, ok)
	}
	if Target("10.0.0.1:80") != "10.0.0.1:80" || IsUnix("10.0.0.1:80") {
		t.Fatal("a TCP address must be its own target")
	}
	r := New(Options{Refresh: time.Hour, Timeout: time.Second})
	c := &http.Client{Transport: &http.Transport{DialContext: r.DialContext(&net.Dialer{})}}
	resp, err := c.Get("http://" + target + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "over the socket" {
		t.Fatalf("%q", b)
	}
	if n := keys([]string{"unix:" + path, "app.internal:80"}, nil); len(n) != 1 || n[0].name != "app.internal" {
		t.Fatalf("a unix socket was taken for a DNS name: %v", n)
	}
}
