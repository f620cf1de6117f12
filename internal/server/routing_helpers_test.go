package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
)

// seen is what a recording backend received.
type seen struct {
	Method, RequestURI, Path, RawQuery, Host string
	Header                                   http.Header
	Body                                     string
}

// recorder is a backend that records every request and answers with its
// name (in the body and X-Backend). A request with X-Answer-Status gets
// that status.
type recorder struct {
	name string
	srv  *httptest.Server

	mu   sync.Mutex
	reqs []seen
	hold chan struct{} // when set, requests wait on it before answering
}

func recordingBackend(t testing.TB, ip, name string) *recorder {
	t.Helper()
	rec := &recorder{name: name}
	rec.srv = backend(t, ip, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, seen{
			Method: r.Method, RequestURI: r.RequestURI, Path: r.URL.Path, RawQuery: r.URL.RawQuery,
			Host: r.Host, Header: r.Header.Clone(), Body: string(body),
		})
		hold := rec.hold
		rec.mu.Unlock()
		if hold != nil {
			<-hold
		}
		w.Header().Set("X-Backend", name)
		w.Header().Set("Server", "backend/1.0")
		w.Header().Set("X-Powered-By", "php")
		if s := r.Header.Get("X-Answer-Status"); s != "" {
			code, _ := strconv.Atoi(s)
			w.WriteHeader(code)
			io.WriteString(w, s+" from "+name)
			return
		}
		io.WriteString(w, name)
	}))
	return rec
}

func (r *recorder) addr() string { return addr(r.srv) }

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

// last is the last request the backend received.
func (r *recorder) last(t testing.TB) seen {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reqs) == 0 {
		t.Fatalf("backend %s received nothing", r.name)
	}
	return r.reqs[len(r.reqs)-1]
}

// noFollow is a client that shows redirects instead of following them.
func noFollow() *http.Client {
	c := clientFrom("127.0.0.1")
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// do sends method to url with headers (name, value pairs; "Host" sets
// the Host) and returns the response and its body.
func do(t testing.TB, c *http.Client, method, url string, body io.Reader, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}
