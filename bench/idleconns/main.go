// Command idleconns measures what a proxy holds per idle keep-alive client
// connection: it reads the proxy's resident memory (VmRSS of the given
// PIDs, summed), opens -n connections from several loopback source
// addresses, sends one request on each and reads the whole answer, waits
// for the proxy to settle, reads the memory again, and prints the
// difference per connection. The connections stay open (idle, keep-alive)
// until the second reading, then are closed.
//
// Loopback only; the count and the time are bounded (-n at most 50,000,
// -timeout for the whole run).
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	target := flag.String("target", "127.0.0.1:18081", "proxy address (loopback)")
	path := flag.String("path", "/1k", "request path")
	pids := flag.String("pids", "", "comma-separated PIDs of the proxy's processes (their VmRSS is summed)")
	n := flag.Int("n", 10000, "idle connections to hold (1..50000)")
	sources := flag.Int("sources", 8, "source addresses 127.0.0.2 ... used round robin (1..200)")
	settle := flag.Duration("settle", 3*time.Second, "wait after the last connection before the second reading")
	timeout := flag.Duration("timeout", 120*time.Second, "limit for the whole run")
	flag.Parse()
	if err := run(*target, *path, *pids, *n, *sources, *settle, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "idleconns:", err)
		os.Exit(1)
	}
}

func run(target, path, pidList string, n, sources int, settle, timeout time.Duration) error {
	host, _, err := net.SplitHostPort(target)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		return fmt.Errorf("-target %q: must be a loopback address with a port", target)
	}
	if n < 1 || n > 50000 || sources < 1 || sources > 200 {
		return errors.New("-n must be 1..50000 and -sources 1..200")
	}
	var pids []int
	for _, s := range strings.Split(pidList, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("-pids %q: %v", pidList, err)
		}
		pids = append(pids, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	before, err := rss(pids)
	if err != nil {
		return err
	}
	req := "GET " + path + " HTTP/1.1\r\nHost: bench\r\n\r\n"
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range n {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%sources))}}
		c, err := d.DialContext(ctx, "tcp", target)
		if err != nil {
			return fmt.Errorf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, req); err != nil {
			return fmt.Errorf("connection %d: %v", i, err)
		}
		resp, err := http.ReadResponse(bufio.NewReaderSize(c, 512), nil)
		if err != nil {
			return fmt.Errorf("connection %d: %v", i, err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || resp.Close {
			return fmt.Errorf("connection %d: status %d, close %v, %v", i, resp.StatusCode, resp.Close, err)
		}
		c.SetDeadline(time.Time{})
	}
	select {
	case <-time.After(settle):
	case <-ctx.Done():
		return ctx.Err()
	}
	after, err := rss(pids)
	if err != nil {
		return err
	}
	fmt.Printf("connections %d\nrss_before_kib %d\nrss_after_kib %d\nbytes_per_idle_conn %d\n",
		n, before, after, (after-before)*1024/int64(n))
	return nil
}

// rss sums VmRSS of the processes, in KiB.
func rss(pids []int) (int64, error) {
	var sum int64
	for _, p := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				f := strings.Fields(v)
				k, err := strconv.ParseInt(f[0], 10, 64)
				if err != nil {
					return 0, fmt.Errorf("/proc/%d/status: %v", p, err)
				}
				sum += k
			}
		}
	}
	return sum, nil
}
