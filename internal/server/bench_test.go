package server

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// BenchmarkEndToEnd1KiB is a 1 KiB keep-alive GET from a client through
// sturdy to a backend, all on loopback sockets in this process (so
// allocs/op counts the client's and the backend's too). bench/run.sh
// measures the proxy alone, as a separate process, beside nginx.
func BenchmarkEndToEnd1KiB(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 1024)
	be := backend(b, "127.1.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(body)
	}))
	_, url, _ := startSturdy(b, parseConfig(b, basicConfig, map[string]string{"b1": addr(be)}))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Get(url + "/bench")
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}
