//go:build linux

package server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/event"
	"github.com/sturdyproxy/sturdy/internal/outcome"
	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
)

// exhaustChild is set in the environment of the process that runs the
// scenario under a file-descriptor limit of its own.
const exhaustChild = "STURDY_TEST_EXHAUST_CHILD"

// Item 5: when sturdy runs out of file descriptors, its failed dials to a
// healthy backend are local_error, charged to no host; clients get 503
// saying so; the failures are counted by operation and resource, logged
// as one aggregated warning, announced as resource_exhausted, and fail
// readiness. Once descriptors are free the same clients are served.
//
// The limit is the process's, so the scenario runs in a child process
// (this test binary again) with RLIMIT_NOFILE lowered to 1024.
func TestOwnExhaustionIsNotTheHosts(t *testing.T) {
	if os.Getenv(exhaustChild) == "" {
		t.Parallel()
		cmd := exec.Command(os.Args[0], "-test.run=^TestOwnExhaustionIsNotTheHosts$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), exhaustChild+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestOwnExhaustionIsNotTheHosts") {
			t.Fatalf("the scenario under a 1024-descriptor limit failed: %v\n%s", err, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "faults_exhaust_test.go") {
				t.Log(strings.TrimSpace(l))
			}
		}
		return
	}
	lim := syscall.Rlimit{Cur: 1024, Max: 1024}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("lowering the file descriptor limit: %v", err)
	}
	// The backend closes every connection after answering, so every
	// request needs a new dial (a new descriptor).
	b := backend(t, "127.1.13.60", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "ok")
	}))
	var events []event.Event
	s, url, logs := startSturdy(t, parseConfig(t, `
admin: { listen: "off" }
log: { aggregate_interval: 1h }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: app, default: true, pool: app } ]
pools:
  - name: app
    hosts: [ { addr: "{{b}}" } ]
    health: { passive: { window: 30s, min_requests: 5, min_clients: 1 } }
`, map[string]string{"b": addr(b)}))
	evs := make(chan event.Event, 64)
	s.Events().Subscribe(func(e event.Event) {
		select {
		case evs <- e:
		default:
		}
	})
	// Keep-alive client connections from several addresses, opened while
	// descriptors are free.
	type client struct {
		c  net.Conn
		br *bufio.Reader
	}
	var clients []client
	for i := range 4 {
		c := rawDial(t, fmt.Sprintf("127.0.13.%d", 60+i), strings.TrimPrefix(url, "http://"))
		defer c.Close()
		clients = append(clients, client{c, bufio.NewReader(c)})
	}
	ask := func(cl client) int {
		cl.c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(cl.c, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(cl.br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, cl := range clients {
		if st := ask(cl); st != 200 {
			t.Fatalf("before the exhaustion: %d", st)
		}
	}
	// Take every free descriptor.
	var fill []*os.File
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			break
		}
		fill = append(fill, f)
	}
	const each = 8
	n503 := 0
	for range each {
		for _, cl := range clients {
			if ask(cl) == http.StatusServiceUnavailable {
				n503++
			}
		}
	}
	reason := func() string { _, r := s.localView(time.Now()); return r }()
	for _, f := range fill {
		f.Close()
	}
	if n503 != each*len(clients) {
		t.Errorf("%d of %d requests got 503 while sturdy had no descriptors", n503, each*len(clients))
	}
	if got := s.local.Counts()["upstream"]["file_descriptors"]; got != uint64(each*len(clients)) {
		t.Errorf("upstream file_descriptors failures counted %d, want %d", got, each*len(clients))
	}
	if got := allAttempts(s, outcome.LocalError); got != uint64(each*len(clients)) {
		t.Errorf("%d attempts classed local_error, want %d", got, each*len(clients))
	}
	hostsClean(t, s)
	if !strings.Contains(reason, "out of resources") || !strings.Contains(reason, "file_descriptors") {
		t.Errorf("readiness reason while exhausted: %q", reason)
	}
	if !testutil.Eventually(5*time.Second, func() bool {
		for {
			select {
			case e := <-evs:
				events = append(events, e)
				if e.Type == event.ResourceExhausted {
					return true
				}
			default:
				return false
			}
		}
	}) {
		t.Errorf("no %s event; events: %v", event.ResourceExhausted, events)
	}
	s.agg.Flush()
	if !strings.Contains(logs.String(), "sturdy ran out of file descriptors") || !strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("no aggregated warning about sturdy's own descriptors:\n%s", logs.String())
	}
	for _, cl := range clients {
		if st := ask(cl); st != 200 {
			t.Errorf("after descriptors were freed: %d", st)
		}
	}
	t.Logf("limit 1024: %d descriptors taken, %d requests answered 503 as local_error, host healthy", len(fill), n503)
}

// When sturdy is out of file descriptors, the admin listener still
// answers /livez and /readyz (readiness failing, with the reason) from a
// few spare descriptors held for it, taken again after each connection,
// so that more probes than spares are answered; its accept errors are
// counted as sturdy's own exhaustion and announced once, never written
// as a line per error.
func TestAdminAnswersWhileOutOfDescriptors(t *testing.T) {
	const child = exhaustChild + "_ADMIN"
	if os.Getenv(child) == "" {
		t.Parallel()
		cmd := exec.Command(os.Args[0], "-test.run=^TestAdminAnswersWhileOutOfDescriptors$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), child+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestAdminAnswersWhileOutOfDescriptors") {
			t.Fatalf("the scenario under a 1024-descriptor limit failed: %v\n%s", err, tail(out, 60))
		}
		if n := strings.Count(string(out), "Accept error"); n > 0 {
			t.Errorf("%d accept errors written one line each:\n%s", n, tail(out, 20))
		}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "faults_exhaust_test.go") {
				t.Log(strings.TrimSpace(l))
			}
		}
		return
	}
	lim := syscall.Rlimit{Cur: 1024, Max: 1024}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("lowering the file descriptor limit: %v", err)
	}
	s, _, logs := startSturdy(t, parseConfig(t, `
admin: { listen: "127.0.0.1:0" }
log: { aggregate_interval: 1h }
listeners: [ { name: web, listen: "127.0.0.1:0" } ]
routes: [ { name: app, default: true, pool: app } ]
pools: [ { name: app, hosts: [ { addr: "{{b}}" } ] } ]
`, map[string]string{"b": deadAddr(t)}))
	evs := make(chan event.Event, 64)
	s.Events().Subscribe(func(e event.Event) {
		select {
		case evs <- e:
		default:
		}
	})
	var fill []*os.File
	take := func() {
		for {
			f, err := os.Open(os.DevNull)
			if err != nil {
				return
			}
			fill = append(fill, f)
		}
	}
	defer func() {
		for _, f := range fill {
			f.Close()
		}
	}()
	// The clients' sockets are made before the descriptors run out, and
	// driven with system calls that need no other descriptor, so that
	// sturdy alone is short of them.
	const probes = 3 * 4 // three times the spares
	adminPort := s.AdminAddr()[strings.LastIndexByte(s.AdminAddr(), ':')+1:]
	port, _ := strconv.Atoi(adminPort)
	socks := make([]int, probes)
	defer func() {
		for _, fd := range socks {
			if fd > 0 {
				syscall.Close(fd)
			}
		}
	}()
	for i := range socks {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 34, byte(1 + i%3)}}); err != nil {
			t.Fatal(err)
		}
		syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &syscall.Timeval{Sec: 5})
		socks[i] = fd
	}
	probe := func(fd int, path string) (int, string) {
		err := syscall.Connect(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
		for err == syscall.EINTR {
			// Interrupted by the runtime's preemption signal: the
			// connection goes on in the background.
			_, err = syscall.Getpeername(fd)
		}
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		if _, err := syscall.Write(fd, []byte("GET "+path+" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")); err != nil {
			t.Fatalf("write: %v", err)
		}
		var got []byte
		buf := make([]byte, 4096)
		for {
			n, err := syscall.Read(fd, buf)
			if err == syscall.EINTR {
				continue // the runtime's preemption signal
			}
			if n <= 0 || err != nil {
				break // closed after the answer (or timed out)
			}
			got = append(got, buf[:n]...)
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(got)), nil)
		if err != nil {
			t.Fatalf("%s while out of descriptors: %v (read %q)", path, err, got)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	take()
	spares := s.adminReserve.Len()
	for i := range probes {
		path, want := "/livez", http.StatusOK
		if i%2 == 1 {
			path, want = "/readyz", http.StatusServiceUnavailable
		}
		st, body := probe(socks[i], path)
		syscall.Close(socks[i])
		socks[i] = -1
		// The spare is taken again once sturdy closed the connection,
		// before the test takes what is free. (Under -race the runtime
		// opens a file now and then: a spare lost to it is taken again
		// at the next accept, so more probes than spares proves the
		// retaking, not each wait.)
		if !testutil.Eventually(2*time.Second, func() bool { return s.adminReserve.Len() == spares }) {
			t.Logf("after probe %d the reserve holds %d of %d", i+1, s.adminReserve.Len(), spares)
		}
		if st != want || want == http.StatusServiceUnavailable && !strings.Contains(body, "out of resources") {
			t.Errorf("probe %d, %s: %d %q, want %d", i+1, path, st, body, want)
		}
		take()
	}
	accepts := s.local.Counts()["accept"]["file_descriptors"]
	for _, f := range fill {
		f.Close()
	}
	fill = nil
	if accepts < probes {
		t.Errorf("%d accept failures counted as sturdy's own, want at least %d", accepts, probes)
	}
	exhausted := 0
	testutil.Eventually(3*time.Second, func() bool {
		for {
			select {
			case e := <-evs:
				if e.Type == event.ResourceExhausted {
					exhausted++
				}
			default:
				return exhausted > 0
			}
		}
	})
	if exhausted != 1 {
		t.Errorf("%d %s events, want 1 for the episode", exhausted, event.ResourceExhausted)
	}
	if strings.Contains(logs.String(), "Accept error") {
		t.Errorf("accept errors logged one by one:\n%s", logs.String())
	}
	if st, _ := get(t, http.DefaultClient, "http://"+s.AdminAddr()+"/livez"); st.StatusCode != 200 {
		t.Errorf("after: /livez %d", st.StatusCode)
	}
	if !testutil.Eventually(5*time.Second, func() bool { return s.adminReserve.Len() == spares }) {
		t.Errorf("after the episode the reserve holds %d of %d", s.adminReserve.Len(), spares)
	}
	t.Logf("limit 1024, %d spares: %d probes answered while out of descriptors, %d accept failures counted, %d event", spares, probes, accepts, exhausted)
}
