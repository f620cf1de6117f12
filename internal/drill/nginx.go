package drill

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ErrNoNginx means nginx is not installed and could not be installed; the
// comparison is skipped, which is not a failure of the drill.
var ErrNoNginx = errors.New("nginx is not available")

// Nginx returns Debian's nginx as a target: the binary on PATH (or in
// /usr/sbin), installed with `apt-get install -y nginx` first when absent
// and install is set. Progress of an installation goes to log. The error
// wraps ErrNoNginx when there is no nginx to drill.
func Nginx(ctx context.Context, install bool, log io.Writer) (Target, error) {
	bin, err := findNginx()
	if err != nil && install {
		if ierr := installNginx(ctx, log); ierr != nil {
			return nil, fmt.Errorf("%w: %v", ErrNoNginx, ierr)
		}
		bin, err = findNginx()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: not installed (apt-get install nginx)", ErrNoNginx)
	}
	out, err := exec.CommandContext(ctx, bin, "-v").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%w: %s -v: %v", ErrNoNginx, bin, err)
	}
	version := strings.TrimSpace(string(out))
	if _, v, ok := strings.Cut(version, "nginx/"); ok {
		version = v
	}
	return &nginxTarget{bin: bin, version: version}, nil
}

func findNginx() (string, error) {
	if p, err := exec.LookPath("nginx"); err == nil {
		return p, nil
	}
	// root's PATH has /usr/sbin; other users' often does not.
	const debian = "/usr/sbin/nginx"
	if _, err := os.Stat(debian); err == nil {
		return debian, nil
	}
	return "", ErrNoNginx
}

// installNginx runs apt-get, refreshing the package lists once if the
// first attempt fails (a fresh container has none).
func installNginx(ctx context.Context, log io.Writer) error {
	if os.Geteuid() != 0 {
		return errors.New("not installed, and installing it needs root: apt-get install nginx")
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return errors.New("not installed, and there is no apt-get to install it with")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	fmt.Fprintln(log, "drill: nginx is not installed; running apt-get install -y nginx ...")
	apt := func(args ...string) error {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = log, log
		return cmd.Run()
	}
	if apt("install", "-y", "nginx") == nil {
		return nil
	}
	if err := apt("update"); err != nil {
		return fmt.Errorf("apt-get update failed: %v", err)
	}
	if err := apt("install", "-y", "nginx"); err != nil {
		return fmt.Errorf("apt-get install nginx failed: %v", err)
	}
	return nil
}

type nginxTarget struct {
	bin     string
	version string
}

func (t *nginxTarget) Name() string { return "nginx " + t.version + " (incident-style configs)" }

func (t *nginxTarget) layout(st *stage) (layout, error) { return layout{hosts: st.hosts}, nil }

// start writes the scenario's config into a fresh prefix directory and runs
// nginx in the foreground from it, with its own pid file, temp paths and
// error log, on a loopback port picked for it.
func (t *nginxTarget) start(ctx context.Context, st *stage) (proxy, error) {
	dir, err := os.MkdirTemp("", "sturdy-drill-nginx-")
	if err != nil {
		return nil, err
	}
	// The workers run as an unprivileged user and must reach the cache and
	// temp directories nginx creates inside.
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	listen, err := freePort(st.net.proxy())
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	conf := nginxConf(dir, workerUser(), st.nginx(vars{Listen: listen, Pools: st.pools, Dir: dir}))
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p := &nginxProxy{dir: dir, errLog: filepath.Join(dir, "error.log"), eps: map[string]endpoint{}, exited: make(chan struct{})}
	for _, need := range st.routes {
		host := need.host
		if need.unmatched {
			host = unmatchedHost
		}
		p.eps[need.role] = endpoint{Addr: listen, Host: host, Path: need.path}
	}
	p.cmd = exec.Command(t.bin, "-p", dir+"/", "-c", confPath, "-e", p.errLog, "-g", "daemon off;")
	p.cmd.Stdout, p.cmd.Stderr = &p.output, &p.output
	// Its own process group, so that its workers can be stopped with it
	// if the master does not stop them.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting nginx: %w", err)
	}
	go func() {
		p.cmd.Wait()
		close(p.exited)
	}()
	if err := p.waitListening(ctx, listen); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// workerUser is the user directive for a root master: Debian's www-data
// when it exists, else nobody.
func workerUser() string {
	if os.Geteuid() != 0 {
		return "" // nginx ignores the directive, and says so
	}
	if b, err := os.ReadFile("/etc/passwd"); err == nil && bytes.Contains(b, []byte("\nwww-data:")) {
		return "www-data www-data"
	}
	return "nobody nogroup"
}

// nginxProxy is one nginx for one scenario run.
type nginxProxy struct {
	dir    string
	errLog string
	eps    map[string]endpoint
	cmd    *exec.Cmd
	output bytes.Buffer // written by exec until the process exits
	exited chan struct{}
	armAt  int64     // error log size when the episode began
	armed  time.Time // when the episode began
}

func (p *nginxProxy) waitListening(ctx context.Context, addr string) error {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			return fmt.Errorf("nginx exited at start: %s%s", strings.TrimSpace(p.output.String()), p.tail())
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("nginx did not listen on %s within 5s%s", addr, p.tail())
}

// tail returns the end of the error log for an error message.
func (p *nginxProxy) tail() string {
	b, _ := os.ReadFile(p.errLog)
	s := strings.TrimSpace(string(b))
	if len(s) > 600 {
		s = "..." + s[len(s)-600:]
	}
	if s == "" {
		return ""
	}
	return "; error log: " + s
}

func (p *nginxProxy) endpoint(role string) (endpoint, bool) {
	ep, ok := p.eps[role]
	return ep, ok
}

// expect: the incident-style configs have no sorry page and no stale bound
// of their own; their timeouts are the scenarios' defaults.
func (p *nginxProxy) expect(string) expectation { return expectation{} }

func (p *nginxProxy) arm() {
	p.armed = time.Now()
	if fi, err := os.Stat(p.errLog); err == nil {
		p.armAt = fi.Size()
	}
}

func (p *nginxProxy) observe() observation {
	var o observation
	if f, err := os.Open(p.errLog); err == nil {
		defer f.Close()
		if _, err := f.Seek(p.armAt, io.SeekStart); err == nil {
			o = analyzeErrorLog(f)
		}
	}
	// Seconds with "no live upstreams" can span one more wall-clock second
	// than the episode lasted.
	o.poolEmpty = min(o.poolEmpty, time.Since(p.armed).Round(time.Second))
	o.noCounters = "nginx keeps no count of the upstream's error answers (they show only in access-log lines)"
	return o
}

// close stops nginx by its PID: SIGTERM (fast shutdown) to the master, then
// SIGKILL to its process group if it has not exited within 5s.
func (p *nginxProxy) close() {
	pid := p.cmd.Process.Pid
	syscall.Kill(pid, syscall.SIGTERM)
	select {
	case <-p.exited:
		// A master in fast shutdown waits for its workers before exiting.
	case <-time.After(5 * time.Second):
		// The workers are in the master's process group.
		syscall.Kill(-pid, syscall.SIGKILL)
		<-p.exited
	}
	os.RemoveAll(p.dir)
}
