//go:build !nokube

package cli

import (
	"context"
	"log/slog"
	"os"

	"github.com/sturdyproxy/sturdy/internal/adapt/kube"
	"github.com/sturdyproxy/sturdy/internal/config"
	"github.com/sturdyproxy/sturdy/internal/server"
)

// withKubernetes is false in builds tagged nokube: Kubernetes mode's
// client libraries double the binary and add about 14 MiB of resident
// pages at start (their init code and type data), even in file mode.
const withKubernetes = true

// serveKubernetes runs sturdy as a Gateway API and Ingress implementation:
// the file's config plus what the cluster's objects translate to
// (docs/kubernetes.md). SIGHUP re-reads the file's part, as in file mode.
func serveKubernetes(ctx context.Context, cfg *config.Config, file string, log *slog.Logger) int {
	data, err := os.ReadFile(file)
	if err != nil {
		log.Error("cannot start", "err", err)
		return exitFail
	}
	return serveWith(ctx, cfg, log, func(opts []server.Option) (*server.Server, error) {
		srv, _, _, err := kube.NewServer(file, data, log, kube.Wiring{Path: file, Server: opts})
		return srv, err
	})
}
