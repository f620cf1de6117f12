// Command origin is the fixed upstream of the benchmark: a plain net/http
// server on loopback that answers GET /1k and GET /64k with fixed bodies over
// keep-alive connections, and /healthz for active checks. It is the same for
// every proxy under test, so the difference between "direct" and a proxy is
// the proxy's cost.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"net/http"
	"strconv"
	"sync/atomic"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:18080", "address to listen on (loopback only)")
	flag.Parse()

	mux := http.NewServeMux()
	for path, size := range map[string]int{"/1k": 1 << 10, "/64k": 64 << 10} {
		body := bytes.Repeat([]byte("x"), size)
		length := strconv.Itoa(size)
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			// Set both explicitly: no sniffing, no chunking.
			h["Content-Type"] = []string{"application/octet-stream"}
			h["Content-Length"] = []string{length}
			w.Write(body)
		})
	}
	// /healthz answers active checks; /checks tells how many arrived, so that
	// bench/run.sh can show that sturdy's active checks really ran.
	var checks atomic.Int64
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		checks.Add(1)
		w.Header()["Content-Type"] = []string{"text/plain"}
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/checks", func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = []string{"text/plain"}
		fmt.Fprintln(w, checks.Load())
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "only /1k and /64k", http.StatusNotFound)
	})

	srv := &http.Server{Addr: *addr, Handler: mux}
	log.Fatal(srv.ListenAndServe())
}
