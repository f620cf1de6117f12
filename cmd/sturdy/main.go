// Command sturdy is a reverse proxy and load balancer that attributes every
// failure to its real cause before acting on it. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sturdyproxy/sturdy/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
