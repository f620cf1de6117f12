package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/cloudflare/tableflip"
	"github.com/sturdyproxy/sturdy/internal/access/ratelimit"
	"github.com/sturdyproxy/sturdy/internal/compile"
	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/ops/lint"
	"github.com/sturdyproxy/sturdy/internal/server"
	"github.com/sturdyproxy/sturdy/internal/server/sdnotify"
)

// version is set at build time with -ldflags "-X .../internal/cli.version=v1.2.3".
var version = "dev"

func (p *program) cmdVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := p.newFlags("version", stderr)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
		fmt.Fprintf(stdout, "%s %s %s\n", p.name, v, bi.GoVersion)
		return exitOK
	}
	fmt.Fprintf(stdout, "%s %s\n", p.name, v)
	return exitOK
}

func (p *program) cmdCheck(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := p.newFlags("check", stderr)
	file := configFlag(fs)
	quiet := fs.Bool("q", false, "print errors only, no warnings")
	if code, ok := parseFlagsAndFile(fs, args, file); !ok {
		return code
	}
	cfg, err := p.load(*file)
	if err != nil {
		printConfigError(stderr, err)
		return exitFail
	}
	// The same compile as run and reload: every file the config names is
	// read, so that a missing certificate fails here, not at reload.
	rt, err := compile.Compile(cfg, nil, compile.Env{})
	if err != nil {
		printConfigError(stderr, err)
		return exitFail
	}
	rt.Close()
	if errs := writablePaths(cfg); len(errs) > 0 {
		printConfigError(stderr, errs)
		return exitFail
	}
	if !*quiet {
		for _, w := range append(lint.Check(cfg), rt.Warnings...) {
			fmt.Fprintf(stderr, "warning: %s\n", w.Error())
		}
	}
	fmt.Fprintf(stdout, "%s: ok (%d listeners, %d routes, %d pools)\n", *file, len(cfg.Listeners), len(cfg.Routes), len(cfg.Pools))
	return exitOK
}

func printConfigError(w io.Writer, err error) {
	var list config.ErrorList
	if errors.As(err, &list) {
		for _, e := range list {
			fmt.Fprintf(w, "%s\n", e.Error())
		}
		fmt.Fprintf(w, "%d error(s)\n", len(list))
		return
	}
	fmt.Fprintln(w, err)
}

// newLogger builds the process logger from the config's log settings.
func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func (p *program) cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := p.newFlags("run", stderr)
	file := configFlag(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cfg, err := p.load(*file)
	if err != nil {
		printConfigError(stderr, err)
		return exitFail
	}
	log := newLogger(cfg.Log, stderr)
	for _, w := range lint.Check(cfg) {
		log.Warn("risky config", "at", w.Error())
	}
	if p.kube != nil {
		return serveWith(ctx, cfg, log, func(opts []server.Option) (*server.Server, error) {
			return p.kube(*file, log, opts)
		})
	}
	return serve(ctx, cfg, log, func() (*config.Config, error) { return p.load(*file) })
}

// serve runs a server until ctx ends; SIGHUP re-reads the config through
// load, and so does the admin API's reload. SIGUSR2 upgrades the binary:
// a new process started from the same path takes over the listening
// sockets and the hosts' state, and this one drains and exits.
func serve(ctx context.Context, cfg *config.Config, log *slog.Logger, load func() (*config.Config, error), extra ...server.Option) int {
	return serveWith(ctx, cfg, log, func(opts []server.Option) (*server.Server, error) {
		srv, err := server.New(cfg, log, append(opts, extra...)...)
		if err == nil {
			srv.SetLoader(load)
		}
		return srv, err
	})
}

// serveWith runs the server that build makes (with the process's options:
// systemd notification, inherited sockets) until ctx ends.
func serveWith(ctx context.Context, cfg *config.Config, log *slog.Logger, build func([]server.Option) (*server.Server, error)) int {
	// go-redis has one logger per process; this is where the process
	// starts serving, before any Redis client exists.
	ratelimit.LogRedisTo(log)
	endProfile, err := startProfile(log)
	if err != nil {
		log.Error("cannot start", "err", err)
		return exitFail
	}
	defer endProfile()
	opts := []server.Option{server.WithNotifier(sdnotify.FromEnv()), server.WithVersion(version)}
	upg, err := tableflip.New(tableflip.Options{PIDFile: cfg.PIDFile})
	if err != nil {
		log.Debug("binary upgrades are off", "err", err)
		upg = nil
	} else {
		defer upg.Stop()
		opts = append(opts, server.WithSockets(upg))
	}
	srv, err := build(opts)
	if err != nil {
		printConfigError(os.Stderr, err)
		log.Error("cannot start", "err", err)
		return exitFail
	}
	if path := os.Getenv(stateEnv); path != "" {
		// Started by a binary upgrade: take over the hosts' state first.
		if err := srv.RestoreState(path); err != nil {
			log.Warn("could not take over the previous process's host state", "err", err)
		}
		os.Remove(path)
		os.Unsetenv(stateEnv)
	}
	// Signals are caught before the listeners open: a SIGHUP or SIGUSR2
	// sent as soon as sturdy is ready must not kill it.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	usr2 := make(chan os.Signal, 1)
	signal.Notify(usr2, syscall.SIGUSR2)
	defer signal.Stop(usr2)
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	if err := srv.Start(); err != nil {
		log.Error("cannot start", "err", err)
		return exitFail
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	if upg != nil {
		if err := upg.Ready(); err != nil {
			log.Warn("could not tell the previous process that this one is ready", "err", err)
		}
		if upg.HasParent() {
			// A binary upgrade: systemd must follow the new main process.
			sdnotify.FromEnv().MainPID(os.Getpid(), "upgraded to "+version)
		}
		go handleUpgrades(runCtx, upg, usr2, srv, log, stop)
	}
	go func() {
		// SIGUSR1 reopens the log files, as for nginx: logrotate renames
		// them, then signals (sturdy reopen).
		for {
			select {
			case <-runCtx.Done():
				return
			case <-usr1:
			}
			if err := srv.ReopenLogs(); err != nil {
				log.Warn("could not reopen the log files", "err", err)
			} else {
				log.Info("log files reopened")
			}
		}
	}()
	reload := make(chan struct{})
	go func() {
		for {
			select {
			case <-runCtx.Done():
				return
			case <-hup:
			}
			select {
			case reload <- struct{}{}:
			case <-runCtx.Done():
				return
			}
		}
	}()
	if err := srv.Run(runCtx, reload); err != nil {
		log.Error("sturdy stopped with an error", "err", err)
		return exitFail
	}
	return exitOK
}

// stateEnv names the file a process hands its hosts' state over in.
const stateEnv = "STURDY_UPGRADE_STATE"

// handleUpgrades starts a new process on SIGUSR2 and, once a new process
// is ready, ends this one's run (stop) without shutdown_delay: the new
// process serves already.
func handleUpgrades(ctx context.Context, upg *tableflip.Upgrader, usr2 <-chan os.Signal, srv *server.Server, log *slog.Logger, stop func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-upg.Exit():
			log.Info("a new process took over the listeners; draining and exiting")
			srv.HandOver()
			stop()
			return
		case <-usr2:
			f, err := os.CreateTemp("", "sturdy-state-*.json")
			if err == nil {
				f.Close()
				if err = srv.SaveState(f.Name()); err == nil {
					os.Setenv(stateEnv, f.Name())
				}
			}
			if err != nil {
				log.Warn("the new process will start without this one's host state", "err", err)
			}
			log.Info("binary upgrade: starting a new process", "executable", os.Args[0])
			if err := upg.Upgrade(); err != nil {
				log.Error("binary upgrade failed; this process keeps serving", "err", err)
				if f != nil {
					os.Remove(f.Name())
				}
			}
			os.Unsetenv(stateEnv)
		}
	}
}
