// Package demo runs the small backends and the embedded config behind
// `sturdy demo`, so that a first run needs nothing installed.
package demo

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Config is the embedded demo config.
//
//go:embed demo.yaml
var Config []byte

// BackendAddrs are the addresses the embedded config expects backends on.
var BackendAddrs = []string{"127.0.0.1:9101", "127.0.0.1:9102", "127.0.0.1:9103"}

// Backends are running demo backends.
type Backends struct {
	servers []*http.Server
	wg      sync.WaitGroup
}

// Start listens on each address with a demo backend named b1, b2, ... It
// fails, with nothing left running, when an address is taken.
func Start(addrs []string) (*Backends, error) {
	b := &Backends{}
	for i, addr := range addrs {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("demo backend %d: cannot listen on %s: %w", i+1, addr, err)
		}
		srv := &http.Server{Handler: Handler("b" + strconv.Itoa(i+1)), ReadHeaderTimeout: 5 * time.Second}
		b.servers = append(b.servers, srv)
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				_ = err // the listener was closed under us; Close reports nothing more
			}
		}()
	}
	return b, nil
}

// Close stops every backend and waits for them.
func (b *Backends) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, s := range b.servers {
		if s.Shutdown(ctx) != nil {
			s.Close()
		}
	}
	b.wg.Wait()
}

// Handler is one demo backend:
//
//	/            who answered, and what they saw
//	/cached/...  the same, cacheable for 10s (stale-if-error for a minute)
//	/slow?ms=N   answers after N milliseconds (at most 60000)
//	/status/N    answers with status N
//	/stream      five server-sent events, one every 200ms
func Handler(name string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Backend", name)
		fmt.Fprintf(w, "hello from demo backend %s\nhost: %s\npath: %s\nx-forwarded-for: %s\n",
			name, r.Host, r.URL.RequestURI(), r.Header.Get("X-Forwarded-For"))
	})
	mux.HandleFunc("/cached/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "max-age=10, stale-if-error=60")
		fmt.Fprintf(w, "cacheable answer from demo backend %s at %s\n", name, time.Now().UTC().Format(time.TimeOnly))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
		ms = min(max(ms, 0), 60000)
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		fmt.Fprintf(w, "backend %s answered after %dms\n", name, ms)
	})
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		code, err := strconv.Atoi(r.PathValue("code"))
		if err != nil || code < 200 || code > 599 {
			http.Error(w, "status must be 200-599", http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Backend", name)
		w.WriteHeader(code)
		fmt.Fprintf(w, "backend %s answered %d as asked\n", name, code)
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := 1; i <= 5; i++ {
			fmt.Fprintf(w, "data: event %d from %s\n\n", i, name)
			if rc.Flush() != nil {
				return
			}
			select {
			case <-time.After(200 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
	})
	return mux
}
