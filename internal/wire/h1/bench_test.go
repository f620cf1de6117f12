package h1

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
)

// BenchmarkServe is one keep-alive GET over loopback answered by a
// handler that writes a fixed body with its length and type set, as the
// proxy does: the front end's own allocations per request (the client's
// side reads raw bytes and allocates nothing per request).
//
//	go test -run '^$' -bench Serve -benchmem ./internal/wire/h1
func BenchmarkServe(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		body := bytes.Repeat([]byte("x"), size)
		b.Run(strconv.Itoa(size>>10)+"KiB", func(b *testing.B) {
			addr, _ := start(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h := w.Header()
				h["Content-Type"] = []string{"text/plain"}
				h["Content-Length"] = []string{strconv.Itoa(len(body))}
				w.Write(body)
			}), nil)
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			br := bufio.NewReaderSize(nc, 64<<10)
			req := []byte("GET /x HTTP/1.1\r\nHost: example.com\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n")
			resp, err := readOne(nc, br, req)
			if err != nil {
				b.Fatal(err)
			}
			// The same length again: the sizing holds.
			nc.Write(req)
			if _, err := io.ReadFull(br, resp); err != nil || !bytes.HasPrefix(resp, []byte("HTTP/1.1 200 OK\r\n")) || !bytes.HasSuffix(resp, body) || br.Buffered() != 0 {
				b.Fatalf("the second response is not the first's length: %v", err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := nc.Write(req); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(br, resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// readOne sends req once and returns the whole response as read, to size
// the reads of the ones that follow (the same bytes but the Date field,
// whose length does not change).
func readOne(nc net.Conn, br *bufio.Reader, req []byte) ([]byte, error) {
	if _, err := nc.Write(req); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, err
	}
	var raw bytes.Buffer
	resp.Write(&raw)
	return make([]byte, raw.Len()), nil
}
