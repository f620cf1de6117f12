package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sturdyproxy/sturdy/internal/testing/testutil"
	"github.com/sturdyproxy/sturdy/internal/view"
)

// buildSturdy builds the sturdy binary into dir with version v.
func buildSturdy(t *testing.T, out, v string, flags ...string) {
	t.Helper()
	args := append([]string{"build", "-o", out, "-ldflags", "-X github.com/sturdyproxy/sturdy/internal/cli.version=" + v}, flags...)
	cmd := exec.Command("go", append(args, "../../cmd/sturdy")...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// backendAt answers with its name on a new loopback port.
func backendAt(t *testing.T, ip, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			// real: in flight while the old process hands over to the new
			// one; both are processes of their own on the real clock.
			time.Sleep(200 * time.Millisecond)
		}
		io.WriteString(w, name)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// process is a sturdy binary running with a config file.
type process struct {
	cmd *exec.Cmd
	// logs is a file, not a pipe: a process started by a binary upgrade
	// inherits it, and a pipe would keep Wait from returning until that
	// one exits too.
	logs   *os.File
	exited chan struct{} // closed once the process has exited
}

func startProcess(t *testing.T, bin, cfg string, env ...string) *process {
	t.Helper()
	logs, err := os.CreateTemp(t.TempDir(), "sturdy-*.log")
	if err != nil {
		t.Fatal(err)
	}
	p := &process{logs: logs, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, "run", "-c", cfg)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
		}
		if t.Failed() {
			b, _ := os.ReadFile(p.logs.Name())
			t.Logf("sturdy's log:\n%s", b)
		}
		p.logs.Close()
	})
	return p
}

func status(admin string) (view.Status, error) {
	var st view.Status
	resp, err := http.Get("http://" + admin + "/api/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

const upgradeConfig = `
admin: { listen: "{{admin}}", token: "0123456789abcdef0123456789abcdef" }
pid_file: "{{pidfile}}"
shutdown_grace: 5s
listeners: [ { name: web, listen: "{{web}}" } ]
routes: [ { name: site, default: true, pool: web } ]
pools: [ { name: web, hosts: [ { addr: "{{b1}}" }, { addr: "{{b2}}" } ] } ]
`

func writeConfig(t *testing.T, path, tmpl string, vars map[string]string) {
	t.Helper()
	for k, v := range vars {
		tmpl = strings.ReplaceAll(tmpl, "{{"+k+"}}", v)
	}
	if err := os.WriteFile(path, []byte(tmpl), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A binary upgrade hands the sockets and the hosts' state to a freshly
// built binary under keep-alive load: no connection refused, no request
// failed, a drained host stays drained, the old process exits.
func TestBinaryUpgradeUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the sturdy binary twice; -short skips it")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "sturdy")
	buildSturdy(t, bin, "v1")
	vars := map[string]string{
		"admin": freeAddr(t), "web": freeAddr(t), "pidfile": filepath.Join(dir, "sturdy.pid"),
		"b1": backendAt(t, "127.1.0.1", "b1"), "b2": backendAt(t, "127.1.0.2", "b2"),
	}
	cfg := filepath.Join(dir, "sturdy.yaml")
	writeConfig(t, cfg, upgradeConfig, vars)
	p := startProcess(t, bin, cfg)
	admin, web := vars["admin"], vars["web"]
	if !testutil.Eventually(10*time.Second, func() bool { st, err := status(admin); return err == nil && st.Version == "v1" }) {
		t.Fatal("v1 never answered")
	}
	// An operator drained b2; the new process must know.
	req, _ := http.NewRequest("POST", "http://"+admin+"/api/hosts/web/"+vars["b2"]+"/drain", nil)
	req.Header.Set("Authorization", "Bearer 0123456789abcdef0123456789abcdef")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("drain: %v %v", resp, err)
	}

	var sent, failed, refused atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keep := &http.Client{Timeout: 5 * time.Second}
			fresh := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				client, path := keep, "/"
				if c%2 == 1 {
					client = fresh // a new connection every time
				}
				if i%7 == 0 {
					path = "/slow"
				}
				sent.Add(1)
				resp, err := client.Get("http://" + web + path)
				if err != nil {
					failed.Add(1)
					if strings.Contains(err.Error(), "refused") {
						refused.Add(1)
					}
					t.Logf("request failed: %v", err)
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(body) != "b1" {
					failed.Add(1)
					t.Logf("answer %d %q (b2 is drained)", resp.StatusCode, body)
				}
			}
		}()
	}
	if !testutil.Eventually(10*time.Second, func() bool { return sent.Load() >= 20 }) {
		t.Fatalf("the load sent %d requests in 10s", sent.Load())
	}
	buildSturdy(t, bin+".new", "v2")
	if err := os.Rename(bin+".new", bin); err != nil {
		t.Fatal(err)
	}
	oldPID := p.cmd.Process.Pid
	p.cmd.Process.Signal(syscall.SIGUSR2)
	var st view.Status
	if !testutil.Eventually(20*time.Second, func() bool {
		var err error
		st, err = status(admin)
		return err == nil && st.Version == "v2"
	}) {
		t.Fatal("v2 never took over")
	}
	// The load goes on through v2 for another 100 requests.
	if after := sent.Load() + 100; !testutil.Eventually(10*time.Second, func() bool { return sent.Load() >= after }) {
		t.Fatalf("the load sent only %d of %d requests within 10s of v2 taking over", sent.Load(), after)
	}
	close(stop)
	wg.Wait()
	t.Logf("binary upgrade under load: %d requests, %d failed, %d connections refused", sent.Load(), failed.Load(), refused.Load())
	if failed.Load() != 0 || sent.Load() < 20 {
		t.Errorf("%d of %d requests failed across the upgrade (%d refused)", failed.Load(), sent.Load(), refused.Load())
	}
	for _, h := range st.Pools[0].Hosts {
		if h.Addr == vars["b2"] && h.State != "drained" {
			t.Errorf("b2 is %s in the new process, was drained in the old", h.State)
		}
	}
	pidText, _ := os.ReadFile(vars["pidfile"])
	newPID, _ := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if newPID == oldPID || newPID == 0 {
		t.Errorf("pid file says %d (the old process was %d)", newPID, oldPID)
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Error("the old process is still running")
	}
	if newPID > 0 {
		t.Cleanup(func() { syscall.Kill(newPID, syscall.SIGTERM) })
	}
}

// sturdy reload validates, asks the running sturdy to reload, and exits 1
// with the reason when the file or the reload is refused.
func TestReloadCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the sturdy binary; -short skips it")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "sturdy")
	buildSturdy(t, bin, "dev")
	b1 := backendAt(t, "127.1.0.1", "b1")
	for _, withToken := range []bool{true, false} {
		t.Run(fmt.Sprintf("token=%v", withToken), func(t *testing.T) {
			tmpl := upgradeConfig
			if !withToken {
				tmpl = strings.Replace(tmpl, `, token: "0123456789abcdef0123456789abcdef"`, "", 1)
			}
			vars := map[string]string{"admin": freeAddr(t), "web": freeAddr(t), "pidfile": filepath.Join(t.TempDir(), "sturdy.pid"), "b1": b1, "b2": b1}
			vars["b2"] = backendAt(t, "127.1.0.2", "b2")
			cfg := filepath.Join(t.TempDir(), "sturdy.yaml")
			writeConfig(t, cfg, tmpl, vars)
			startProcess(t, bin, cfg)
			if !testutil.Eventually(10*time.Second, func() bool { _, err := os.Stat(vars["pidfile"]); return err == nil }) {
				t.Fatal("never ready")
			}
			reload := func() (int, string) {
				var out, errb bytes.Buffer
				code := sturdy().cmdReload(context.Background(), []string{"-c", cfg}, &out, &errb)
				return code, out.String() + errb.String()
			}
			if code, out := reload(); code != 0 || !strings.Contains(out, "reloaded") {
				t.Fatalf("good file: exit %d: %s", code, out)
			}
			os.WriteFile(cfg, []byte("listeners: [ { name: web, listen: nowhere } ]\n"), 0o600)
			if code, out := reload(); code != 1 || !strings.Contains(out, "not reloaded") {
				t.Errorf("broken file: exit %d: %s", code, out)
			}
			// Valid, but the running instance cannot apply it: a second
			// listener on an address already taken.
			taken, _ := net.Listen("tcp", "127.0.0.1:0")
			defer taken.Close()
			writeConfig(t, cfg, strings.Replace(tmpl, `listeners: [ { name: web, listen: "{{web}}" } ]`,
				`listeners: [ { name: web, listen: "{{web}}" }, { name: more, listen: "`+taken.Addr().String()+`" } ]`, 1), vars)
			if code, out := reload(); code != 1 || !strings.Contains(out, "refused") {
				t.Errorf("refused reload: exit %d: %s", code, out)
			}
		})
	}
}

// Under systemd, sturdy speaks the notify protocol: READY once its
// listeners are bound, RELOADING then READY around a reload, STOPPING at
// shutdown.
func TestSystemdNotify(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the sturdy binary; -short skips it")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "sturdy")
	buildSturdy(t, bin, "dev")
	sock := filepath.Join(dir, "notify.sock")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	vars := map[string]string{"admin": freeAddr(t), "web": freeAddr(t), "pidfile": filepath.Join(dir, "pid"),
		"b1": backendAt(t, "127.1.0.1", "b1"), "b2": backendAt(t, "127.1.0.2", "b2")}
	cfg := filepath.Join(dir, "sturdy.yaml")
	writeConfig(t, cfg, upgradeConfig, vars)
	p := startProcess(t, bin, cfg, "NOTIFY_SOCKET="+sock)
	next := func() string {
		buf := make([]byte, 4096)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		return string(buf[:n])
	}
	if m := next(); !strings.HasPrefix(m, "READY=1\n") {
		t.Fatalf("first notification %q, want READY=1", m)
	}
	if _, err := net.Dial("tcp", vars["web"]); err != nil {
		t.Errorf("READY came before the listener accepted: %v", err)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	if m := next(); !strings.HasPrefix(m, "RELOADING=1\nMONOTONIC_USEC=") {
		t.Errorf("on SIGHUP %q, want RELOADING=1 with MONOTONIC_USEC", m)
	}
	if m := next(); !strings.HasPrefix(m, "READY=1\n") {
		t.Errorf("after the reload %q, want READY=1", m)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if m := next(); !strings.HasPrefix(m, "STOPPING=1\n") {
		t.Errorf("on SIGTERM %q, want STOPPING=1", m)
	}
}
