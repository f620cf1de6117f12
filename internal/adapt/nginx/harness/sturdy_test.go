package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sturdyproxy/sturdy/internal/adapt/nginx/nginxtest"
	"github.com/sturdyproxy/sturdy/internal/config"
	"go.yaml.in/yaml/v3"
)

// rewriteSturdy points the translation at loopback: listeners on the
// planned ports with the test certificate, pool hosts on the recording
// backend, files where nginxtest.Rewrite put nginx's (absolute roots and
// aliases below prefix/www, password files at prefix/htpasswd), the admin
// listener off. It returns the listener addresses.
func rewriteSturdy(y []byte, file, prefix, cert, key string, port func(string) int, backend func(string) string) ([]string, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(y, &doc); err != nil {
		return nil, err
	}
	doc["admin"] = map[string]any{"listen": "off"}
	doc["shutdown_grace"] = "1s"
	var wait []string
	for _, l := range asList(doc["listeners"]) {
		m := l.(map[string]any)
		addr := fmt.Sprintf("127.0.0.1:%d", port(nginxtest.SturdyListenKey(m["listen"].(string))))
		m["listen"] = addr
		wait = append(wait, addr)
		if tls, ok := m["tls"].(map[string]any); ok {
			if _, one := tls["cert"]; one {
				tls["cert"], tls["key"] = cert, key
			}
			for _, c := range asList(tls["certificates"]) {
				cm := c.(map[string]any)
				cm["cert"], cm["key"] = cert, key
			}
			// nginxtest.Rewrite drops client certificate checks: nginx
			// cannot be given the CA files.
			delete(tls, "client_auth")
		}
	}
	for _, r := range asList(doc["routes"]) {
		m := r.(map[string]any)
		if st, ok := m["static"].(map[string]any); ok {
			for _, k := range []string{"root", "alias"} {
				if d, ok := st[k].(string); ok && !strings.HasPrefix(d, prefix+"/") {
					st[k] = filepath.Join(prefix, "www", d)
				}
			}
		}
		if ba, ok := m["basic_auth"].(map[string]any); ok {
			ba["htpasswd"] = filepath.Join(prefix, "htpasswd")
		}
	}
	for _, p := range asList(doc["pools"]) {
		m := p.(map[string]any)
		var hosts []any
		seen := map[string]bool{}
		for _, h := range asList(m["hosts"]) {
			hm := h.(map[string]any)
			addr := hm["addr"].(string)
			if addr != "127.0.0.1:0" {
				addr = backend(addr)
			}
			if seen[addr] {
				continue
			}
			seen[addr] = true
			hm["addr"] = addr
			hosts = append(hosts, hm)
		}
		m["hosts"] = hosts
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	if _, err := config.Parse(out, file); err != nil {
		return nil, err
	}
	return wait, os.WriteFile(file, out, 0o644)
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// sturdyProc is a running `sturdy run`.
type sturdyProc struct {
	cmd    *exec.Cmd
	out    bytes.Buffer // written by exec until the process exits
	exited chan struct{}
}

func startSturdy(ctx context.Context, file string, wait []string) (*sturdyProc, error) {
	p := &sturdyProc{exited: make(chan struct{})}
	p.cmd = exec.Command(sturdyBin, "run", "-c", file)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		p.cmd.Wait()
		close(p.exited)
	}()
	if err := nginxtest.WaitListening(ctx, wait, p.exited); err != nil {
		p.stop()
		return nil, fmt.Errorf("%v: %s", err, p.out.String())
	}
	return p, nil
}

// stop ends sturdy by its PID (SIGTERM, SIGKILL after 5s) and waits.
func (p *sturdyProc) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
}
