package kube

import (
	"fmt"
	"log/slog"
	"os"
	"sync"

	"k8s.io/klog/v2"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/server"
)

// Wiring is what NewServer needs besides the file.
type Wiring struct {
	// Controller's options; Base and Apply are set by NewServer.
	Options
	// Server options (tests add a dialer).
	Server []server.Option
	// Path, when set, is re-read by the server's reload (SIGHUP, the
	// admin API) and becomes the base of every translation after.
	Path string
}

// ProcessFileServer is NewFileServer for the process that serves: it first
// sends client-go's lines (klog's, one logger per process) through sturdy's
// logger, JSON when log.format says so. klog's logger is a process global
// that client-go's goroutines read without a lock, so it is set here, once,
// before any of them runs, and never by a server built in a test.
func ProcessFileServer(path string, log *slog.Logger, opts []server.Option) (*server.Server, error) {
	klogOnce.Do(func() { klog.SetSlogLogger(log) })
	return NewFileServer(path, log, opts)
}

var klogOnce sync.Once

// NewFileServer is NewServer for the config file at path, re-read on
// reload, with the process's server options: what sturdy-gateway run
// serves (internal/cli's KubeServer).
func NewFileServer(path string, log *slog.Logger, opts []server.Option) (*server.Server, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, config.ErrorList{{File: path, Msg: fmt.Sprintf("cannot read config: %v", err)}}
	}
	srv, _, _, err := NewServer(path, data, log, Wiring{Path: path, Server: opts})
	return srv, err
}

// NewServer builds a server whose config is the file's (name, data) plus
// what the cluster's objects translate to, and the controller that keeps
// it so. The controller runs under the server's supervisor from Start;
// until its first translation is applied /readyz says not ready. The
// returned reload re-reads the file (SIGHUP): load is called for the new
// bytes and, when they parse, they become the base of every translation.
func NewServer(name string, data []byte, log *slog.Logger, w Wiring) (srv *server.Server, ctl *Controller, setBase func([]byte) error, err error) {
	var mu sync.Mutex // guards file
	file := data
	base := func() (*config.Config, error) {
		mu.Lock()
		b := file
		mu.Unlock()
		return config.Parse(b, name)
	}
	cfg, err := base()
	if err != nil {
		return nil, nil, nil, err
	}
	if cfg.Kubernetes == nil {
		return nil, nil, nil, config.ErrorList{{File: name, Msg: "no kubernetes section; Kubernetes mode (sturdy-gateway run) needs one (docs/kubernetes.md)"}}
	}
	// The first config is the file's alone, with no Kubernetes object: it
	// serves the admin listener (and the file's own routes) until the
	// caches have synced.
	first := Translate(Input{Base: cfg, Snap: &Snapshot{}})
	if err := first.Config.Finish(); err != nil {
		return nil, nil, nil, err
	}
	o := w.Options
	o.Base, o.Log = base, log
	var s *server.Server
	o.Apply = func(c *config.Config) error { return s.Reload(c) }
	ctl, err = New(cfg, o)
	if err != nil {
		return nil, nil, nil, err
	}
	opts := append([]server.Option{server.WithReadiness(ctl.Ready), server.WithComponent("kubernetes", ctl.Run), server.WithCollector(ctl)}, w.Server...)
	s, err = server.New(first.Config, log, opts...)
	if err != nil {
		return nil, nil, nil, err
	}
	setBase = func(b []byte) error {
		c, err := config.Parse(b, name)
		if err != nil {
			return err
		}
		if c.Kubernetes == nil {
			return config.ErrorList{{File: name, Msg: "the kubernetes section was removed; sturdy-gateway keeps serving the previous config (a file without it is served by sturdy run)"}}
		}
		mu.Lock()
		file = b
		mu.Unlock()
		ctl.Resync()
		return nil
	}
	if w.Path != "" {
		s.SetLoader(func() (*config.Config, error) {
			b, err := os.ReadFile(w.Path)
			if err != nil {
				return nil, config.ErrorList{{File: w.Path, Msg: fmt.Sprintf("cannot read config: %v", err)}}
			}
			if err := setBase(b); err != nil {
				return nil, err
			}
			return ctl.Build()
		})
	}
	return s, ctl, setBase, nil
}
