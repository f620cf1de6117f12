// Command sturdy-gateway is sturdy as a Gateway API and Ingress
// controller: the same proxy, config and runtime as the sturdy command,
// with Kubernetes mode, whose client libraries sturdy itself does not
// link. See docs/kubernetes.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sturdyproxy/sturdy/internal/adapt/kube"
	"github.com/sturdyproxy/sturdy/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.RunGateway(ctx, os.Args[1:], os.Stdout, os.Stderr, kube.ProcessFileServer)
	stop()
	os.Exit(code)
}
