package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/demo"
)

func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("demo", stderr)
	printConfig := fs.Bool("print-config", false, "print the embedded demo config and exit")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *printConfig {
		stdout.Write(demo.Config)
		return exitOK
	}
	cfg, err := config.Parse(demo.Config, "(embedded demo config)")
	if err != nil {
		printConfigError(stderr, err)
		return exitFail
	}
	backends, err := demo.Start(demo.BackendAddrs)
	if err != nil {
		fmt.Fprintf(stderr, "sturdy demo: %v\nStop whatever uses that port, or run your own config with 'sturdy run -c FILE'.\n", err)
		return exitFail
	}
	defer backends.Close()
	listen := cfg.Listeners[0].Listen
	fmt.Fprintf(stdout, `sturdy demo: three backends on %v, sturdy in front of them.

Try:
  curl -i http://%[2]s/                 round robin over all three backends
  curl -i http://%[2]s/api/hello        least connections over b1 and b2
  curl -N http://%[2]s/stream           server-sent events, streamed as they come
  curl -i http://%[2]s/status/503       a backend's own 503, passed through
  curl -i http://%[2]s/cached/page      through the cache: see Cache-Status and Age

The status page:  http://%[3]s/status
Metrics:          http://%[3]s/metrics

The config it runs: sturdy demo -print-config
Stop with Ctrl-C.

`, demo.BackendAddrs, listen, cfg.Admin.Listen)
	return serve(ctx, cfg, newLogger(cfg.Log, stderr), func() (*config.Config, error) {
		return config.Parse(demo.Config, "(embedded demo config)")
	})
}
