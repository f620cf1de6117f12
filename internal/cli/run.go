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

	"github.com/sturdyproxy/sturdy/internal/compile"
	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/lint"
	"github.com/sturdyproxy/sturdy/internal/server"
)

// version is set at build time with -ldflags "-X .../internal/cli.version=v1.2.3".
var version = "dev"

func cmdVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("version", stderr)
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
		fmt.Fprintf(stdout, "sturdy %s %s\n", v, bi.GoVersion)
		return exitOK
	}
	fmt.Fprintf(stdout, "sturdy %s\n", v)
	return exitOK
}

func cmdCheck(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("check", stderr)
	file := configFlag(fs)
	quiet := fs.Bool("q", false, "print errors only, no warnings")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cfg, err := config.Load(*file)
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

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("run", stderr)
	file := configFlag(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cfg, err := config.Load(*file)
	if err != nil {
		printConfigError(stderr, err)
		return exitFail
	}
	log := newLogger(cfg.Log, stderr)
	for _, w := range lint.Check(cfg) {
		log.Warn("risky config", "at", w.Error())
	}
	return serve(ctx, cfg, log, func() (*config.Config, error) { return config.Load(*file) })
}

// serve runs a server until ctx ends; SIGHUP re-reads the config through
// load, and so does the admin API's reload.
func serve(ctx context.Context, cfg *config.Config, log *slog.Logger, load func() (*config.Config, error)) int {
	server.Version = version
	srv, err := server.New(cfg, log)
	if err != nil {
		log.Error("cannot start", "err", err)
		return exitFail
	}
	srv.SetLoader(load)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	reload := make(chan struct{})
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
			}
			select {
			case reload <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
	}()
	if err := srv.Run(ctx, reload); err != nil {
		log.Error("sturdy stopped with an error", "err", err)
		return exitFail
	}
	return exitOK
}
