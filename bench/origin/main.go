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
	// /gz/text64k is 64 KiB of JSON-like text for the compression cells:
	// compressible as real API answers are, not a run of one byte.
	text := jsonText(64 << 10)
	mux.HandleFunc("/gz/text64k", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["Content-Type"] = []string{"application/json"}
		h["Content-Length"] = []string{strconv.Itoa(len(text))}
		w.Write(text)
	})
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
		http.Error(w, "only /1k, /64k and /gz/text64k", http.StatusNotFound)
	})

	srv := &http.Server{Addr: *addr, Handler: mux}
	log.Fatal(srv.ListenAndServe())
}

// jsonText is n bytes of records that vary from line to line.
func jsonText(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, `{"id":%d,"user":"user%d","score":%d,"tags":["a%d","b%d"],"ok":%t}`+"\n", i, i*7%1000, i*31%977, i%13, i%29, i%3 == 0)
	}
	return b.Bytes()[:n]
}
