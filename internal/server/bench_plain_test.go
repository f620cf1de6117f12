package server

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"strconv"
	"testing"
)

// BenchmarkPlainGET is one keep-alive 1 KiB GET through the native front
// end, the proxy and the upstream client to an origin on loopback. Both
// the client and the origin speak raw bytes from fixed buffers and
// allocate nothing per request, so allocs/op is sturdy's alone.
//
//	go test -run '^$' -bench PlainGET -benchmem ./internal/server
func BenchmarkPlainGET(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 1024)
	origin := plainOrigin(b, "127.1.0.1", append([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: "+
		strconv.Itoa(len(body))+"\r\n\r\n"), body...))
	_, url, _ := startSturdy(b, parseConfig(b, basicConfig, map[string]string{"b1": origin}))
	nc, err := net.Dial("tcp", url[len("http://"):])
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	br := bufio.NewReaderSize(nc, 16<<10)
	req := []byte("GET /bench HTTP/1.1\r\nHost: example.com\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n")
	for range 2 { // warm the pools and the upstream connection
		if err := plainExchange(nc, br, req, len(body)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := plainExchange(nc, br, req, len(body)); err != nil {
			b.Fatal(err)
		}
	}
}

// plainExchange writes req and reads one response head and its body, which
// must be of length n, without allocating.
func plainExchange(nc net.Conn, br *bufio.Reader, req []byte, n int) error {
	if _, err := nc.Write(req); err != nil {
		return err
	}
	length := -1
	for first := true; ; first = false {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if first && !bytes.HasPrefix(line, []byte("HTTP/1.1 200 ")) {
			return fmt.Errorf("status line %q", line)
		}
		if len(line) <= 2 {
			break
		}
		if k, v, ok := bytes.Cut(line, []byte(":")); ok && bytes.EqualFold(k, []byte("Content-Length")) {
			length = 0
			for _, c := range bytes.TrimSpace(v) {
				length = length*10 + int(c-'0')
			}
		}
	}
	if length != n {
		return fmt.Errorf("Content-Length %d, want %d", length, n)
	}
	_, err := br.Discard(n)
	return err
}

// plainOrigin answers every request head it reads on ip with resp and
// returns its address; it ignores request bodies (the benchmark sends
// none).
func plainOrigin(b *testing.B, ip string, resp []byte) string {
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	b.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			go func() {
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadSlice('\n')
					if err != nil {
						c.Close()
						return
					}
					if len(line) <= 2 {
						if _, err := c.Write(resp); err != nil {
							c.Close()
							return
						}
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}
