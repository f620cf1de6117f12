// Package demo is what `sturdy demo` runs besides sturdy itself: three
// small backends, the embedded config in front of them, simulated visitors
// that keep the status page alive, and the controls a newcomer uses to
// break things and watch sturdy cope: make a backend slow, resetting,
// blackholed or answering 503, start a scanner that a WAF in front of every
// backend refuses, send malformed URLs. The controls are an HTTP handler the
// admin listener serves under /api/demo (reads open, changes need the
// admin token), so the status page's buttons and the printed curl lines
// use the same runtime API.
package demo

import (
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sturdyproxy/sturdy/internal/config"
)

// Config is the embedded demo config.
//
//go:embed demo.yaml
var Config []byte

// BackendAddrs are the addresses the embedded config expects backends on.
var BackendAddrs = []string{"127.0.0.1:9101", "127.0.0.1:9102", "127.0.0.1:9103"}

// Addrs are where the demo listens. The zero value of a field means the
// embedded config's address.
type Addrs struct {
	Listen   string   // sturdy's listener
	Admin    string   // the admin listener
	Backends []string // the three backends, in order
}

// Configure parses the embedded config with a, and token as the admin
// token. Pools refer to backends by position, so a backend moved with
// a.Backends moves in every pool.
func Configure(a Addrs, token string) (*config.Config, error) {
	cfg, err := config.Parse(Config, "(embedded demo config)")
	if err != nil {
		return nil, err
	}
	if a.Listen != "" {
		cfg.Listeners[0].Listen = a.Listen
	}
	if a.Admin != "" {
		cfg.Admin.Listen = a.Admin
	}
	cfg.Admin.Token = token
	if len(a.Backends) > 0 {
		if len(a.Backends) != len(BackendAddrs) {
			return nil, fmt.Errorf("the demo runs %d backends; got %d addresses", len(BackendAddrs), len(a.Backends))
		}
		moved := map[string]string{}
		for i, addr := range BackendAddrs {
			moved[addr] = a.Backends[i]
		}
		for p := range cfg.Pools {
			for h := range cfg.Pools[p].Hosts {
				if to, ok := moved[cfg.Pools[p].Hosts[h].Addr]; ok {
					cfg.Pools[p].Hosts[h].Addr = to
				}
			}
		}
	}
	return cfg, nil
}

// NewToken returns a fresh random admin token (32 hex characters).
func NewToken() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Handler is one demo backend when it behaves:
//
//	/            who answered, and what they saw
//	/healthz     ok (sturdy's active check)
//	/cached/...  the same, cacheable for 10s (stale-if-error for 5 minutes)
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
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "ok from %s\n", name)
	})
	mux.HandleFunc("/cached/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "max-age=10, stale-if-error=300")
		w.Header().Set("X-Backend", name)
		fmt.Fprintf(w, "cacheable answer from demo backend %s at %s\n", name, time.Now().UTC().Format(time.TimeOnly))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
		ms = min(max(ms, 0), 60000)
		t := time.NewTimer(time.Duration(ms) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
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
			t := time.NewTimer(200 * time.Millisecond)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
	})
	return mux
}
